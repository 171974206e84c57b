package client

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ternwal/tern/client/ternpb"
)

// FuzzParseFsync parses arbitrary fsync settings, as the CLI and the
// metadata give them. What parses must print as text that parses back to
// it, through ParseFsync and through UnmarshalText; what does not must fail
// with ErrInvalid.
func FuzzParseFsync(f *testing.F) {
	for _, s := range []string{"", "always", "never", "interval:10ms", "interval:1h2m3.5s", "interval:0s", "interval:-1s", "interval:", "sometimes"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseFsync(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseFsync(%q): %v, want ErrInvalid", s, err)
			}
			return
		}
		if v.Mode == FsyncInterval && v.Interval <= 0 {
			t.Fatalf("ParseFsync(%q) = %+v", s, v)
		}
		back, err := ParseFsync(v.String())
		if err != nil || back != v {
			t.Fatalf("ParseFsync(%q) = %+v, printed %q, which parses to %+v, %v", s, v, v.String(), back, err)
		}
		text, err := v.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var u Fsync
		if err := u.UnmarshalText(text); err != nil || u != v {
			t.Fatalf("UnmarshalText(%q) = %+v, %v, want %+v", text, u, err, v)
		}
	})
}

// FuzzLogOptionsFromProto reads arbitrary LogOptions messages, as CreateLog
// receives them and the remote client reads them in LogInfo. Reading must
// fail with ErrInvalid or give options whose Proto reads back to them; the
// defaults filled in must not panic and fail, if they do, with ErrInvalid.
func FuzzLogOptionsFromProto(f *testing.F) {
	for _, p := range []*ternpb.LogOptions{
		{},
		(LogOptions{}).Proto(),
		{Fsync: "interval:10ms", SegmentBytes: 1 << 20, SegmentAge: durationpb.New(2 * time.Minute), RetentionAge: durationpb.New(time.Hour),
			RetentionBytes: 1 << 30, RetentionEntries: 1000, MaxEntryBytes: 4096},
		{Mode: "object", FlushBytes: 1 << 20, FlushInterval: durationpb.New(5 * time.Millisecond), UploadsInFlight: 8},
		{Mode: "quorum", Ensemble: 5, AckQuorum: 3},
		{Mode: "disk"},
		{SegmentAge: &durationpb.Duration{Seconds: 315576000000}},
		{RetentionAge: &durationpb.Duration{Seconds: 1, Nanos: -1}},
	} {
		b, err := proto.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := new(ternpb.LogOptions)
		if proto.Unmarshal(b, p) != nil {
			return
		}
		o, err := LogOptionsFromProto(p)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("LogOptionsFromProto(%v): %v, want ErrInvalid", p, err)
			}
			return
		}
		back, err := LogOptionsFromProto(o.Proto())
		if err != nil || back != o {
			t.Fatalf("LogOptionsFromProto(%v) = %+v, whose Proto reads as %+v, %v", p, o, back, err)
		}
		if _, err := o.WithDefaults(); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("WithDefaults(%+v): %v, want ErrInvalid", o, err)
		}
	})
}

// FuzzLogOptionsJSON decodes arbitrary stored options, the JSON that the
// metadata keeps for each log. What decodes must encode to
// JSON that decodes to the same options.
func FuzzLogOptionsJSON(f *testing.F) {
	for _, o := range []LogOptions{
		{},
		{Mode: ModeLocal, Fsync: Fsync{Mode: FsyncInterval, Interval: 10 * time.Millisecond}, SegmentBytes: 1 << 20, SegmentAge: time.Minute,
			RetentionAge: time.Hour, RetentionBytes: 1 << 30, RetentionEntries: 1000, MaxEntryBytes: 4096},
		{Mode: ModeObject, FlushBytes: 1 << 20, FlushInterval: 5 * time.Millisecond, UploadsInFlight: 8},
		{Mode: ModeQuorum, Ensemble: 5, AckQuorum: 3, Fsync: Fsync{Mode: FsyncNever}},
	} {
		b, err := json.Marshal(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"fsync":"interval:0s"}`))
	f.Add([]byte(`{"mode":"\xff","fsync":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var o LogOptions
		if json.Unmarshal(b, &o) != nil {
			return
		}
		enc, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("json.Marshal(%+v): %v", o, err)
		}
		var back LogOptions
		if err := json.Unmarshal(enc, &back); err != nil || back != o {
			t.Fatalf("options %+v encode as %s, which decodes to %+v, %v", o, enc, back, err)
		}
		if _, err := o.WithDefaults(); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("WithDefaults(%+v): %v, want ErrInvalid", o, err)
		}
	})
}
