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
//
// An engine whose reads back are costly (an object log's, one GET per
// object) loads in two depths: DedupShallow, the newest few objects, which
// hold what a writer that lost its node left unanswered, first; and
// DedupDeep, all of DedupReachBytes, only when an append shows that the
// shallow load may have missed its producer's history (NeedsDeep).
type DedupLoad struct {
	mu    sync.Mutex // held while loading, and by Forget
	depth atomic.Int32
}

// The depths of a DedupLoad.
const (
	DedupShallow = 1
	DedupDeep    = 2
)

// Ensure runs load(depth) unless a load at least that deep has succeeded
// since the last Forget, and returns its error: the next Ensure tries
// again. Appends that call it meanwhile wait for it.
func (z *DedupLoad) Ensure(depth int, load func(depth int) error) error {
	if int(z.depth.Load()) >= depth {
		return nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if int(z.depth.Load()) >= depth {
		return nil
	}
	if err := load(depth); err != nil {
		return err
	}
	z.depth.Store(int32(depth))
	return nil
}

// Forget runs reset, which empties the Dedup, once no load is under way,
// and makes the next Ensure load again.
func (z *DedupLoad) Forget(reset func()) {
	z.mu.Lock()
	defer z.mu.Unlock()
	reset()
	z.depth.Store(0)
}

// NeedsDeep reports whether an append of o may be the retry of one a
// shallow load did not reach: its producer has a history (its Acked is
// past its first sequence) that the table does not hold as far back as
// o.Seq. The caller holds the log's mutex.
func (d *Dedup) NeedsDeep(o AppendOptions) bool {
	if o.Producer == 0 || o.Acked <= 1 {
		return false // anonymous, or a producer whose first append this may be
	}
	pr := d.producers[o.Producer]
	return pr == nil || o.Seq < pr.low
}
