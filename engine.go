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
	Append(epoch uint64, es []record.Entry) (wal.Pending, error)
	AppendTick(epoch, t uint64) (wal.Pending, error)
	// Fence makes epoch the writer's; owned reports whether the writer can
	// still prove it holds it.
	Fence(ctx context.Context, epoch uint64, owned func() bool) error
	NewReader(from uint64, ticks bool) (entryReader, error)
	Truncate(before uint64) error
	ApplyRetention(now time.Time, r wal.Retention) error
	Stats() wal.Stats
	Close() error
}

// entryReader is an engine's reader.
type entryReader interface {
	Next(ctx context.Context) (wal.Entry, error)
	NextBatch(ctx context.Context, max int) ([]wal.Entry, error)
	Close() error
}

type localEngine struct{ *wal.Log }

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

func (e objectEngine) NewReader(from uint64, ticks bool) (entryReader, error) {
	r, err := e.Log.NewReader(from, ticks)
	if err != nil {
		return nil, err
	}
	return r, nil
}
