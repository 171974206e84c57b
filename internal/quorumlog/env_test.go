package quorumlog

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
	"github.com/ternwal/tern/internal/record"
)

// env is a bucket and a metadata store holding one log, "l".
type env struct{ *objlogtest.Env }

func newEnv(t *testing.T, b blob.Bucket) *env { return &env{objlogtest.NewEnv(t, b)} }

// Options are a test's tuning of the log, and its replicas: nil opens it
// in object mode, to read what quorum mode left.
type Options struct {
	Replicas      *Replicas
	SegmentBytes  int64
	FlushBytes    int
	MaxBatchBytes int
	MaxInFlight   int
	CacheBytes    int64
	Codec         record.Codec
	Logger        *slog.Logger
}

// open opens the log with o's tuning; the test closes it unless it says
// otherwise.
func (e *env) open(o Options) *objlog.Log {
	e.T.Helper()
	ml, err := e.Store.Log(context.Background(), "l")
	if err != nil {
		e.T.Fatal(err)
	}
	opts := objlog.Options{
		Bucket: e.Bucket, Meta: objlog.StoreMeta(e.Store, "l"), Prefix: "7/", Epoch: ml.Epoch, Start: ml.Start,
		SegmentBytes: o.SegmentBytes, FlushBytes: o.FlushBytes, MaxBatchBytes: o.MaxBatchBytes,
		MaxInFlight: o.MaxInFlight, CacheBytes: o.CacheBytes, Logger: o.Logger, Codec: o.Codec,
	}
	var l *objlog.Log
	if o.Replicas != nil {
		l, err = Open(context.Background(), opts, *o.Replicas)
	} else {
		l, err = objlog.Open(context.Background(), opts)
	}
	if err != nil {
		e.T.Fatal(err)
	}
	return l
}
