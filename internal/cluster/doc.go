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
//	                        address, JSON; attached to the node's lease
//	<root>owners/<log-id>   "<node-id>": the node that serves the log; <log-id>
//	                        is the log ID in decimal; attached to the owner's
//	                        lease
//
// A node writes only its own nodes/ key and owners/ keys whose value is its
// ID, always on its own lease. Join creates the nodes/ key only if it is
// absent, so two live nodes never share an ID. Acquire creates an owners/ key
// only if it is absent, and Release deletes one only if it holds the node's ID
// on the node's lease: ownership passes from node to node only through the
// key's absence.
//
// Each Node keeps a view of both prefixes in memory: one read of the key range
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
// Close revokes the lease, so that they vanish at once.
//
// # Valid and Lost
//
// Valid reports, without I/O, that the lease is proven alive now: the node has
// not been lost and the last successful renewal was sent less than TTL ago.
// While Valid holds, the node's owners/ keys exist, so no other node's Acquire
// of those logs can succeed (short of someone deleting a key by hand).
// Once Valid is false it stays false; there is no window in which a node
// believes it owns a log after its lease could have expired.
//
// Lost is closed when the node gives its lease up for good: the lease was not
// renewed in time, etcd no longer has it, the node's own nodes/ key was
// deleted, or Close. A lost node claims nothing any more: Owned is
// empty, Acquire fails with ErrLost, and whatever it served must be treated as
// served by someone else. It does not join again by itself; Join anew.
package cluster
