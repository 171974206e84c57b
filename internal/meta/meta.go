// Package meta keeps Tern's metadata: which logs exist, their options, their
// writer epochs and truncation points, their subscriptions' cursors, and the
// segments of the logs kept in object storage. Metadata changes at log
// creation and deletion, writer changes, truncations, cursor commits and
// segment boundaries, never per append.
//
// Store is implemented on etcd (OpenEtcd), for servers, and on a bbolt file
// in the data directory (OpenBolt), for a program that embeds Tern without
// etcd. Every implementation passes the acceptance suite in package metatest.
package meta

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotFound is returned for a log that does not exist.
	ErrNotFound = errors.New("meta: log not found")
	// ErrExist is returned when creating a log whose name is taken.
	ErrExist = errors.New("meta: log already exists")
	// ErrLocked is returned when another process holds the store.
	ErrLocked = errors.New("meta: store is in use by another process")
	// ErrSubNotFound is returned for a subscription that does not exist (of
	// a log that does).
	ErrSubNotFound = errors.New("meta: subscription not found")
	// ErrSubExist is returned when creating a subscription whose name is
	// taken on its log.
	ErrSubExist = errors.New("meta: subscription already exists")
	// ErrStaleEpoch is returned when creating a segment for an epoch that
	// is no longer the log's newest: its writer was fenced.
	ErrStaleEpoch = errors.New("meta: the writer's epoch is no longer the log's newest")
	// ErrSessionHeld is returned by ClaimWriter when the log's session is
	// held by the other kind of writer: shared producers while an
	// exclusive writer's session is open, or an exclusive writer asking for
	// the shared producers' session.
	ErrSessionHeld = errors.New("meta: the log's writer session is held by another kind of writer")
	// ErrSegmentExist is returned when creating a segment whose Seq is
	// taken, or while the log has a segment that is not sealed.
	ErrSegmentExist = errors.New("meta: segment already exists, or an earlier one is open")
	// ErrSegmentNotFound is returned for a segment that does not exist (of a
	// log that does).
	ErrSegmentNotFound = errors.New("meta: segment not found")
	// ErrConflict is returned when a segment's objects are not the ones a
	// compare-and-swap expected: someone else changed them first.
	ErrConflict = errors.New("meta: segment changed concurrently")
	// ErrPending is returned for sealing a pending segment (Segment.Pending),
	// whose predecessor is not sealed yet, and for creating a pending segment
	// anywhere but right after an open segment that is not pending itself.
	ErrPending = errors.New("meta: a pending segment must follow the open segment, which must be sealed first")
)

// Log is the metadata of one log.
type Log struct {
	Name    string
	ID      uint64    // assigned by CreateLog, unique for the store's lifetime, never reused
	Created time.Time // set by CreateLog
	// Options is opaque to the store: the caller's encoded log options.
	Options []byte
	// Epoch is the log's writer generation: every ClaimWriter raises it,
	// reopening a session too, and the engines fence with it (it is in
	// every batch, at the replicas and in object keys). 0 before the first
	// writer.
	Epoch uint64
	// Session is the epoch of the newest writer session, the one a caller
	// sees and may choose (tern.WithEpoch): reopening a session keeps it.
	// 0 before the first writer, and in records written before sessions
	// existed, whose Epoch was the session.
	Session uint64
	// Shared marks Session as the shared producers' rather than an
	// exclusive writer's.
	Shared bool
	// Ended marks an exclusive Session that its writer closed: shared
	// producers may open a new session over it.
	Ended bool
	// Start is the truncation point: offsets below it may be gone.
	Start uint64
	// Installation is the ID of the installation that created the log
	// (Store.Installation), set by the caller of CreateLog and never
	// changed; it is part of the log's object keys. Empty for a log
	// created before installations had IDs.
	Installation string
}

// Sub is a subscription: a named, durable cursor on a log.
type Sub struct {
	Name    string
	Created time.Time // set by CreateSub
	// Cursor is the next offset to deliver: the subscriber has acknowledged
	// every entry below it.
	Cursor uint64
	// Pin says retention keeps the entries at and above Cursor.
	Pin bool
}

