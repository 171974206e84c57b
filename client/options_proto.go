package client

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ternwal/tern/client/ternpb"
)

// Proto returns o in the form of the gRPC API (api/ternpb), for servers and
// tools that speak it. Zero durations are left out.
func (o LogOptions) Proto() *ternpb.LogOptions {
	return &ternpb.LogOptions{
		Mode:             string(o.Mode),
		Fsync:            o.Fsync.String(),
		SegmentBytes:     o.SegmentBytes,
		SegmentAge:       durationProto(o.SegmentAge),
		RetentionAge:     durationProto(o.RetentionAge),
		RetentionBytes:   o.RetentionBytes,
		RetentionEntries: o.RetentionEntries,
		MaxEntryBytes:    int64(o.MaxEntryBytes),
		FlushBytes:       int64(o.FlushBytes),
		FlushInterval:    durationProto(o.FlushInterval),
		UploadsInFlight:  int64(o.UploadsInFlight),
		Ensemble:         int32(o.Ensemble),
		AckQuorum:        int32(o.AckQuorum),
		Compression:      string(o.Compression),
	}
}

// LogOptionsFromProto reads log options in the form of the gRPC API. Nil is
// the zero LogOptions (every default). Fields it cannot read fail with
// ErrInvalid; the values themselves are checked when a log is created.
func LogOptionsFromProto(p *ternpb.LogOptions) (LogOptions, error) {
	if p == nil {
		return LogOptions{}, nil
	}
	mode, err := ParseMode(p.GetMode())
	if err != nil {
		return LogOptions{}, err
	}
	fsync, err := ParseFsync(p.GetFsync())
	if err != nil {
		return LogOptions{}, err
	}
	compression, err := ParseCompression(p.GetCompression())
	if err != nil {
		return LogOptions{}, err
	}
	o := LogOptions{
		Mode:             mode,
		Fsync:            fsync,
		SegmentBytes:     p.GetSegmentBytes(),
		RetentionBytes:   p.GetRetentionBytes(),
		RetentionEntries: p.GetRetentionEntries(),
		MaxEntryBytes:    int(p.GetMaxEntryBytes()),
		FlushBytes:       int(p.GetFlushBytes()),
		UploadsInFlight:  int(p.GetUploadsInFlight()),
		Ensemble:         int(p.GetEnsemble()),
		AckQuorum:        int(p.GetAckQuorum()),
		Compression:      compression,
	}
	for _, d := range []struct {
		field string
		pb    *durationpb.Duration
		to    *time.Duration
	}{
		{"segment_age", p.GetSegmentAge(), &o.SegmentAge},
		{"retention_age", p.GetRetentionAge(), &o.RetentionAge},
		{"flush_interval", p.GetFlushInterval(), &o.FlushInterval},
	} {
		if d.pb == nil {
			continue
		}
		if err := d.pb.CheckValid(); err != nil {
			return LogOptions{}, fmt.Errorf("%w: %s: %v", ErrInvalid, d.field, err)
		}
		*d.to = d.pb.AsDuration()
	}
	return o, nil
}

// durationProto leaves a zero duration out.
func durationProto(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}
