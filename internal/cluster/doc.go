// Package cluster keeps the membership of a Tern cluster and the ownership of
// its logs in etcd: which nodes are alive, at which address, and which node
// serves each log. Placement (placement.go) decides, without I/O, which node
// should serve a log; a Node carries that out with Acquire and Release.
//
// # The etcd key space
//
// Under one key prefix, Options.Root (default "/tern/", shared with
// meta.Etcd, whose keys do not collide with these):
//
//	<root>nodes/<node-id>   {"addr":"<host:port>"}: a live node and its gRPC
//	                        address, JSON, with "leaving":true once it shuts
//	                        down (Leave); attached to the node's lease
//	<root>owners/<log-id>   "<node-id>": the node that serves the log; <log-id>
//	                        is the log ID in decimal; attached to the owner's
//	                        lease
//	<root>suspects/<node-id>/<by-id>
//	                        "<lease-id>": node <by-id> suspects node <node-id>,
//	                        on that lease (decimal), to be dead; attached to
//	                        <by-id>'s lease
//
// A node writes only its own nodes/ key, owners/ keys whose value is its
// ID, and suspects/ keys that end in its ID, always on its own lease; and
// it revokes another node's lease only as Suspect says. Join creates the nodes/ key only if it is
// absent, so two live nodes never share an ID. Acquire creates an owners/ key
// only if it is absent, and Release deletes one only if it holds the node's ID
// on the node's lease: ownership passes from node to node only through the
// key's absence.
//
// Each Node keeps a view of the nodes/ and owners/ prefixes in memory: one read of the key range
// [<root>nodes/, <root>owners0), then one watch of it from the read's revision
// on, so that the view moves from one revision to the next as etcd applied
// them. Keys in that range under neither prefix are ignored. When the watch
// breaks (compaction, a lost leader, a closed stream) the node reads the range
// again and watches on from there. Nothing is polled.
//
// # Leases
//
// Join grants one lease per node, with Options.TTL rounded up to whole seconds
// (etcd may raise it to its minimum), and renews it with KeepAliveOnce every
// third of its TTL. A renewal sent at t0 that comes back proves that the lease
// lives until at least t0+TTL, as the server measures the TTL from a later
// instant. Every key the node writes is on this lease, so when the node dies,
// or is cut off from etcd for longer than the TTL, its membership and all its
// ownerships vanish together, and other nodes see them go in their views.
// Close revokes the lease, so that they vanish at once. A nodes/ key's lease
// (the key's Lease, as etcd returns it) is the lease another node revokes
// to evict it.
//
// # Failure detection and eviction
//
// Detect links the node to every other member (a Peer: in the server, an
// idle gRPC connection) and, when a link goes down, probes the member's
// address: Probes refusals in a row, ProbeInterval apart (a host refuses
// at once a port nobody listens on), make the member suspected, and
// Suspect records the suspicion and counts the member's suspecters. Once a
// majority of the other live members suspect it (Evicted), the node that
// sees the majority revokes the member's lease: its nodes/ and owners/
// keys vanish at once, and the others take its logs over, well before the
// lease would have lapsed. One node whose own network is broken suspects
// every other, but it is one voice; a node that is not Valid suspects
// nobody; a node that is shutting down says so first (Leave, which sets
// "leaving" in its nodes/ value) and is not evicted. A probe that gets no answer in time (a paused process, a network
// that drops packets) says nothing, and leaves the member to its lease.
// Evicting a member that is alive after all costs availability, never
// safety: the member is lost, and the logs it served are fenced by their
// new owner's epoch (docs/cluster.md).
//
// # Valid and Lost
//
// Valid reports, without I/O, that the lease is proven not to have expired:
// the node has not been lost and the last successful renewal was sent less
// than TTL ago. Once Valid is false it stays false; there is no window in
// which a node believes it owns a log after its lease could have expired.
// But Valid does not prove that the lease still exists: the other members
// may have revoked it (eviction), and then the node's owners/ keys are gone
// and another node's Acquire of its logs may have succeeded, while this
// node is still Valid until it learns of the revocation, from its watch
// (its nodes/ key deleted) or its next renewal. What holds is weaker: while
// Valid holds and a majority of the other members has not suspected the
// node, its owners/ keys exist. Exclusivity is therefore never taken from
// Valid: a log's writer is fenced with an epoch (see Acquire).
//
// Lost is closed when the node gives its lease up for good: the lease was not
// renewed in time, etcd no longer has it (expired, or revoked by the others),
// the node's own nodes/ key was deleted, or Close. A lost node claims nothing any more: Owned is
// empty, Acquire fails with ErrLost, and whatever it served must be treated as
// served by someone else. It does not join again by itself; Join anew.
package cluster
