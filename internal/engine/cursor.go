package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/record"
)

// maxQueuedTicks bounds the ticks waiting for one reader. A reader that
// falls that far behind gets the newest tick in place of the last waiting
// one (ticks only ever move forward, so the newest says the most).
const maxQueuedTicks = 1 << 16

// ErrWouldWait is what a Source's Fill returns, when asked not to wait,
// instead of waiting at the tail.
var ErrWouldWait = errors.New("engine: reader would wait")

// View is what a reader sees of its log at one moment, taken under the
// log's mutex.
type View struct {
	Start, End uint64 // the log holds the acknowledged entries [Start, End)
	Closed     bool
	// Advanced is closed when End moves, a tick arrives or the log closes.
	Advanced <-chan struct{}
	// NotYet says the reader's position, though below End, cannot be read
	// yet: the reader waits as it does at the end.
	NotYet bool
	// Unsettled says End is only a lower bound: an earlier writer,
	// elsewhere, may have acknowledged entries past it that this process
	// does not see until it recovers them (a quorum log taken over from a
	// dead owner). A reader may then start past End, and waits there.
	Unsettled bool
}

// Source is the part of a reader that knows where the log is kept. Fill
// decodes the batch holding c.Pos() and hands it to c.Take; it returns with
// nothing taken when a tick comes first, and ErrWouldWait rather than wait
// at the tail when wait is false. Close releases what the Source holds.
type Source interface {
	Fill(ctx context.Context, c *Cursor, wait bool) error
	Close()
}

// Readers are a log's readers: Start checks where a reader may start, and
// Tick hands the time ticks to those that take them. The log's mutex
// guards the Readers.
type Readers struct {
	mu    *sync.Mutex
	ticks map[*Cursor]struct{} // the readers that take ticks
}

// NewReaders returns the Readers of a log whose mutex is mu.
func NewReaders(mu *sync.Mutex) Readers {
	return Readers{mu: mu, ticks: map[*Cursor]struct{}{}}
}

// Start returns a Reader at from, reading through src, after checking,
// under the log's mutex, that from lies between the start and the end of
// the log as look, called with the mutex held, shows it (past an
// Unsettled end too). With ticks, the
// Reader also returns the ticks handed to Tick from now on.
func (rs *Readers) Start(from uint64, ticks bool, look func() View, src Source) (Reader, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	v := look()
	switch {
	case v.Closed:
		return nil, rpcerr.ErrClosed
	case from < v.Start:
		return nil, &rpcerr.TruncatedError{Offset: from, Start: v.Start}
	case from > v.End && !v.Unsettled:
		return nil, fmt.Errorf("%w: offset %d, end %d", rpcerr.ErrOutOfRange, from, v.End)
	}
	c := &Cursor{rs: rs, mu: rs.mu, next: from, src: src}
	if ticks {
		rs.ticks[c] = struct{}{}
	}
	return c, nil
}

// Tick hands t to the readers that take ticks. The caller holds the log's
// mutex.
func (rs *Readers) Tick(t Tick) {
	for c := range rs.ticks {
		c.addTick(t)
	}
}

// Ticking is the number of open readers that take ticks. The caller holds
// the log's mutex.
func (rs *Readers) Ticking() int { return len(rs.ticks) }

// Cursor is a log's reader: the part that does not depend on where the log
// is kept. It hands out the entries of the batch its Source last decoded
// and the time ticks queued for it, each in its place. It never returns an
// entry that was not acknowledged, and is not safe for concurrent use.
type Cursor struct {
	rs    *Readers
	mu    *sync.Mutex // the log's: it guards ticks
	src   Source
	next  uint64 // offset of the next entry to decode
	buf   []Entry
	ticks []Tick // not yet returned, oldest first
}

// Pos is the offset of the next entry to decode.
func (c *Cursor) Pos() uint64 { return c.next }

// addTick queues t. The caller holds the log's mutex. A tick at the same
// position as the last waiting one replaces it: a reader that has not yet
// seen the older one learns nothing more from it.
func (c *Cursor) addTick(t Tick) {
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

// Await waits until the reader can go on from Pos, as look, called with the
// log's mutex held, shows the log. It returns true when the batch at Pos
// can be read; false with a nil error when a tick comes first; or the error
// Fill returns: rpcerr.ErrClosed, a *rpcerr.TruncatedError once Pos is
// below the start, ErrWouldWait at the tail when wait is false, or ctx's
// error.
func (c *Cursor) Await(ctx context.Context, wait bool, look func() View) (bool, error) {
	for {
		c.mu.Lock()
		v := look()
		tick := c.TickDue()
		c.mu.Unlock()
		switch {
		case v.Closed:
			return false, rpcerr.ErrClosed
		case tick:
			return false, nil
		case c.next < v.Start:
			return false, &rpcerr.TruncatedError{Offset: c.next, Start: v.Start}
		case c.next >= v.End || v.NotYet:
			if !wait {
				return false, ErrWouldWait
			}
			select {
			case <-v.Advanced:
				continue
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		return true, nil
	}
}

// Close releases the reader's Source, forgets its buffered entries and
// stops its ticks.
func (c *Cursor) Close() error {
	c.src.Close()
	c.buf = nil
	c.mu.Lock()
	delete(c.rs.ticks, c)
	c.ticks = nil
	c.mu.Unlock()
	return nil
}

// Next returns the next entry or tick, waiting at the tail until ctx ends.
func (c *Cursor) Next(ctx context.Context) (Entry, error) {
	for {
		if t, ok := c.tickBefore(c.head()); ok {
			return t, nil
		}
		if len(c.buf) > 0 {
			e := c.buf[0]
			c.buf = c.buf[1:]
			return e, nil
		}
		if err := c.src.Fill(ctx, c, true); err != nil {
			return Entry{}, err
		}
	}
}

// NextBatch returns up to max entries and ticks (at least one), waiting at
// the tail for the first one until ctx ends but not for the others; with
// maxBytes > 0, also up to maxBytes of entries unless the first is larger
// (see Reader). It decodes no further batch once it has what it returns.
func (c *Cursor) NextBatch(ctx context.Context, max, maxBytes int) ([]Entry, error) {
	if max <= 0 {
		return nil, errors.New("engine: NextBatch of no entries")
	}
	var out []Entry
	size := 0
	full := func() bool { return maxBytes > 0 && size >= maxBytes }
	for len(out) < max && !full() {
		if t, ok := c.tickBefore(c.head()); ok {
			out = append(out, t)
			continue
		}
		if len(c.buf) == 0 {
			err := c.src.Fill(ctx, c, len(out) == 0)
			if err == ErrWouldWait || (err != nil && len(out) > 0) {
				break
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		n := c.entriesBefore(min(max-len(out), len(c.buf)))
		if out == nil {
			// One allocation for what the batch decoded holds, rather than
			// one per doubling.
			out = make([]Entry, 0, min(max, len(c.buf)))
		}
		if maxBytes > 0 {
			k := 0
			for ; k < n; k++ {
				b := entryBytes(c.buf[k].Entry)
				if size+b > maxBytes && (len(out) > 0 || k > 0) {
					size = maxBytes // full: what is left waits for the next call
					break
				}
				size += b
			}
			n = k
		}
		out = append(out, c.buf[:n]...)
		c.buf = c.buf[n:]
	}
	return out, nil
}

// entryBytes is what e counts for against NextBatch's maxBytes.
func entryBytes(e record.Entry) int {
	n := len(e.Payload)
	for k, v := range e.Properties {
		n += len(k) + len(v)
	}
	return n
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
