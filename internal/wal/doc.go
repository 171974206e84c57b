// Package wal is the local engine: the write path and read path of one log
// kept in local segment files. It owns the committer (one write a round,
// and one fdatasync in flight at a time, covering the rounds written before
// it started), writer fencing, segment rolling, recovery, the closed
// record, and reading segment files. It meets engine.Engine; the
// group-commit queue, the reader set-up (where a reader may start, what it
// does at the tail, tick delivery) and the retention policy it applies are
// package engine's, shared with the object and quorum engines.
//
// # Group commit
//
// Appenders encode their entries, under the log's mutex, straight into the
// batch that the next commit will write (a group). One committer goroutine
// per log takes every group queued since its last round and writes them with
// one write call each (usually one: a group grows until MaxBatchBytes). An
// AppendBatch call never spans two groups, so it is atomic across crashes:
// its entries share one checksummed batch.
//
// With SyncAlways the commit is pipelined (pipeline.go). A round written is
// not synced at once: the committer starts one fdatasync (a flight) in a
// goroutine of its own, covering every round written so far, and while it is
// in the air writes the rounds queued meanwhile, which wait for the next
// flight. At most one flight is in the air, and the next starts only after
// it has returned. When a flight returns successfully, its rounds' appends
// are acknowledged and the readers woken; then, before the next flight, the
// committer waits for the producers it acknowledged to append again (until
// as many appends as it acknowledged are queued, for at most half the last
// fdatasync's time and gatherMax), so that a closed loop of N producers puts
// about N appends in a flight rather than alternating N/2 between two. A
// round of ticks only is settled with the rounds written before it, or at
// once if there are none.
//
// Lock order: commitMu, then mu. Only a holder of commitMu starts, waits for
// or settles a flight. A roll (which seals the file the flight syncs), Fence
// and Close first settle every round written (settleAll).
//
// # Durability
//
// With SyncAlways (the default) an append is acknowledged after the
// fdatasync that covers it has returned. SyncInterval and SyncNever
// acknowledge after the write(2) and sync later; they can lose acknowledged
// entries at a power loss or kernel crash and exist only as opt-ins.
//
// When a write or fdatasync fails, no append of that round, nor of any round
// written after it, is acknowledged (a write that fails while a flight is in
// the air first waits for it: if it succeeds its rounds are acknowledged):
// the committer cuts the segment back to its last synced size and syncs that;
// if that works the log goes on from there (the failed entries' offsets are
// reused), and if it does not the log refuses every later append with the
// error until it is reopened, which recovers from what is on disk. An
// fdatasync is never retried as if a failed one had worked. The conditional
// appends queued behind a failed round fail with its error (they were
// checked against offsets the round did not take); see engine.Queue.Rewind.
//
// The first append with a producer after Open rebuilds the log's
// deduplication table (engine.Dedup) from the appends sections of its
// newest engine.DedupReachBytes of batches, read from the sparse index
// entry before that reach (docs/exactly-once.md).
//
// A full disk (ENOSPC, EDQUOT) fails the round with rpcerr.ErrNoSpace in the
// same way, and the next round tries the disk again, so appends resume by
// themselves once space is freed. The Disk shared by a data directory's
// logs refuses, before writing, a round that would eat into its reserve of
// free space, and reports the disk full until an append succeeds again.
//
// # Fencing
//
// A log has one writer epoch at a time. Fence raises it after the committer's
// rounds written have settled (the flight in the air returned, and the rounds
// written since synced) and fails every queued append of an older
// epoch, so once Fence returns no append of an older epoch is acknowledged.
// The new writer goes on in the active segment: each batch carries its
// writer's epoch, and nothing of the old writer is written after Fence.
//
// # Segments
//
// A segment is sealed when it is full (SegmentBytes), too old (SegmentAge)
// or the log closed. A writer change does not roll it, and after a clean
// close the next Open's first append reopens the newest segment rather than
// creating a file (segment.Reopen: its footer is cut off and the cut
// synced before any batch is appended to it), if the closed record ends
// where that segment ends (it was sealed by Close, not by a roll a crash
// interrupted) and the segment is neither full nor too old. So many short
// writers, one after another on an open log or each in a process of its
// own, fill one file; a crash at any point leaves the segment sealed as it
// was, or open and ending at its last whole batch, never below the closed
// record.
//
// # Merging small segments
//
// Other ways of ending a segment leave its file however small: a log
// rolled by age (SegmentAge) and appended to rarely, in one process or
// across restarts and crashes, and the files of earlier versions (one per
// writer). (A crash alone leaves none: recovery makes the open segment it
// finds the active one again.) So a goroutine of the log merges small sealed
// segments (merge.go), after Open's recovery and after every roll that
// seals one, one merge at a time, and one at a time among the logs that
// share a Disk (a data directory); Close stops it and waits for it. A
// sealed segment is small when its file is under Options.MergeSmall bytes
// (SegmentBytes/8 unless set; negative turns merging off). The oldest run
// of two or more adjacent small sealed segments holding together at most
// SegmentBytes/2 bytes, whose newest entries lie within an eighth of
// Options.RetentionAge of the first's (if the log has a retention by age:
// retention drops a whole segment once its newest entry is older than the
// age, so a merged file keeps an entry at most that much longer than its
// own segment would have), is merged into one file, if its files other than
// the largest hold an eighth of the largest's bytes or more, or it has 8
// files or more: so a merged file is not copied again for every small
// segment sealed after it (they merge among themselves first, and merged
// files grow by a factor each time), and at most 7 small files wait beside
// one. The active segment is never merged, nor the newest sealed one while
// there is no active segment (the next append may reopen it).
//
// The batches are copied as they are (offsets, epochs, compression: no
// entry is decoded again; each batch's CRC is checked on the way) into
// "<first segment's name>.merging" in the log's directory, after a header
// like the first segment's, with a footer whose index and max time cover
// them all (segment.WriteMerged), and the file synced. This happens without
// holding the log's commit lock: sealed segments do not change. Then, under
// it, the merge gives up if retention or a truncation dropped one of the
// segments meanwhile; else the file is renamed over the first segment's
// file (the name stays: same base offset), the directory synced, and the
// log's list of sealed segments updated; then the other segments' files
// are removed and the directory synced. Their files are removed, not kept
// in the free directory: a tiny file would take the place of a full one
// there. The first segment's batches lie at the same positions in the
// merged file as in its own, so a reader (or the dedup load, or the
// logical bytes' cache) holding the old Info reads the new file right; a
// reader that finds a file gone, or its segment's file replaced (the log
// counts its merges), looks the segment up again. A crash leaves the
// temporary file, which Open removes (Check notes it as harmless), or the
// merged file and some of the others, each wholly covered by the segment
// before it, which Open removes too (Check notes them as harmless); never
// a gap or an entry twice. A merge that fails is logged at Warn and leaves
// the files as they were; it never fails the log. A merge is logged at
// Info with the files and bytes merged.
//
// # Segment files written over
//
// Appending to a new file makes every fdatasync also commit the blocks the
// file grew by. So when retention or Truncate drops sealed segments (oldest
// first), up to Options.ReuseSegments of their files (DefaultReuseSegments)
// are kept in the directory "free" of the log's directory instead of being
// removed (free.go): each is renamed to free/<next>.free, where next is the
// offset after the segment's last entry, and the log directory is synced
// before the free one, so that no crash leaves a file under both names.
// A new segment is created over a kept file whose next is at most its base
// offset (segment.CreateOver: the new header written and synced before the
// rename, the free directory synced before the log's), so that its batches
// overwrite old ones; the old bytes after them are told from damage by
// their offsets, all below the new base (package segment's Recovery). A
// log's offsets only grow, so this always holds, except where offsets are
// taken again: after a failed round (the segment is cut back and synced, so
// nothing of the failed round stays in the file), after Repair (the cut
// is within the open segment), and after a crash with SyncNever or
// SyncInterval lost entries acknowledged before a sync, or dropped segments
// whose truncation point the metadata did not yet hold: then no kept file
// qualifies, since its next is above the base, and a new file is created.
// Open finds the kept files again and removes those beyond the limit.
// Deleting the log's directory removes them with it. They hold deleted
// entries until they are overwritten, and are not counted in Stats' Bytes.
//
// # The closed record
//
// Besides its segments, a log's directory holds the file "closed" once the
// log has been closed cleanly: where the log ended then, when every segment
// was sealed. It is written to "closed.tmp", synced, renamed over "closed"
// and the directory synced, so a crash leaves the old record or the new one.
// Its 16 bytes, little-endian:
//
//	 0    4 magic  "TRNC"
//	 4    8 end    the offset after the last entry
//	12    4 crc    CRC-32C of bytes [0, 12)
//
// Every entry below end was acknowledged, and the log never shrinks at its
// end, so recovery refuses (*rpcerr.CorruptError) to cut the last segment
// below end, or to open a log that ends before it: what would otherwise look
// like a torn tail (the last batches and the footer of the last segment
// damaged, or its file gone) is damage. A record that does not decode is
// logged and ignored.
//
// # Degraded logs and repair
//
// Damage to the open segment that recovery does not take for a torn write
// (a valid batch follows it, the closed record says the cut would lose
// acknowledged entries, or the header of a file longer than a sector is
// bad) opens the log degraded (damage.go): its valid prefix is readable,
// appends fail with rpcerr.ErrDamaged naming the file and byte, and the
// damage is logged once at Error. Nothing is cut until Repair is told to
// accept the loss; it first appends a line to the file "repairs" of the
// log's directory (plain text, one line per repair: UTC time, file, byte,
// size, new end, what is lost, the damage; replaced whole with
// vfs.ReplaceFile), then removes the closed record, then truncates the
// segment and syncs it. Check (check.go) verifies a log's files offline,
// changing nothing.
package wal
