package client

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// FsyncMode says when an append is acknowledged.
type FsyncMode int

const (
	// FsyncAlways acknowledges an append once an fdatasync covering it has
	// returned. The default, and the only mode in which acknowledged means
	// durable.
	FsyncAlways FsyncMode = iota
	// FsyncInterval acknowledges after the write and syncs every Interval.
	// UNSAFE: a power loss or kernel crash loses up to Interval of
	// acknowledged entries.
	FsyncInterval
	// FsyncNever acknowledges after the write and syncs only when a segment
	// is sealed or the log closed. UNSAFE: a power loss or kernel crash can
	// lose any acknowledged entry not yet synced.
	FsyncNever
)

// Fsync is a log's durability setting. The zero value is FsyncAlways. Its
// text form, used by the CLI and in metadata, is "always", "never" or
// "interval:<duration>", for example "interval:10ms".
type Fsync struct {
	Mode     FsyncMode
	Interval time.Duration // with FsyncInterval
}

// ParseFsync parses the text form of an Fsync.
func ParseFsync(s string) (Fsync, error) {
	switch {
	case s == "always" || s == "":
		return Fsync{Mode: FsyncAlways}, nil
	case s == "never":
		return Fsync{Mode: FsyncNever}, nil
	case strings.HasPrefix(s, "interval:"):
		d, err := time.ParseDuration(strings.TrimPrefix(s, "interval:"))
		if err != nil || d <= 0 {
			return Fsync{}, fmt.Errorf("%w: fsync %q: the interval must be a positive duration such as interval:10ms", ErrInvalid, s)
		}
		return Fsync{Mode: FsyncInterval, Interval: d}, nil
	}
	return Fsync{}, fmt.Errorf("%w: fsync %q: use always, interval:<duration> (unsafe) or never (unsafe)", ErrInvalid, s)
}

func (f Fsync) String() string {
	switch f.Mode {
	case FsyncInterval:
		return "interval:" + f.Interval.String()
	case FsyncNever:
		return "never"
	}
	return "always"
}

// MarshalText implements encoding.TextMarshaler.
func (f Fsync) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *Fsync) UnmarshalText(b []byte) error {
	v, err := ParseFsync(string(b))
	*f = v
	return err
}

// Mode is where a log keeps its entries, chosen when it is created.
type Mode string

const (
	// ModeLocal keeps segment files in the data directory; an append is
	// acknowledged after the fdatasync that covers it (see Fsync).
	ModeLocal Mode = "local"
	// ModeObject keeps the entries in the client's object store
	// (Options.Storage) and nothing on local disk: appends are buffered in
	// memory and uploaded together as one object, and each is acknowledged
	// once its object is stored. See FlushBytes and UploadsInFlight.
	ModeObject Mode = "object"
	// ModeQuorum keeps the open segment on an ensemble of the cluster's
	// nodes (Ensemble, 3 by default): an append is acknowledged once
	// AckQuorum of them (2) hold it on disk. Sealed segments move to the
	// object store. Only a cluster of tern serve nodes has quorum logs.
	ModeQuorum Mode = "quorum"
)

// ParseMode parses a mode's name; "" is the client's default.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "", ModeLocal, ModeObject, ModeQuorum:
		return m, nil
	}
	return "", fmt.Errorf("%w: mode %q: use local, object or quorum", ErrInvalid, s)
}

// Compression is how a log's batches are compressed, chosen when it is
// created. Each batch is compressed once, by the writer, and stored,
// replicated and uploaded as compressed; readers decompress it. A batch
// that does not get shorter, or is over 64 MiB, is stored as it is.
type Compression string

const (
	CompressionNone Compression = "none" // the default ("" too)
	// CompressionZstd is Zstandard at its fastest level: the smaller
	// logs, for more CPU per byte.
	CompressionZstd Compression = "zstd"
	// CompressionLZ4 is LZ4: less CPU per byte than zstd, and a larger log.
	CompressionLZ4 Compression = "lz4"
)

