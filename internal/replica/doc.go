// Package replica is the buffer-node side of quorum mode: what runs on each
// node of a segment's ensemble. The log's writer cuts its batches into
// fragments (one or more whole record batches each) and sends every fragment
// of the open segment to each node of the ensemble; it acknowledges a batch
// to its clients once AckQuorum nodes hold it durably (package quorum does
// that arithmetic). A node keeps the fragments of open segments in memory
// and in a local journal, and answers fence, list, read, seal, offload and
// drop. Recovery of a segment whose writer died is done by another writer,
// as in BookKeeper: fence the ensemble with a higher epoch, read each node's
// durable fragment count, copy forward, seal.
//
// A Store holds one node's segments on disk; Local and Conn reach it as a
// Node, in process or over the network (Server): add streams on
// connections of their own (wire.go), the other calls over gRPC
// (api/ternpb/replica.proto), both on the node's one port.
//
// # Invariants
//
//   - A node holds a prefix of a segment's fragments: fragment n is added
//     only after n-1 (rpcerr.ErrFragmentGap), and is durable only once every fragment
//     before it is.
//   - Once Fence(epoch) has returned, no add below epoch becomes durable,
//     before or after a crash; the count it returned is the node's durable
//     count, which only a Seal can lower.
//   - A fragment reported durable is on disk, and after a crash the node
//     recovers it byte for byte, unless a Seal discarded it.
//
// # Files
//
// Under the store's directory, one directory per log, named by its ID in
// 20 decimal digits, holds two files per segment, named by its sequence
// number in 20 decimal digits:
//
//	<dir>/LOCK                                    held while the Store is open
//	<dir>/00000000000000000012/00000000000000000003.frags  the journal
//	<dir>/00000000000000000012/00000000000000000003.state  fence and seal, once needed
//	<dir>/free/00000000000000000041.frags         a dropped journal, to write over
//
// # Journal (format version 2; all integers little-endian)
//
//	header, 48 bytes:
//	     0    4 magic    "TRRJ"
//	     4    1 version  2
//	     5    3 reserved zero
//	     8    8 log      the log's ID
//	    16    8 seq      the segment's sequence number
//	    24    8 epoch    the segment's fenced epoch when it was created: the
//	                     epoch of its first Add, or of the Fence that
//	                     created it
//	    32    8 nonce    random and not zero, drawn when the journal is
//	                     created
//	    40    4 crc      CRC-32C (Castagnoli) of bytes [0, 40)
//	    44    4 reserved zero
//	frames, back to back, one per fragment, fragment n being the n-th:
//	     0    4 magic    "TRRF"
//	     4    4 length   of the data, at most MaxFragmentBytes
//	     8    8 n        the fragment's number
//	    16    4 crc      CRC-32C of bytes [4, 16) followed by the data
//	                     (FrameSum), as the writer computed it
//	    20    8 nonce    the journal's, from its header
//	    28    length     data: the fragment's bytes, as the writer sent them
//
// Version 1 (a 40-byte header without the nonce, 20-byte frame headers) is
// refused with a *CorruptError that says to drain the node with the build
// that wrote it.
//
// The writer computes each frame's checksum once, over the fragment it cut,
// and sends it with the fragment to every replica, which writes it as it
// came (as BookKeeper's bookies store the client's digest): a replica does
// not compute it again, and bytes damaged on the way to its disk fail the
// check wherever the frame is read. The frames of one group commit go to
// the file in one writev, from the fragments' own buffers.
//
// The journal is created by the committer, header and first frames in one
// writev, then synced, and its directory synced (the log directory itself
// was created and its parent synced before), before any of its fragments,
// or the epoch in its header, is reported durable.
//
// # Reused journals
//
// Writing into a new file makes every fdatasync commit the blocks the file
// grew by: on the benchmark disk, three streams of 2.5 MB writes, each
// followed by an fdatasync, did about two thirds as much into new files as
// over old ones. So Drop keeps up to Options.ReuseJournals dropped journals
// in <dir>/free (renamed there, the log directory synced and then the free
// one, so that no crash leaves a journal under both names), and the
// committer writes a new journal over one of them when it has one: header
// and first frames from the start of the file, synced, then renamed to the
// journal's name, the free directory synced, then the log directory. The old
// journal's frames stay after the new one's until they are written over,
// some of them whole and at the very positions the new frames take, with the
// very fragment numbers: a frame's nonce must match its journal's, so that
// none of them passes for a frame of the new journal. And as the file takes
// its name only once its new header is durable, a journal's header is never
// an old one's. The free directory's journals are not counted in DiskBytes;
// Open keeps up to ReuseJournals of them and removes the others.
//
// A journal new or reused past its old end also gets zeros written ahead of
// its frames while its syncs are small (Options.ZeroAhead, vfs.Ahead), for
// the same reason. Zeros are no valid frame: recovery cuts them after the
// last frame (logged at Info when they are all it cuts), and a seal cuts
// them with the journal.
//
// # State file (48 bytes)
//
//	 0    4 magic    "TRRS"
//	 4    1 version  1
//	 5    1 flags    bit 0: sealed; the other bits zero
//	 6    2 reserved zero
//	 8    8 log
//	16    8 seq
//	24    8 epoch    the fenced epoch
//	32    8 count    the fragment count of a sealed segment, else zero
//	40    4 crc      CRC-32C of bytes [0, 40)
//	44    4 reserved zero
//
// A state file is written when a Fence (or a first Add) raises the fenced
// epoch above the one on disk, and when a segment is sealed: as
// <seq>.state.tmp, synced, renamed over <seq>.state, and the directory
// synced, all before the call is answered. The fenced epoch is the larger of
// the header's and the state file's. A seal persists the state file first
// and then truncates the journal after fragment count-1 and syncs it.
//
// # Recovery
//
// Open scans every journal from the header on. It stops at the first
// position that does not hold a valid frame (of the journal's nonce) of the
// next fragment number. If no valid frame of the journal starts after that
// position anywhere in the file, the rest is a torn tail left by a crash
// (nothing in it was reported durable), or what a reused file held before,
// and is truncated; otherwise Open refuses to guess and fails with a
// *CorruptError naming the file and position. In a sealed segment, frames
// from the sealed count on are truncated (a seal cut short after its state
// file was written); fewer frames than the count is a *CorruptError. A
// journal whose header is torn and that holds no valid frame was being
// created at the crash and is removed, unless a state file exists for it.
// Leftover .tmp files are removed, and a state file without a journal (a
// Drop cut short) too. Fragments of unsealed segments are loaded into
// memory.
//
// # Crash-safety assumptions
//
// Those of package vfs: data written is durable once File.Sync returns; a
// creation, rename or removal once SyncDir of its directory returns; what
// survives of unsynced writes is a prefix of them, the last one possibly
// torn at a sector boundary and followed by garbage up to the sector's end.
// Rename replaces the target atomically. A crash may lose anything not yet
// reported, but never what was.
//
// # Concurrency
//
// A Store's methods are safe for concurrent use. One committer goroutine
// per Store does every write to the journals and state files: it takes
// everything queued, across segments, writes each journal's new frames in
// large writes, syncs each file it wrote once (in parallel), syncs the
// directories of new journals, writes the state files and truncations that
// fences and seals asked for, and then reports: it calls the done functions
// given to Add, in the order of the Adds, from its own goroutine. It is
// pipelined: while one group's files are being synced, the committer
// already writes the next group's frames, as long as that group only
// appends to existing journals (anything else waits for the group before it
// to be reported), and it reports each group once its own syncs are done,
// in order. A write or sync error fails the segment: its queued and later
// calls fail with the error, a group written after the failed one is not
// reported durable even if its own sync succeeds, and no durability is
// reported that the disk does not have.
//
// Add never waits; Fence, Seal and Drop wait for what was queued for the
// segment before them (their point in the committer's queue). Reads of an
// unsealed segment are served from memory while its fragments are held
// there (see Memory), the others from its journal; they do not wait for the
// committer.
//
// Over the network, an add stream's server side adds each fragment as it
// arrives and answers with the durable count as the committer reports it,
// coalesced. It stops reading a connection that has streamWindowBytes of
// fragments not yet durable, so TCP's flow control holds the client's
// writer, and Send blocks once sendQueueBytes wait for it: neither side
// buffers without bound. Both ends ping an idle add connection, and drop
// one that stays silent (see wire.go); Conn's gRPC connection pings too
// (see ServerOptions), so that a dead replica fails its calls.
//
// Memory: Store.Add keeps the caller's data slice as the fragment's
// in-memory copy, for tail reads and then for the offload of the sealed
// segment (which reads neither the disk nor a gathered copy of the
// segment), until the segment is offloaded or dropped or memory is needed.
// MemBytes bounds the total: an add that would pass it first takes durable
// fragments out of memory, those of sealed segments first, oldest first in
// their segment (they are read from the journal from then on), and fails with
// rpcerr.ErrReplicaFull only if the fragments not yet durable would still pass it, which
// means the disk is not keeping up. DiskBytes bounds the journals' bytes,
// and an add past it fails with rpcerr.ErrReplicaFull. Open loads the fragments of
// unsealed segments, which then leave memory as adds need room.
//
// The server reads each fragment it receives into a buffer from
// Store.Buffer and adds it with AddBuffer, which gives the Store the
// buffer: once the fragment has left memory, the buffer goes back to a
// pool (up to half of MemBytes of them) for the fragments that follow.
// Without it, a node taking fragments as fast as others leave memory would
// have each one in memory the Go runtime had just returned to the kernel,
// faulted in and zeroed again page by page. A Read or an offload copies
// from a fragment's buffer after releasing the Store's lock, so each holds
// the buffer until it is done (see pooled); the last holder gives it back.
package replica
