package tern

import (
	"context"
	"time"

	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/wal"
)

// engine is the write and read path of an open log: package wal for a log in
// local segment files, package objlog for one in object storage.
type engine interface {
	Append(epoch uint64, es []record.Entry) (pending, error)
	AppendTick(epoch, t uint64) (pending, error)
	// Fence makes epoch the writer's; owned reports whether the writer can
	// still prove it holds it.
	Fence(ctx context.Context, epoch uint64, owned func() bool) error
	NewReader(from uint64, ticks bool) (entryReader, error)
	Truncate(before uint64) error
	ApplyRetention(now time.Time, r wal.Retention) error
	Stats() wal.Stats
	Close() error
}

// pending is an append an engine has queued.
type pending interface {
	Wait(ctx context.Context) (uint64, error)
	Done() <-chan struct{}
}

// entryReader is an engine's reader.
type entryReader interface {
	Next(ctx context.Context) (wal.Entry, error)
	NextBatch(ctx context.Context, max int) ([]wal.Entry, error)
	Close() error
}

type localEngine struct{ *wal.Log }

func (e localEngine) Append(epoch uint64, es []record.Entry) (pending, error) {
	p, err := e.Log.Append(epoch, es)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (e localEngine) AppendTick(epoch, t uint64) (pending, error) {
	p, err := e.Log.AppendTick(epoch, t)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (e localEngine) Fence(_ context.Context, epoch uint64, owned func() bool) error {
	return e.Log.Fence(epoch, owned)
}

func (e localEngine) NewReader(from uint64, ticks bool) (entryReader, error) {
	r, err := e.Log.NewReader(from, ticks)
	if err != nil {
		return nil, err
	}
	return r, nil
}

type objectEngine struct{ *objlog.Log }

func (e objectEngine) Append(epoch uint64, es []record.Entry) (pending, error) {
	p, err := e.Log.Append(epoch, es)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (e objectEngine) AppendTick(epoch, t uint64) (pending, error) {
	p, err := e.Log.AppendTick(epoch, t)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (e objectEngine) NewReader(from uint64, ticks bool) (entryReader, error) {
	r, err := e.Log.NewReader(from, ticks)
	if err != nil {
		return nil, err
	}
	return r, nil
}
