package loadgen

import (
	"sync"
	"sync/atomic"
	"time"
)

// A window is one asynchronous producer's appends in flight (Spec.InFlight
// of them at most). Its costs per entry are what every system pays alike,
// and kept small so that they do not bound a target that takes a million
// entries a second: no channel operation, allocation or shared lock per
// entry, and one monotonic clock read at each end of an append (the
// latency still runs from the AppendAsync call to the done call).
//
// Each entry in flight holds a slot, whose done method, bound once, is the
// callback the target gets: the slot says when its entry was started. The
// producer takes free slots in turn; completions may come in any order,
// from any goroutine, at once.
type window struct {
	l     *load
	slots []slot
	next  int // the producer's next slot to look at
	// inflight counts the slots in use; waiting is set by a producer
	// blocked on it, and the completion that clears it sends on wake.
	inflight atomic.Int64
	waiting  atomic.Bool
	wake     chan struct{}
	// hist is this producer's latencies, merged into the load's at the
	// end: its lock is contended only by completions running at once.
	hist *Histogram
}

// A slot is one entry in flight.
type slot struct {
	w *window
	// intended is when the append started, in nanoseconds after l.start;
	// written by the producer before AppendAsync, read by done.
	intended int64
	busy     atomic.Bool
	done     func(error) // s.complete
}

func newWindow(l *load, size int) *window {
	w := &window{l: l, slots: make([]slot, size), wake: make(chan struct{}, 1), hist: NewHistogram()}
	for i := range w.slots {
		s := &w.slots[i]
		s.w, s.done = w, s.complete
	}
	return w
}

// take returns a free slot, waiting for one while the window is full, or
// nil once stop is closed first.
func (w *window) take(stop <-chan struct{}) *slot {
	if !w.waitBelow(int64(len(w.slots)), stop) {
		return nil
	}
	for {
		s := &w.slots[w.next]
		w.next++
		if w.next == len(w.slots) {
			w.next = 0
		}
		// Only the producer sets busy, so a free slot stays free.
		if !s.busy.Load() {
			s.busy.Store(true)
			w.inflight.Add(1)
			return s
		}
	}
}

// waitBelow waits until fewer than n entries are in flight, or stop is
// closed (nil: never), and reports which. Only the producer calls it.
func (w *window) waitBelow(n int64, stop <-chan struct{}) bool {
	for w.inflight.Load() >= n {
		w.waiting.Store(true)
		if w.inflight.Load() < n {
			// A completion came in between; if it saw the flag, its
			// wake-up is on the way and must be taken.
			if !w.waiting.CompareAndSwap(true, false) {
				<-w.wake
			}
			return true
		}
		select {
		case <-w.wake:
		case <-stop:
			if !w.waiting.CompareAndSwap(true, false) {
				<-w.wake
			}
			return false
		}
	}
	return true
}

// drain waits until every entry started is done, or until deadline, and
// reports whether they all are.
func (w *window) drain(deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-timer.C:
			once.Do(func() { close(stop) })
		case <-stop:
		}
	}()
	ok := w.waitBelow(1, stop)
	once.Do(func() { close(stop) })
	return ok
}

// complete is a slot's done: it records the outcome, frees the slot and
// wakes the producer if it waits for one.
func (s *slot) complete(err error) {
	w := s.w
	w.l.record(w.hist, s.intended, 1, err)
	s.busy.Store(false)
	w.inflight.Add(-1)
	if w.waiting.Load() && w.waiting.CompareAndSwap(true, false) {
		w.wake <- struct{}{}
	}
}