// Segment is the metadata of one segment of a log kept in object storage
// (the object mode). Segments of local logs are files found by listing the
// log's directory and have no metadata. A segment is written by one writer
// epoch; it is created open, when its writer starts it, and sealed once,
// when it is full or when a newer writer fences it.
type Segment struct {
	Seq     uint64    // 1, 2, ... in log order
	Epoch   uint64    // the writer epoch that created it
	Base    uint64    // the offset of its first entry
	Created time.Time // set by the caller
	Sealed  bool
	// Pending, for a segment created while the one before it is still
	// open, says its Base is not known yet (it is 0): SealSegment of the
	// segment before sets Base to that one's End and clears Pending, in
	// the same atomic step. A pending segment cannot be sealed.
	Pending bool

	// Ensemble, for a segment of a log in quorum mode, lists the replica
	// nodes that hold its fragments, and AckQuorum how many of them
	// acknowledge an append. It stays set after sealing until the
	// segment's objects are in the bucket: ReplaceObjects clears it.
	Ensemble  []string
	AckQuorum int

	// Set when Sealed:
	End     uint64          // the offset after its last entry (Base if it is empty)
	Bytes   int64           // the bytes of its objects
	MaxTime int64           // the newest entry time, Unix nanoseconds; 0 if none
	Objects []SegmentObject // the objects that hold its entries, in offset order

	// LogicalBytes, set when Sealed, is Bytes with each batch counted at
	// its size uncompressed: the bytes appended. A segment without
	// compressed batches has Bytes. A figure below Bytes, the zero value
	// included (the caller does not know), is stored as Bytes, and so is
	// read from a record written before the field existed: compressed
	// batches of such a segment count as stored. ReplaceObjects keeps it,
	// or moves it with Bytes where the two were equal.
	LogicalBytes int64
}

// SegmentObject is one object holding a contiguous run of a segment's
// entries.
type SegmentObject struct {
	Key   string // relative to the segment's prefix in the bucket
	Base  uint64 // the offset of its first entry
	Bytes int64
}

// Claim is a writer's hold on the epoch it was given by ClaimWriter. A Claim
// is safe for concurrent use.
type Claim interface {
	// Epoch is the claimed generation (Log.Epoch).
	Epoch() uint64
	// Session is the session the claim opened or reopened (Log.Session).
	Session() uint64
	// Valid reports, without I/O, whether the store can still prove that the
	// claim holds: no newer epoch has been seen and the lease behind the
	// claim, if the store has leases, cannot have expired. A writer checks it
	// before every acknowledgement.
	Valid() bool
	// Lost is closed once Valid has become false for good.
	Lost() <-chan struct{}
	// Release gives the claim up. The epoch stays stored: Release never lets
	// an older writer back in.
	Release(ctx context.Context) error
}

