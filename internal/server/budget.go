package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/ternwal/tern/client/rpcerr"
)

// budget is a semaphore counted in bytes: the bytes of appends the Server
// holds in memory, from their receipt until the library no longer holds
// them (durable, or failed). Waiters are served in order, so a large
// request is not starved by a stream of small ones. The zero budget, and a
// nil one, bound nothing.
type budget struct {
	limit int64  // 0: no bound
	name  string // the setting that sets limit, for the error of a request that never fits

	mu      sync.Mutex
	used    int64
	waiters []*budgetWaiter // in arrival order
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are granted
}

func newBudget(limit int64, name string) *budget {
	return &budget{limit: max(limit, 0), name: name}
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
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: give it back
		b.used -= n
		b.grant()
	default:
		for i, o := range b.waiters {
			if o == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		b.grant() // the first waiter may fit now that w no longer blocks it
	}
	return ctx.Err()
}

// release gives back n bytes taken by acquire.
func (b *budget) release(n int64) {
	if b == nil || b.limit == 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic(fmt.Sprintf("server: %s budget released more than it granted", b.name))
	}
	b.grant()
}

// grant wakes the waiters, in order, while the first fits. The caller holds
// mu.
func (b *budget) grant() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.limit {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

// waiting is how many acquires wait.
func (b *budget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// inUse is the bytes granted and not yet released.
func (b *budget) inUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
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
