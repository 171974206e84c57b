package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/ternwal/tern/client/rpcerr"
)

// budget is a semaphore counted in bytes (golang.org/x/sync's, which serves
// waiters in order, so a large request is not starved by a stream of small
// ones): the bytes of appends the Server holds in memory, from their
// receipt until the library no longer holds them (durable, or failed). The
// zero budget, and a nil one, bound nothing.
type budget struct {
	limit int64  // 0: no bound
	name  string // the setting that sets limit, for the error of a request that never fits
	sem   *semaphore.Weighted

	used    atomic.Int64 // granted and not released
	waiters atomic.Int64 // in acquire
}

func newBudget(limit int64, name string) *budget {
	b := &budget{limit: max(limit, 0), name: name}
	if b.limit > 0 {
		b.sem = semaphore.NewWeighted(b.limit)
	}
	return b
}

// acquire takes n bytes, waiting until they are free or ctx ends. A request
// of more bytes than the whole budget can never fit: it fails at once with
// an error wrapping rpcerr.ErrLimit that names the setting.
func (b *budget) acquire(ctx context.Context, n int64) error {
	if b == nil || b.limit == 0 || n <= 0 {
		return nil
	}
	if n > b.limit {
		return fmt.Errorf("%w: an append of %d bytes is over the %d bytes the server holds for appends in memory; send smaller requests, or raise %s",
			rpcerr.ErrLimit, n, b.limit, b.name)
	}
	b.waiters.Add(1)
	err := b.sem.Acquire(ctx, n)
	b.waiters.Add(-1)
	if err != nil {
		return err
	}
	b.used.Add(n)
	return nil
}

// release gives back n bytes taken by acquire.
func (b *budget) release(n int64) {
	if b == nil || b.limit == 0 || n <= 0 {
		return
	}
	if b.used.Add(-n) < 0 {
		panic(fmt.Sprintf("server: %s budget released more than it granted", b.name))
	}
	b.sem.Release(n)
}

// waiting is how many acquires wait, or are about to.
func (b *budget) waiting() int { return int(b.waiters.Load()) }

// inUse is the bytes granted and not yet released.
func (b *budget) inUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// flow is an AppendStream's flow control: the bytes of its requests not yet
// answered, and the bound at which the stream stops receiving. The
// receiving goroutine calls wait and add, the answering one done.
type flow struct {
	limit int64 // 0: no bound

	mu      sync.Mutex
	pending int64
	peak    int64         // the most pending has been, for tests
	changed chan struct{} // has a value when done has run since the last wait
}

func newFlow(limit int64) *flow {
	return &flow{limit: max(limit, 0), changed: make(chan struct{}, 1)}
}

// wait returns once the unanswered bytes are under the limit, or ctx's
// error. One request is always let in: one larger than the limit waits only
// for the stream to be answered.
func (f *flow) wait(ctx context.Context) error {
	for {
		f.mu.Lock()
		open := f.limit == 0 || f.pending < f.limit
		f.mu.Unlock()
		if open {
			return nil
		}
		select {
		case <-f.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// add counts n bytes received.
func (f *flow) add(n int64) {
	f.mu.Lock()
	f.pending += n
	f.peak = max(f.peak, f.pending)
	f.mu.Unlock()
}

// done uncounts n bytes answered.
func (f *flow) done(n int64) {
	if n == 0 {
		return
	}
	f.mu.Lock()
	f.pending -= n
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// most is the most bytes the stream has had unanswered.
func (f *flow) most() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak
}
