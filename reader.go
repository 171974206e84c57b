package tern

import (
	"context"
	"time"

	"github.com/ternwal/tern/internal/engine"
)

// Reader reads a log in offset order and follows its tail. It returns only
// acknowledged entries. A Reader is not safe for concurrent use.
//
// A Reader that falls below the log's start (because of truncation or
// retention) fails with a *TruncatedError.
type Reader struct {
	remote *remoteReader // set for a reader on a server

	r engine.Reader
}

// Next returns the next entry, waiting at the tail until one is appended or
// ctx ends.
func (r *Reader) Next(ctx context.Context) (Entry, error) {
	if r.remote != nil {
		return r.remote.Next(ctx)
	}
	e, err := r.r.Next(ctx)
	if err != nil {
		return Entry{}, err
	}
	return entry(e), nil
}

// NextBatch returns up to max entries, at least one: it waits at the tail for
// the first until ctx ends, but returns what is there without waiting for
// more. It is the fast way to catch up.
func (r *Reader) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	if r.remote != nil {
		return r.remote.NextBatch(ctx, max)
	}
	es, err := r.r.NextBatch(ctx, max)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = entry(e)
	}
	return out, nil
}

func entry(e engine.Entry) Entry {
	if e.IsTick {
		return Entry{Offset: Offset(e.Offset), IsTick: true, Tick: e.Tick}
	}
	return Entry{Offset: Offset(e.Offset), Payload: e.Payload, Properties: e.Properties, Time: time.Unix(0, e.Time)}
}

// Close releases the Reader.
func (r *Reader) Close() error {
	if r.remote != nil {
		return r.remote.Close()
	}
	return r.r.Close()
}