// ParseCompression parses a compression's name; "" is CompressionNone.
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case "":
		return CompressionNone, nil
	case CompressionNone, CompressionZstd, CompressionLZ4:
		return c, nil
	}
	return "", fmt.Errorf("%w: compression %q: use none, zstd or lz4", ErrInvalid, s)
}

// Defaults of LogOptions' zero fields.
const (
	DefaultSegmentBytes  = 256 << 20
	DefaultSegmentAge    = time.Hour
	DefaultMaxEntryBytes = 8 << 20
	// Object mode: an upload once 4 MiB are queued or the oldest append
	// waited 20ms, and up to 4 uploads at once.
	DefaultFlushBytes      = 4 << 20
	DefaultFlushInterval   = 20 * time.Millisecond
	DefaultUploadsInFlight = 4
	// MaxBatchBytes bounds the entries of one AppendBatch call.
	MaxBatchBytes = 1 << 30
	// Quorum mode: each segment on 3 nodes, an append acknowledged by 2;
	// an ensemble has at most MaxEnsemble nodes.
	DefaultEnsemble  = 3
	DefaultAckQuorum = 2
	MaxEnsemble      = 16
)

// LogOptions are a log's settings, fixed when it is created. Zero fields take
// the defaults above; a zero retention field keeps everything.
type LogOptions struct {
	// Mode is where the log keeps its entries; "" takes the client's
	// DefaultMode (tern serve --mode), or ModeLocal.
	Mode             Mode          `json:"mode,omitempty"`
	Fsync            Fsync         `json:"fsync"`             // local mode
	SegmentBytes     int64         `json:"segment_bytes"`     // a segment is sealed when it reaches this size
	SegmentAge       time.Duration `json:"segment_age"`       // ... or this age, at the next append
	RetentionAge     time.Duration `json:"retention_age"`     // delete segments whose newest entry is older
	RetentionBytes   int64         `json:"retention_bytes"`   // keep at least this many bytes, deleting older segments
	RetentionEntries int64         `json:"retention_entries"` // keep at least this many entries, deleting older segments
	MaxEntryBytes    int           `json:"max_entry_bytes"`   // payload plus property keys and values

	// Object mode: the appends queued are uploaded as one object as soon
	// as fewer than UploadsInFlight uploads are under way, up to FlushBytes
	// an object (more wait for the next). Every upload is a PUT request: a
	// log makes at most UploadsInFlight of them per PUT latency, and fewer
	// uploads in flight trade latency for requests. FlushInterval no longer
	// delays an upload; it is kept, stored and shown for the logs and
	// programs that set it.
	FlushBytes      int           `json:"flush_bytes,omitempty"`
	FlushInterval   time.Duration `json:"flush_interval,omitempty"`
	UploadsInFlight int           `json:"uploads_in_flight,omitempty"`

	// Quorum mode: each segment goes to Ensemble nodes, and an append is
	// acknowledged once AckQuorum of them hold it durably. Defaults 3 and
	// 2; 5 and 3 survive two failures.
	Ensemble  int `json:"ensemble,omitempty"`
	AckQuorum int `json:"ack_quorum,omitempty"`

	// Compression of the log's batches; "" is CompressionNone, and
	// WithDefaults makes CompressionNone "". A reader that predates
	// compression refuses a compressed log's batches.
	Compression Compression `json:"compression,omitempty"`
}