// Store is the metadata store. Implementations are safe for concurrent use.
type Store interface {
	// Installation returns the store's installation, creating it on the
	// first call: concurrent first calls, in this process or in others
	// sharing the store, all return the one that was stored first.
	Installation(ctx context.Context) (Installation, error)

	// CreateLog stores a new log with the given Name, Options and
	// Installation, assigns its ID and Created time, and returns it. It
	// fails with ErrExist if the name is taken.
	CreateLog(ctx context.Context, l Log) (Log, error)
	// Log returns the named log or ErrNotFound.
	Log(ctx context.Context, name string) (Log, error)
	// ListLogs returns the logs whose names start with prefix, by name.
	ListLogs(ctx context.Context, prefix string) ([]Log, error)
	// ListLogsPage returns, by name, at most limit of the logs whose names
	// start with prefix and sort after after ("" from the first): a page of
	// ListLogs, whose next page starts after the last name returned. limit
	// <= 0 means no limit.
	ListLogsPage(ctx context.Context, prefix, after string, limit int) ([]Log, error)
	// CountLogs returns the number of logs whose names start with prefix,
	// without reading their records.
	CountLogs(ctx context.Context, prefix string) (int, error)
	// DeleteLog removes the named log or returns ErrNotFound.
	DeleteLog(ctx context.Context, name string) error
	// BumpEpoch atomically increments the log's epoch and returns the new
	// value, durably stored before it returns.
	BumpEpoch(ctx context.Context, name string) (uint64, error)
	// ClaimWriter opens the writer session o asks for (see ClaimOptions),
	// bumps the log's epoch as BumpEpoch does, in the same atomic step, and
	// returns a Claim on the new epoch. The claim is lost when a newer
	// epoch is stored (by this process or another one sharing the store,
	// reopening the same session included), when its lease cannot be
	// renewed in time, or when the store is closed. It fails with
	// ErrStaleEpoch or ErrSessionHeld when o cannot be opened.
	ClaimWriter(ctx context.Context, name string, o ClaimOptions) (Claim, error)
	// EndSession marks the log's exclusive session ended, if epoch is
	// still the log's (no claim since the one that got it): shared
	// producers may then open a new one over it. It bumps no epoch and
	// ends no claim.
	EndSession(ctx context.Context, name string, epoch uint64) error
	// AdvanceStart raises the log's Start to start if that is higher (it never
	// moves back) and returns the Start now stored.
	AdvanceStart(ctx context.Context, name string, start uint64) (uint64, error)

	// CreateSub stores a new subscription s on the named log, with s.Name,
	// s.Cursor and s.Pin, and returns it with Created set. It fails with
	// ErrNotFound if the log does not exist, ErrSubExist if the name is taken.
	CreateSub(ctx context.Context, log string, s Sub) (Sub, error)
	// Sub returns a subscription, or ErrNotFound / ErrSubNotFound.
	Sub(ctx context.Context, log, name string) (Sub, error)
	// ListSubs returns the log's subscriptions by name (nil if none), or
	// ErrNotFound.
	ListSubs(ctx context.Context, log string) ([]Sub, error)
	// DeleteSub removes a subscription, or returns ErrNotFound /
	// ErrSubNotFound. DeleteLog removes a log's subscriptions with it.
	DeleteSub(ctx context.Context, log, name string) error
	// CommitCursor raises a subscription's cursor to cursor if that is
	// higher (it never moves back) and returns the cursor now stored.
	CommitCursor(ctx context.Context, log, name string, cursor uint64) (uint64, error)
	// SeekCursor sets a subscription's cursor to cursor, up or down.
	SeekCursor(ctx context.Context, log, name string, cursor uint64) error

	// CreateSegment stores s, which must not be Sealed, as the log's newest
	// segment. It fails with ErrNotFound if the log does not exist,
	// ErrStaleEpoch if the log's Epoch is not s.Epoch, and ErrSegmentExist if
	// a segment with s.Seq exists, or one with a higher Seq, or one that is
	// not sealed. A Pending s, whose Base must be 0, is the exception: it
	// must have the Seq after the newest segment, which must be open and not
	// pending (ErrPending otherwise), so a log has at most one pending
	// segment, right after its open one. The checks and the write are one
	// atomic step.
	CreateSegment(ctx context.Context, log string, s Segment) error
	// SealSegment seals the stored open segment s.Seq with s, which must be
	// Sealed and have the stored Epoch and Base, and returns s. If segment
	// s.Seq+1 is pending, the same atomic step gives it Base s.End and
	// clears its Pending. If the stored segment is sealed already it is
	// left as it is and returned, with no error: the caller compares.
	// ErrNotFound / ErrSegmentNotFound, and ErrPending for a pending one.
	SealSegment(ctx context.Context, log string, s Segment) (Segment, error)
	// ReplaceObjects swaps the objects of the sealed segment seq from old to
	// new (and its Bytes to their sum) if its objects are old, and fails with
	// ErrConflict otherwise. The new objects are in the bucket: it clears
	// the segment's Ensemble. ErrNotFound / ErrSegmentNotFound.
	ReplaceObjects(ctx context.Context, log string, seq uint64, old, new []SegmentObject) error
	// Segments returns the log's segments by Seq (nil if none), or
	// ErrNotFound.
	Segments(ctx context.Context, log string) ([]Segment, error)
	// DeleteSegment removes the segment seq. Deleting one that does not
	// exist is not an error; ErrNotFound if the log does not exist.
	// DeleteLog removes a log's segments with it.
	DeleteSegment(ctx context.Context, log string, seq uint64) error

	// Close releases the store. Claims made through it are lost.
	Close() error
}
