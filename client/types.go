package client

import (
	"fmt"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
)

// Offset is the position of an entry in its log: dense, from 0, never reused.
type Offset uint64

// FromStart and FromEnd are where OpenReader may start besides an offset:
// the log's start as it is when the reader opens, wherever truncation has
// moved it, and the log's end then, so that the reader returns only the
// entries appended from then on. They are the two largest Offsets, which no
// entry reaches.
const (
	FromStart Offset = ^Offset(0) - 1
	FromEnd   Offset = ^Offset(0)
)

// Entry is one entry of a log.
type Entry struct {
	// Offset is set by reads and ignored by appends.
	Offset Offset
	// Payload is the entry's data. Entries returned by a Reader own their
	// bytes: Tern never modifies or reuses them. They may share one array
	// with the entries read with them (a block of a segment file, an
	// object's range, a server's response: 1 MiB or so), so an entry kept
	// keeps that array in memory; copy the payload to keep it alone.
	Payload []byte
	// Properties are small named values beside the payload.
	Properties map[string][]byte
	// Time is the writer's append time, set to the current time by the
	// append when it is zero.
	Time time.Time

	// IsTick marks a time tick, returned only to readers and subscribers
	// that asked WithTicks. A tick is not an entry: Tick is the time given
	// to AppendTimeTick, Offset is the tick's position (the entries below it
	// came before it, those at or above it come after), and the other
	// fields are empty.
	IsTick bool
	Tick   uint64
}

// LogInfo describes a log.
type LogInfo struct {
	Name    string
	ID      uint64
	Created time.Time
	Options LogOptions
	Start   Offset // the first offset that can be read
	End     Offset // the offset the next append gets
	Bytes   int64  // bytes of its segments, in files or objects: as stored, compressed
	// LogicalBytes is what Bytes would be uncompressed: the bytes of the
	// batches as appended. It equals Bytes for a log without compression.
	LogicalBytes int64
	Segments     int
	Epoch        uint64 // the newest writer's epoch; 0 before the first writer
	// Objects is the number of objects holding a log in object mode: one
	// per upload until compaction rewrites a sealed segment's into a few
	// large ones. 0 for a local log.
	Objects int
	// ExtentUnknown says the log was described from its metadata alone
	// (ListLogs, of a log not open): End is Start, and Bytes, Segments and
	// Objects are 0, as they are not known.
	ExtentUnknown bool
}

// LogPage is one page of a listing of logs, by name.
type LogPage struct {
	Logs []LogInfo
	// NextPageToken asks for the next page; "" on the last one. It is the
	// name of the page's last log, but callers should pass it back as is.
	NextPageToken string
}

// Page sizes of ListLogsPage: a size of 0 takes DefaultListPageSize, and one
// over MaxListPageSize is lowered to it.
const (
	DefaultListPageSize = 1000
	MaxListPageSize     = 10000
)

// SubOptions configure a new subscription.
type SubOptions struct {
	// From is the first offset the subscription delivers. It must lie
	// between the log's Start and End.
	From Offset
	// FromEnd starts the subscription at the log's end instead of From.
	FromEnd bool
	// Pin makes retention keep the entries the subscription has not yet
	// consumed ("keep until consumed"). Truncate is not held back by pins.
	Pin bool
}

// SubInfo describes a subscription.
type SubInfo struct {
	Log     string
	Name    string
	Created time.Time
	// Cursor is the next offset the subscription delivers: every entry below
	// it has been acknowledged. An acknowledgement is committed to metadata
	// within the server's commit interval; Cursor includes those not yet
	// committed.
	Cursor Offset
	Pin    bool
	// Lag is how many entries the subscription has not acknowledged: the
	// log's end minus Cursor.
	Lag uint64
}

// ReadOption changes how a Reader or Subscriber reads.
type ReadOption func(*ReadOptions)

// ReadOptions are what the ReadOptions of a call to OpenReader or Subscribe
// add up to (see NewReadOptions).
type ReadOptions struct {
	// Ticks: return the time ticks too (WithTicks).
	Ticks bool
	// MaxBatchBytes bounds the bytes of one NextBatch (WithMaxBatchBytes);
	// zero is no bound.
	MaxBatchBytes int

	reconnect func(error) // WithReconnectNotify
}

// WithTicks makes the Reader or Subscriber return, besides entries, the time
// ticks appended while it is open, each in its place between the entries:
// an Entry with IsTick set. See Writer.AppendTimeTick.
func WithTicks() ReadOption { return func(o *ReadOptions) { o.Ticks = true } }