// WithDefaults fills o's zero fields with the defaults and checks the
// others, as creating a log does: an invalid setting fails with ErrInvalid.
// A server describes a log with its zero fields left out; WithDefaults
// gives them back.
func (o LogOptions) WithDefaults() (LogOptions, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentAge == 0 {
		o.SegmentAge = DefaultSegmentAge
	}
	if o.MaxEntryBytes == 0 {
		o.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if o.Mode == ModeObject {
		o.FlushBytes = cmp.Or(o.FlushBytes, DefaultFlushBytes)
		o.FlushInterval = cmp.Or(o.FlushInterval, DefaultFlushInterval)
		o.UploadsInFlight = cmp.Or(o.UploadsInFlight, DefaultUploadsInFlight)
	}
	if o.Mode == ModeQuorum {
		o.Ensemble = cmp.Or(o.Ensemble, DefaultEnsemble)
		o.AckQuorum = cmp.Or(o.AckQuorum, min(DefaultAckQuorum, o.Ensemble))
	}
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return o, err
	}
	if _, err := ParseCompression(string(o.Compression)); err != nil {
		return o, err
	}
	if o.Compression == CompressionNone {
		o.Compression = "" // one value for none, as logs from before compression have
	}
	if o.Mode == ModeQuorum {
		switch {
		case o.Ensemble < 1 || o.Ensemble > MaxEnsemble:
			return o, fmt.Errorf("%w: ensemble of %d replicas: use 1 to %d", ErrInvalid, o.Ensemble, MaxEnsemble)
		case o.AckQuorum < 1 || o.AckQuorum > o.Ensemble:
			return o, fmt.Errorf("%w: ack quorum of %d with an ensemble of %d: use 1 to %d", ErrInvalid, o.AckQuorum, o.Ensemble, o.Ensemble)
		}
	}
	switch {
	case o.Mode == ModeQuorum && (o.FlushBytes != 0 || o.FlushInterval != 0 || o.UploadsInFlight != 0):
		return o, fmt.Errorf("%w: flush size, flush interval and uploads in flight apply to object logs; a quorum log sends each append at once", ErrInvalid)
	case (o.Mode == ModeLocal || o.Mode == ModeObject) && (o.Ensemble != 0 || o.AckQuorum != 0):
		return o, fmt.Errorf("%w: ensemble and ack quorum apply to quorum logs, and this log is %s", ErrInvalid, o.Mode)
	case o.Mode == ModeQuorum && o.Fsync.Mode != FsyncAlways:
		return o, fmt.Errorf("%w: fsync %s applies to local logs; a quorum log acknowledges once its ack quorum has fsynced", ErrInvalid, o.Fsync)
	case o.FlushBytes < 0 || o.FlushInterval < 0 || o.UploadsInFlight < 0:
		return o, fmt.Errorf("%w: flush size, flush interval and uploads in flight cannot be negative", ErrInvalid)
	case o.Mode == ModeLocal && (o.FlushBytes != 0 || o.FlushInterval != 0 || o.UploadsInFlight != 0):
		return o, fmt.Errorf("%w: flush size, flush interval and uploads in flight apply to object logs, and this log is local", ErrInvalid)
	case o.Mode == ModeObject && o.Fsync.Mode != FsyncAlways:
		return o, fmt.Errorf("%w: fsync %s applies to local logs; an object log acknowledges once its object is stored", ErrInvalid, o.Fsync)
	case o.SegmentBytes < 4096:
		return o, fmt.Errorf("%w: segment size %d is too small: use at least 4096 bytes", ErrInvalid, o.SegmentBytes)
	case o.SegmentAge < 0 || o.RetentionAge < 0 || o.RetentionBytes < 0 || o.RetentionEntries < 0:
		return o, fmt.Errorf("%w: segment age and retention limits cannot be negative", ErrInvalid)
	case o.MaxEntryBytes < 0 || o.MaxEntryBytes > MaxBatchBytes:
		return o, fmt.Errorf("%w: max entry size %d is out of range: use 1 to %d bytes", ErrInvalid, o.MaxEntryBytes, MaxBatchBytes)
	case o.Fsync.Mode == FsyncInterval && o.Fsync.Interval <= 0:
		return o, fmt.Errorf("%w: fsync interval must be positive", ErrInvalid)
	}
	return o, nil
}
