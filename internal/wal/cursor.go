package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ternwal/tern/internal/record"
)

// maxQueuedTicks bounds the ticks waiting for one reader. A reader that
// falls that far behind gets the newest tick in place of the last waiting
// one (ticks only ever move forward, so the newest says the most).
const maxQueuedTicks = 1 << 16

// ErrWouldWait is what a Cursor's fill returns, when asked not to wait,
// instead of waiting at the tail.
var ErrWouldWait = errors.New("wal: reader would wait")

// Cursor is the part of a reader that does not depend on where the log is
// kept: it hands out the entries of the batch last decoded and the time
// ticks queued for the reader, each in its place, and asks the reader's fill
// function for the next batch. The readers of this package and of package
// objlog embed one.
type Cursor struct {
	mu    *sync.Mutex // the log's: it guards ticks
	next  uint64      // offset of the next entry to decode
	buf   []Entry
	ticks []Tick // not yet returned, oldest first
}

// NewCursor returns a Cursor at offset from, whose ticks the log's mu
// guards.
func NewCursor(mu *sync.Mutex, from uint64) Cursor { return Cursor{mu: mu, next: from} }

// Pos is the offset of the next entry to decode.
func (c *Cursor) Pos() uint64 { return c.next }

// AddTick queues t. The caller holds the log's mutex. A tick at the same
// position as the last waiting one replaces it: a reader that has not yet
// seen the older one learns nothing more from it.
func (c *Cursor) AddTick(t Tick) {
	if n := len(c.ticks); n > 0 && (c.ticks[n-1].Offset == t.Offset || n >= maxQueuedTicks) {
		c.ticks[n-1] = t
		return
	}
	c.ticks = append(c.ticks, t)
}

// TickDue reports whether a queued tick comes before the next entry to
// decode. The caller holds the log's mutex.
func (c *Cursor) TickDue() bool { return len(c.ticks) > 0 && c.ticks[0].Offset <= c.next }

// Take buffers the entries of b from Pos on, and moves Pos past b when
// there were any. A batch that starts after Pos would skip entries: that is
// damage (a reader found where the batch holding Pos should be by headers
// it had not checked), reported as an error wrapping record.ErrCorrupt.
func (c *Cursor) Take(b record.Batch) (bool, error) {
	if b.BaseOffset > c.next {
		return false, fmt.Errorf("%w: batch of offsets %d to %d where offset %d was expected", record.ErrCorrupt, b.BaseOffset, b.NextOffset()-1, c.next)
	}
	c.buf = c.buf[:0]
	err := b.Each(func(off uint64, e record.Entry) error {
		if off >= c.next {
			c.buf = append(c.buf, Entry{Offset: off, Entry: e})
		}
		return nil
	})
	if err != nil || len(c.buf) == 0 {
		return false, err
	}
	c.next = b.NextOffset()
	return true, nil
}

// Drop forgets the buffered entries and the queued ticks.
func (c *Cursor) Drop() {
	c.buf = nil
	c.mu.Lock()
	c.ticks = nil
	c.mu.Unlock()
}

// Next returns the next entry or tick, calling fill (which waits at the
// tail until ctx ends) while there is none.
func (c *Cursor) Next(ctx context.Context, fill func(ctx context.Context, wait bool) error) (Entry, error) {
	for {
		if t, ok := c.tickBefore(c.head()); ok {
			return t, nil
		}
		if len(c.buf) > 0 {
			e := c.buf[0]
			c.buf = c.buf[1:]
			return e, nil
		}
		if err := fill(ctx, true); err != nil {
			return Entry{}, err
		}
	}
}

// NextBatch returns up to max entries and ticks (at least one), waiting at
// the tail for the first one until ctx ends but not for the others. fill
// returns ErrWouldWait rather than wait when its wait is false.
func (c *Cursor) NextBatch(ctx context.Context, max int, fill func(ctx context.Context, wait bool) error) ([]Entry, error) {
	if max <= 0 {
		return nil, errors.New("wal: NextBatch of no entries")
	}
	var out []Entry
	for len(out) < max {
		if t, ok := c.tickBefore(c.head()); ok {
			out = append(out, t)
			continue
		}
		if len(c.buf) == 0 {
			err := fill(ctx, len(out) == 0)
			if err == ErrWouldWait || (err != nil && len(out) > 0) {
				break
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		n := c.entriesBefore(min(max-len(out), len(c.buf)))
		out = append(out, c.buf[:n]...)
		c.buf = c.buf[n:]
	}
	return out, nil
}

// head is the offset of the next entry the cursor returns.
func (c *Cursor) head() uint64 {
	if len(c.buf) > 0 {
		return c.buf[0].Offset
	}
	return c.next
}

// tickBefore returns and removes the oldest waiting tick if its position is
// at or below off.
func (c *Cursor) tickBefore(off uint64) (Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ticks) == 0 || c.ticks[0].Offset > off {
		return Entry{}, false
	}
	t := c.ticks[0]
	c.ticks = c.ticks[1:]
	return Entry{Offset: t.Offset, IsTick: true, Tick: t.Time}, true
}

// entriesBefore returns how many of the first n buffered entries come before
// the oldest waiting tick.
func (c *Cursor) entriesBefore(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ticks) == 0 {
		return n
	}
	k := 0
	for k < n && c.buf[k].Offset < c.ticks[0].Offset {
		k++
	}
	return k
}