// WithMaxBatchBytes makes NextBatch return at most about n bytes of
// entries (payloads plus property keys and values): it stops before the
// entry that would take it over n, unless that is the first, so that an
// entry larger than n comes alone. A reader that holds what NextBatch
// returns (a server sending it on) holds then about n bytes, however many
// entries it asks for. n <= 0 is no bound, the default.
func WithMaxBatchBytes(n int) ReadOption { return func(o *ReadOptions) { o.MaxBatchBytes = max(n, 0) } }

// WithReconnectNotify makes a remote Reader or Subscriber call f when its
// stream breaks and it starts reconnecting, with the error that broke it,
// and again, with nil, once it has reconnected: a program that follows a
// log can say so (tern read --follow does). f runs in the goroutine that
// called Next or NextBatch, which reconnects, and must not call the Reader
// or Subscriber. An embedded Reader never reconnects.
func WithReconnectNotify(f func(err error)) ReadOption {
	return func(o *ReadOptions) { o.reconnect = f }
}

// EntryBytes is what an entry counts for in byte limits: its payload plus
// its property keys and values.
func EntryBytes(e Entry) int {
	n := len(e.Payload)
	for k, v := range e.Properties {
		n += len(k) + len(v)
	}
	return n
}

// NewReadOptions applies opts in order to the zero ReadOptions.
func NewReadOptions(opts ...ReadOption) ReadOptions {
	var o ReadOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// CheckBatch checks the entries of one append against a log's
// MaxEntryBytes and MaxBatchBytes, and returns their bytes (payloads plus
// property keys and values). Package tern checks an embedded log's appends
// with it too, so that both refuse the same batches with the same errors.
func CheckBatch(es []Entry, maxEntryBytes int) (int, error) {
	if len(es) == 0 {
		return 0, fmt.Errorf("%w: an append needs at least one entry", ErrInvalid)
	}
	total := 0
	for i, e := range es {
		n := EntryBytes(e)
		if n > maxEntryBytes {
			return 0, fmt.Errorf("%w: entry %d of the batch has %d bytes, over the log's limit of %d (LogOptions.MaxEntryBytes)", ErrTooLarge, i, n, maxEntryBytes)
		}
		if total += n; total > MaxBatchBytes {
			return 0, fmt.Errorf("%w: the batch has over %d bytes; split it", ErrTooLarge, MaxBatchBytes)
		}
	}
	return total, nil
}

// Errors returned by Tern. Callers branch on them with errors.Is; the
// message of the returned error adds what is known where it happened. They
// are the values of package tern's errors of the same names, and a server's
// errors come back as them.
var (
	// ErrNotFound: the log does not exist.
	ErrNotFound = rpcerr.ErrNotFound
	// ErrExist: a log of that name exists already.
	ErrExist = rpcerr.ErrExist
	// ErrSubNotFound: the log has no subscription of that name.
	ErrSubNotFound = rpcerr.ErrSubNotFound
	// ErrSubExist: the log has a subscription of that name already.
	ErrSubExist = rpcerr.ErrSubExist
	// ErrInvalidName: a log or subscription name breaks the naming rules.
	ErrInvalidName = rpcerr.ErrInvalidName
	// ErrInvalid: a request is malformed (an option out of range, a
	// missing field).
	ErrInvalid = rpcerr.ErrInvalid
	// ErrFenced: a newer writer has been opened on the log.
	ErrFenced = rpcerr.ErrFenced
	// ErrTruncated: the offset read is below the log's start. The error is a
	// *TruncatedError that says where the log now starts.
	ErrTruncated = rpcerr.ErrTruncated
	// ErrOutOfRange: the offset is beyond the log's end.
	ErrOutOfRange = rpcerr.ErrOutOfRange
	// ErrTooLarge: an entry is over the log's MaxEntryBytes, or a batch over
	// MaxBatchBytes.
	ErrTooLarge = rpcerr.ErrTooLarge
	// ErrCorrupt: stored data failed its checks. The error is a
	// *CorruptError that names the file and position.
	ErrCorrupt = rpcerr.ErrCorrupt
	// ErrClosed: the client, log, writer or reader is closed.
	ErrClosed = rpcerr.ErrClosed
	// ErrTakenOver: a newer Subscriber of the subscription took it over.
	// It matches ErrClosed too.
	ErrTakenOver = rpcerr.ErrTakenOver
	// ErrLocked: another process has the data directory open.
	ErrLocked = rpcerr.ErrLocked
	// ErrUnsupported: the call is one this kind of client cannot make.
	ErrUnsupported = rpcerr.ErrUnsupported
	// ErrLimit: a configured bound of the server would be passed; the
	// message names it and the setting that raises it.
	ErrLimit = rpcerr.ErrLimit
	// ErrNoSpace: a disk, or the metadata store's quota, is full.
	ErrNoSpace = rpcerr.ErrNoSpace
	// ErrUnavailable: the metadata store or a peer does not answer now.
	ErrUnavailable = rpcerr.ErrUnavailable
	// ErrDamaged: the log is damaged; it can be read up to the damage and
	// takes no appends until repaired.
	ErrDamaged = rpcerr.ErrDamaged
	// ErrNotOwner: in a cluster, another node serves the log; the error is
	// a *NotOwnerError that names it. The client follows it by itself.
	ErrNotOwner = rpcerr.ErrNotOwner
	// ErrConditionFailed: a conditional append found the log's end
	// elsewhere than it expected, and appended nothing. The error is an
	// *EndMismatchError that says where the log ends.
	ErrConditionFailed = rpcerr.ErrConditionFailed
	// ErrUnauthenticated: the server requires authentication and the client
	// gave no token or certificate it knows (Options.Token, Options.TLS).
	ErrUnauthenticated = rpcerr.ErrUnauthenticated
	// ErrPermissionDenied: the server's grants do not allow the call; the
	// message names the permission and the log.
	ErrPermissionDenied = rpcerr.ErrPermissionDenied
	// ErrTLS: Open could not agree on TLS with the server: one side speaks
	// TLS and the other does not, or one refused the other's certificate.
	// The message says which, and what to do. It never comes from a
	// server.
	ErrTLS = rpcerr.ErrTLS
)

// NotOwnerError names the node that serves a log in a cluster.
type NotOwnerError = rpcerr.NotOwnerError

// TruncatedError reports a read below the log's start.
type TruncatedError = rpcerr.TruncatedError

// EndMismatchError reports where the log ends, for a conditional append
// that expected it elsewhere.
type EndMismatchError = rpcerr.EndMismatchError

// CorruptError reports damaged data: the file and the byte position.
type CorruptError = rpcerr.CorruptError

// WriterOption changes how OpenWriter opens a writer.
type WriterOption func(*WriterOptions)

// WriterOptions are what the WriterOptions of a call to OpenWriter add up
// to (see NewWriterOptions).
type WriterOptions struct {
	// Epoch is the session to open (WithEpoch); 0: a new one.
	Epoch uint64
	// Reopen: only the log's current session, Epoch (OnlyReopen).
	Reopen bool
	// Shared: a shared producer (Shared).
	Shared bool
}

// OnlyReopen, with WithEpoch(n), opens session n only if it is the log's
// newest: a higher n fails with ErrFenced too, rather than fencing the
// log's session. A server reopens its clients' sessions so, after a
// restart, whatever epoch a client sends.
func OnlyReopen() WriterOption { return func(o *WriterOptions) { o.Reopen = true } }

// Shared opens a shared producer instead of an exclusive writer: shared
// producers append to the log without fencing each other (their appends are
// group-committed together), and they never fence an exclusive writer:
// while one's session is open (from its OpenWriter to its Close) opening a
// shared producer fails with ErrFenced, and an exclusive writer that opens
// fences the shared producers. A shared producer sends no time ticks.
func Shared() WriterOption { return func(o *WriterOptions) { o.Shared = true } }

// WithEpoch opens the writer session of epoch n, which the caller chose (a
// Milvus channel's term, say) instead of a new one: lower than the log's
// newest session, OpenWriter fails with ErrFenced; equal, it reopens that
// session, and appends go on at that epoch (a Writer of it opened before,
// in this process or another, is fenced unless it is the same server's);
// higher, it fences every older session. n is at least 1.
func WithEpoch(n uint64) WriterOption { return func(o *WriterOptions) { o.Epoch = n } }

// NewWriterOptions applies opts in order to the zero WriterOptions.
func NewWriterOptions(opts ...WriterOption) WriterOptions {
	var o WriterOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// AppendOption changes how an append is applied.
type AppendOption func(*AppendOptions)

// AppendOptions are what the AppendOptions of an append add up to (see
// NewAppendOptions).
type AppendOptions struct {
	// IfEnd: the append is applied only if the log's end is End
	// (IfEnd).
	IfEnd bool
	End   Offset
	// Producer and Seq identify the append for deduplication, and every
	// Seq of Producer below Acked has been answered. The remote Writer
	// sets them itself; a server that relays appends passes them on.
	Producer, Seq, Acked uint64
}

// IfEnd makes the append conditional: it is applied only if the log's end
// (the offset its first entry would get), counting the appends queued
// before it, is off. Otherwise it fails with an error that matches
// ErrConditionFailed and carries the log's end (see EndMismatchError):
// optimistic concurrency for a replicated state machine.
func IfEnd(off Offset) AppendOption {
	return func(o *AppendOptions) { o.IfEnd, o.End = true, off }
}

// NewAppendOptions applies opts in order to the zero AppendOptions.
func NewAppendOptions(opts ...AppendOption) AppendOptions {
	var o AppendOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}
