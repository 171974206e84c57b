// Package objlog is the object engine: the write path and read path of one
// log kept in object storage (the object mode), nothing on local disk,
// entries acknowledged once the object holding them is stored. It owns the
// flusher that cuts fragments and uploads them, segments in metadata,
// fencing an earlier writer's open segment, catch-up and tail reads,
// compaction, and deleting segments; it meets engine.Engine, whose
// group-commit queue, reader set-up and retention policy it uses.
//
// Quorum mode is this engine with a Placement (package quorumlog): the
// fragments of an open segment go to the placement's replicas instead of the
// bucket, its recovery replaces the fence object, readers read a segment
// from the placement until it is offloaded, and the log's offloader has the
// placement move each sealed segment to the bucket (offload.go) and records
// the objects in metadata. objlog never imports quorumlog.
//
// The files: objlog.go (options, the log, opening and loading segments),
// write.go (the flusher, fragments, uploads and their acknowledgement in
// order), fence.go (fencing and scanning an open segment), read.go
// (readers and the fetcher), gc.go (retention, deletion, compaction),
// placement.go (the Placement seam), offload.go (moving placed segments to
// the bucket).
//
// # Layout
//
// A log is a chain of segments, each recorded in metadata (meta.Segment) when
// it is created and when it is sealed, never in between. A segment's objects
// live under "<prefix><seq>/" (seq as 8 digits). While a segment is open its
// writer adds fragments "<seq>/<n>" (n = 00000000, 00000001, ...), each the
// concatenation of whole record batches (the bytes a local segment would
// hold), with consecutive offsets from one fragment to the next. Compaction
// later rewrites a sealed segment's fragments into a few large objects
// "<seq>/c<n>" and deletes the fragments; it checks every fragment first,
// and leaves a segment with a damaged one as it is.
//
// # Write path
//
// Appenders encode their entries into batches (groups) as the local write
// path does. A flusher cuts the queued batches into a fragment as soon as
// fewer than MaxInFlight uploads are under way, however few they are, so a
// lightly loaded log acknowledges an append one PUT after it arrives; while
// every upload is under way the queue fills, and a fragment takes up to
// FlushBytes of it, so a log at full load uploads full fragments. It gives
// them their offsets and uploads the fragment with a conditional PUT
// (If-None-Match: *). It copies the batches into the
// fragment after it has released the log's lock, so appends go on meanwhile,
// and computes each batch's CRC on the copy, which the copy has just brought
// into the CPU's cache. A fragment is acknowledged when
// its PUT and those of every earlier fragment have succeeded, in offset
// order, so the acknowledged entries are always a prefix of the log. A PUT
// whose outcome is unknown is retried; when the retry finds the object
// already there it reads it back, and only identical bytes count as success.
// An upload that keeps failing for RetryTimeout fails the log: no later
// append is acknowledged until a new writer recovers it.
//
// Without a Placement a segment rolls off the appends' path (roll.go): the
// next segment is created ahead, pending (its base unknown), and at the
// roll the flusher cuts into it at once while a goroutine seals the rolled
// one, which gives the pending one its base in the same metadata step.
//
// # Fencing and recovery
//
// A writer epoch owns the open segment it created; creating a segment is a
// metadata transaction that fails for any epoch but the log's newest. A new
// writer fences the previous open segment by storing a fence object at the
// first fragment number that has no object (conditionally, so it loses to a
// fragment stored first and then tries the next number). From then on the old
// writer can neither overwrite a fragment nor add one that would be read:
// readers stop at the first missing fragment or fence. The new writer then
// seals the segment in metadata with the fragments before the fence, and
// starts its own segment after it. Since the old writer acknowledges
// fragments in order and its PUT at the fence's number fails, every entry it
// acknowledged lies before the fence. A pending segment after the open one
// gets its base from that seal and is fenced and sealed next, or sealed
// empty if its first fragment starts past that base: then it holds only
// entries the old writer never acknowledged (fenceFollower).
//
// The first append with a producer after Open, or after a Fence that found
// the end moved by a writer elsewhere, rebuilds the log's deduplication
// table (engine.Dedup) from the appends sections of the newest
// engine.DedupReachBytes of batches: the newest objects, fetched whole, and
// of a larger one only its end, from the first batch boundary found there
// (docs/exactly-once.md).
//
// # Read path
//
// Readers at the tail are served from the acknowledged fragments the writer
// keeps in memory (CacheBytes, and SharedCache across logs: a log over
// either lets go of its oldest fragments but its newest). A reader further back reads the segment's
// objects with ranged GETs of up to ChunkBytes, keeping ReadAhead chunks'
// worth of bytes in flight (more GETs when the objects are small, up to four
// per chunk), and decodes the batches in order. A GET that ends is replaced
// at once, while the reader still waits for an earlier one, up to twice
// ReadAhead chunks fetched and not yet decoded: that bounds its memory.
// An object that disappears under a reader (compaction, truncation) makes it
// look the offset up again. Bytes that fail their checks, a batch that
// does not hold the offset the reader expects, or one that runs past its
// object's end (into the next object's offsets), fail the read with a
// *rpcerr.CorruptError naming the object and position (a placed segment's
// damaged copies are the Placement's to read around).
package objlog
