package tern

import (
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

// Defaults of LogOptions' zero fields.
const (
	DefaultSegmentBytes  = 256 << 20
	DefaultSegmentAge    = time.Hour
	DefaultMaxEntryBytes = 8 << 20
	// MaxBatchBytes bounds the entries of one AppendBatch call.
	MaxBatchBytes = 1 << 30
)

// LogOptions are a log's settings, fixed when it is created. Zero fields take
// the defaults above; a zero retention field keeps everything.
type LogOptions struct {
	Fsync            Fsync         `json:"fsync"`
	SegmentBytes     int64         `json:"segment_bytes"`     // a segment is sealed when it reaches this size
	SegmentAge       time.Duration `json:"segment_age"`       // ... or this age, at the next append
	RetentionAge     time.Duration `json:"retention_age"`     // delete segments whose newest entry is older
	RetentionBytes   int64         `json:"retention_bytes"`   // keep at least this many bytes, deleting older segments
	RetentionEntries int64         `json:"retention_entries"` // keep at least this many entries, deleting older segments
	MaxEntryBytes    int           `json:"max_entry_bytes"`   // payload plus property keys and values
}

// withDefaults fills zero fields and checks the others.
func (o LogOptions) withDefaults() (LogOptions, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentAge == 0 {
		o.SegmentAge = DefaultSegmentAge
	}
	if o.MaxEntryBytes == 0 {
		o.MaxEntryBytes = DefaultMaxEntryBytes
	}
	switch {
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
