// Package check checks the history of a reliability test against the
// promises of Tern's log (DESIGN.md §2). A harness runs real Tern processes
// under faults, records every client operation in a History, reads each log
// once more in full after the faults are healed, and asks Check for the
// anomalies. The package is pure: no I/O, no wall clock, no Tern types,
// only offsets and the values the harness appended.
//
// Why: the bugs that tests of this kind have found in systems like Tern are
// the ones checked here. Jepsen found that NATS JetStream could lose writes
// it had acknowledged, and whole streams, after crashes; that Redpanda could
// duplicate writes and hand out the same offset to different values; and a
// model check of BookKeeper found that a ledger recovery racing its old
// writer could close the ledger short of an entry already acknowledged.
//
// # Model
//
// A log is a dense sequence of offsets 0, 1, 2, ... Every value the harness
// appends is unique, so a value names one entry. An append of a batch of
// values (Invoke) ends acknowledged at an offset (OK), definitely not
// applied (Fail), or with an outcome unknown (Unknown, or never completed).
// Writers have epochs; a writer's open at a new epoch (Fence, Done) fences
// the older ones. Readers report each entry they are delivered (Saw), as
// streams that a reconnection ends (Restart). Subscriptions have committed
// cursors, which the harness observes (Cursor) and moves (Seek). Truncated
// records an acknowledged truncation, and Final the complete read of a log
// at the end.
//
// Each record call takes a stamp from a logical clock, so "A completed
// before B was invoked" is exact for calls made in that order in real time,
// on any goroutines; wall clocks play no part.
//
// # Anomalies
//
// Lost (prefix, middle or suffix): a value acknowledged, delivered to a
// reader, or of a batch the final read has in part, that the final read
// does not have, unless an acknowledged truncation covers its offset. A
// final read that starts above an acknowledged offset no truncation covered
// has lost a prefix.
//
// Duplicated: a value at two offsets, in the final read or among reads.
//
// Reordered: an append that landed below one acknowledged before it was
// invoked; or a stream that skipped or went back.
//
// Inconsistent: two values at one offset, among the reads, the final read
// and the acknowledgements (counted once per offset).
//
// Unexpected: a value read that was never appended, or read away from the
// offset its acknowledgement, or the rest of its batch, puts it at.
//
// Failed-surfaced: a value of a failed append, read.
//
// Cursor-backwards: a committed cursor observed below an earlier
// observation (a seek allows one step back, not below its position), or a
// subscriber resuming below it.
//
// Fenced-acked: an append acknowledged although invoked after the open of a
// newer epoch returned, or although it landed above an append of a newer
// epoch. An append in flight when the newer writer opened may still be
// acknowledged, below the newer writer's first offset.
//
// The check is sound rather than complete: it reports only what the
// records prove, so an operation of unknown outcome is never held against
// the log, and an undetected anomaly is possible.
package check
