package engine

import (
	"sync"
	"sync/atomic"
)

// DedupLoad rebuilds a log's Dedup from the log once, when the first
// append with a producer needs it, rather than when the log is opened: a
// server opens all its logs at start, and most never see a producer. The
// engine calls Ensure before it queues an append with a producer, outside
// the log's mutex, and Forget when what it read back may be stale (a newer
// writer elsewhere appended). The zero value has loaded nothing.
type DedupLoad struct {
	mu     sync.Mutex // held while loading, and by Forget
	loaded atomic.Bool
}

// Ensure runs load unless a load has succeeded since the last Forget, and
// returns its error: the next Ensure tries again. Appends that call it
// meanwhile wait for it.
func (z *DedupLoad) Ensure(load func() error) error {
	if z.loaded.Load() {
		return nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.loaded.Load() {
		return nil
	}
	if err := load(); err != nil {
		return err
	}
	z.loaded.Store(true)
	return nil
}

// Forget runs reset, which empties the Dedup, once no load is under way,
// and makes the next Ensure load again.
func (z *DedupLoad) Forget(reset func()) {
	z.mu.Lock()
	defer z.mu.Unlock()
	reset()
	z.loaded.Store(false)
}
