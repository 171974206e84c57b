package tern

import (
	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/client/ternpb"
)

// The types of the API are the client module's: a value made for one
// works with the other.
type (
	// Offset is the position of an entry in its log: dense, from 0, never
	// reused.
	Offset = client.Offset
	// Entry is one entry of a log.
	Entry = client.Entry
	// LogInfo describes a log.
	LogInfo = client.LogInfo
	// LogPage is one page of ListLogsPage.
	LogPage = client.LogPage
	// LogOptions are a log's settings, fixed when it is created.
	LogOptions = client.LogOptions
	// Fsync is a log's durability setting; see client.Fsync.
	Fsync = client.Fsync
	// FsyncMode says when an append is acknowledged.
	FsyncMode = client.FsyncMode
	// Mode is where a log keeps its entries, chosen when it is created.
	Mode = client.Mode
	// Compression is how a log's batches are compressed.
	Compression = client.Compression
	// SubOptions configure a new subscription.
	SubOptions = client.SubOptions
	// SubInfo describes a subscription.
	SubInfo = client.SubInfo
	// ReadOption changes how a Reader or Subscriber reads.
	ReadOption = client.ReadOption
	// WriterOption changes how OpenWriter opens a writer.
	WriterOption = client.WriterOption
	// AppendOption changes how an append is applied.
	AppendOption = client.AppendOption
)

// The fsync modes, the modes and the defaults of LogOptions; see package
// client for what each means.
const (
	FsyncAlways   = client.FsyncAlways
	FsyncInterval = client.FsyncInterval // UNSAFE
	FsyncNever    = client.FsyncNever    // UNSAFE

	ModeLocal  = client.ModeLocal
	ModeObject = client.ModeObject
	ModeQuorum = client.ModeQuorum

	CompressionNone = client.CompressionNone
	CompressionZstd = client.CompressionZstd
	CompressionLZ4  = client.CompressionLZ4

	DefaultSegmentBytes    = client.DefaultSegmentBytes
	DefaultSegmentAge      = client.DefaultSegmentAge
	DefaultMaxEntryBytes   = client.DefaultMaxEntryBytes
	DefaultFlushBytes      = client.DefaultFlushBytes
	DefaultFlushInterval   = client.DefaultFlushInterval
	DefaultUploadsInFlight = client.DefaultUploadsInFlight
	MaxBatchBytes          = client.MaxBatchBytes
	DefaultListPageSize    = client.DefaultListPageSize
	MaxListPageSize        = client.MaxListPageSize
	MaxNameBytes           = client.MaxNameBytes

	// FromStart and FromEnd are where OpenReader may start besides an
	// offset: the log's start, or its end, as they are when it opens.
	FromStart = client.FromStart
	FromEnd   = client.FromEnd
)

// ParseFsync parses the text form of an Fsync: "always", "never" or
// "interval:<duration>".
func ParseFsync(s string) (Fsync, error) { return client.ParseFsync(s) }

// ParseMode parses a mode's name; "" is the client's default.
func ParseMode(s string) (Mode, error) { return client.ParseMode(s) }

// ParseCompression parses a compression's name; "" is CompressionNone.
func ParseCompression(s string) (Compression, error) { return client.ParseCompression(s) }

// ValidateName reports whether name can name a log.
func ValidateName(name string) error { return client.ValidateName(name) }

// ValidateSubName reports whether name can name a subscription.
func ValidateSubName(name string) error { return client.ValidateSubName(name) }

// LogOptionsFromProto reads log options in the form of the gRPC API.
func LogOptionsFromProto(p *ternpb.LogOptions) (LogOptions, error) {
	return client.LogOptionsFromProto(p)
}

// WithTicks makes the Reader or Subscriber return, besides entries, the time
// ticks appended while it is open, each in its place between the entries:
// an Entry with IsTick set. See Writer.AppendTimeTick.
func WithTicks() ReadOption { return client.WithTicks() }

// WithMaxBatchBytes makes NextBatch return at most about n bytes of entries
// (payloads plus property keys and values), or a single entry larger than
// n: a reader that holds each batch it gets holds about n bytes however
// many entries it asks for. n <= 0 is no bound, the default.
func WithMaxBatchBytes(n int) ReadOption { return client.WithMaxBatchBytes(n) }

// WithEpoch opens the writer session of epoch n, which the caller chose (a
// Milvus channel's term, say) instead of a new one: lower than the log's
// newest session, OpenWriter fails with ErrFenced; equal, it reopens that
// session, and appends go on at that epoch (a Writer of it opened before,
// in this process or another, is fenced unless it is the same server's);
// higher, it fences every older session. n is at least 1.
func WithEpoch(n uint64) WriterOption { return client.WithEpoch(n) }

// OnlyReopen, with WithEpoch(n), opens session n only if it is the log's
// newest: a higher n fails with ErrFenced too, rather than fencing the
// log's session. A server reopens its clients' sessions so.
func OnlyReopen() WriterOption { return client.OnlyReopen() }

// Shared opens a shared producer instead of an exclusive writer: shared
// producers append to the log without fencing each other (their appends are
// group-committed together), and never fence an exclusive writer: while
// one's session is open (from its OpenWriter to its Close), a shared
// producer's appends fail with ErrFenced (an embedded one's OpenWriter
// already does), and an exclusive writer that opens fences the shared
// producers. Log.Append uses one. A shared producer sends no time ticks.
func Shared() WriterOption { return client.Shared() }

// IfEnd makes an append conditional: it is applied only if the log's end
// (the offset its first entry would get), counting the appends queued
// before it, is off. Otherwise it fails with an error that matches
// ErrConditionFailed and carries the log's end (see EndMismatchError):
// optimistic concurrency for a replicated state machine.
func IfEnd(off Offset) AppendOption { return client.IfEnd(off) }

// AsProducer marks an append as number seq of producer id (not 0), for
// deduplication: a log that applied (id, seq) answers a repeat of it with
// the first one's offset instead of appending it again, within the window
// docs/writers.md describes; every seq of id below acked has been answered
// to the producer, so the log may forget it. The remote Writer does this
// itself; a server that relays its clients' appends to an embedded log
// passes their numbers on with it.
func AsProducer(id, seq, acked uint64) AppendOption {
	return func(o *client.AppendOptions) { o.Producer, o.Seq, o.Acked = id, seq, acked }
}

// WithReconnectNotify makes a Reader or Subscriber of a server's log call f
// when its stream breaks and it starts reconnecting (the server restarts,
// the log moves to another node), with the error that broke it, and again,
// with nil, once it has reconnected. f runs in the goroutine that called
// Next or NextBatch and must not call the Reader or Subscriber. An
// embedded Reader never reconnects, and never calls f.
func WithReconnectNotify(f func(err error)) ReadOption { return client.WithReconnectNotify(f) }
