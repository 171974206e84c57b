// Package engine is the contract every log engine meets, and the parts of
// an engine that do not depend on where the log is kept, written once:
//
//   - Engine and Reader, the write and read path of one open log, as the
//     root package uses it; with Entry, Stats and Retention;
//   - the group-commit queue (Queue, Group, Outcome, Pending): appends are
//     encoded, under the log's mutex, into the group the next commit takes,
//     and wait for that group's Outcome; the queue checks conditional
//     appends against the end it predicts, and deduplicates the appends of
//     producers with the log's Dedup table;
//   - the reader set-up (Readers, Cursor, View): where a reader may start,
//     what it does at the start and at the tail, and the time ticks handed
//     to the readers that take them;
//   - the retention policy (Expired): which sealed segments, oldest first, a
//     truncation or a Retention removes.
//
// The engines are package wal (local segment files), package objlog
// (object storage) and package quorumlog (replica ensembles, then object
// storage). Nothing here does I/O, starts a goroutine or reads a clock:
// the engines call it under their own locks, which this package documents
// where it borrows them.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ternwal/tern/internal/record"
)

// Engine is the write and read path of one open log. It is safe for
// concurrent use.
//
// No append is acknowledged (its Pending completes without error) before
// it is durable as the engine's mode defines it; once Fence has returned,
// no append of an older epoch is acknowledged; a Reader never returns an
// entry that was not acknowledged.
type Engine interface {
	// LogicalBytes is Stats' Bytes with each batch counted at its size
	// uncompressed (record.Header.LogicalBytes): the bytes appended. It
	// may read the log's storage, so is not for hot paths.
	LogicalBytes() int64
	// Append queues entries of the writer of epoch, to be committed
	// together, and returns at once. It fails at once with
	// rpcerr.ErrFenced if epoch is not the log's, and with
	// rpcerr.ErrClosed after Close. With o.Producer, a retry of an
	// append already applied or in flight is not appended again: its
	// Pending gives the original's offset or failure (see Dedup). With
	// o.IfEnd, it fails at once with a *rpcerr.EndMismatchError unless the
	// log's end, counting the appends queued before it, is o.End (see
	// Queue.Add).
	Append(epoch uint64, es []record.Entry, o AppendOptions) (Pending, error)
	// AppendTick queues a time tick of the writer of epoch: it is
	// delivered, to the readers that take ticks, after every entry queued
	// before it and before every entry queued after it. It writes nothing.
	AppendTick(epoch, t uint64) (Pending, error)
	// Fence makes epoch, which the caller has stored durably and which is
	// above the current one, the writer's. owned, if not nil, is asked
	// before every commit whether the writer can still prove it holds
	// epoch; it must be cheap.
	Fence(ctx context.Context, epoch uint64, owned func() bool) error
	// NewReader returns a Reader at from, which lies between the log's
	// start and end (inclusive). With ticks, the Reader also returns the
	// ticks appended from now on.
	NewReader(from uint64, ticks bool) (Reader, error)
	// Truncate raises the start to before, which the caller has stored
	// durably, and deletes the sealed segments wholly below it.
	Truncate(before uint64) error
	// ApplyRetention deletes the oldest sealed segments r lets go.
	ApplyRetention(now time.Time, r Retention) error
	Stats() Stats
	// Close finishes what is queued and releases the log; readers waiting
	// at the tail return rpcerr.ErrClosed.
	Close() error
}

// ErrNeedsWriter is wrapped by the errors of a log that failed until a new
// writer recovers it (an object or quorum log whose uploads or replicas
// failed): a writer that opens (Fence) recovers it, and its appends go on.
var ErrNeedsWriter = errors.New("engine: the log failed; a new writer recovers it")

// Reader reads a log in offset order and waits at the tail for new
// acknowledged entries. It is not safe for concurrent use. The bytes of
// returned entries are the caller's: they are never reused or modified.
type Reader interface {
	// Next returns the next entry or tick, waiting at the tail until ctx
	// ends.
	Next(ctx context.Context) (Entry, error)
	// NextBatch returns up to max entries and ticks (at least one), waiting
	// at the tail for the first one until ctx ends but not for the others.
	// With maxBytes > 0 it stops before an entry that would take the
	// entries' bytes (payloads, property keys and values) over maxBytes,
	// unless that entry is the first: the reader then holds at most the
	// batch it is decoding besides what it returned.
	NextBatch(ctx context.Context, max, maxBytes int) ([]Entry, error)
	// Close releases the reader and stops its ticks.
	Close() error
}

// Entry is an entry read from a log, or a time tick.
type Entry struct {
	Offset uint64
	record.Entry
	// IsTick marks a time tick, which is not an entry: Tick is its time and
	// Offset its position (every entry below it comes before it).
	IsTick bool
	Tick   uint64
}

// Tick is a time tick at a position in the log.
type Tick struct {
	Time   uint64
	Offset uint64 // every entry below Offset comes before the tick
}

// Stats describes a log.
type Stats struct {
	Start    uint64 // the first offset that can be read
	End      uint64 // the offset the next append gets
	Bytes    int64  // bytes of the segments, as stored (compressed)
	Segments int
	Epoch    uint64
	// Syncs counts the fdatasync calls on local segment files since the
	// log was opened; 0 for the engines that keep no local files.
	Syncs uint64
	// Objects counts the objects that hold a log in object storage
	// (fragments, or compacted objects); 0 for a local log.
	Objects int
}

// Defaults returns now and logger, or where they are nil the wall clock and
// a logger that discards: the defaults of every engine's options.
func Defaults(now func() time.Time, logger *slog.Logger) (func() time.Time, *slog.Logger) {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return now, logger
}
