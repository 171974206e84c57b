package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// Entry is an entry read from the log, or a time tick.
type Entry struct {
	Offset uint64
	record.Entry
	// IsTick marks a time tick, which is not an entry: Tick is its time and
	// Offset its position (every entry below it comes before it).
	IsTick bool
	Tick   uint64
}

// Tick is a time tick at a position in the log.
type Tick struct {
	Time   uint64
	Offset uint64 // every entry below Offset comes before the tick
}

// maxQueuedTicks bounds the ticks waiting for one reader. A reader that
// falls that far behind gets the newest tick in place of the last waiting
// one (ticks only ever move forward, so the newest says the most).
const maxQueuedTicks = 1 << 16

// Reader reads a log in offset order from a starting offset, and waits at the
// tail for new acknowledged entries. It never returns an entry that was not
// acknowledged. A Reader is not safe for concurrent use.
//
// The bytes of returned entries are the Reader's to give away: they are never
// reused or modified.
type Reader struct {
	l    *Log
	next uint64 // offset of the next entry to return
	buf  []Entry
	seg  segment.Info // the segment the scanner reads
	f    vfs.File
	sc   *segment.Scanner

	ticks []Tick // guarded by l.mu; ticks not yet returned, oldest first
}

// addTick queues t for the reader. The caller holds l.mu. A tick at the same
// position as the last waiting one replaces it: a reader that has not yet
// seen the older one learns nothing more from it.
func (r *Reader) addTick(t Tick) {
	if n := len(r.ticks); n > 0 && (r.ticks[n-1].Offset == t.Offset || n >= maxQueuedTicks) {
		r.ticks[n-1] = t
		return
	}
	r.ticks = append(r.ticks, t)
}

// tickBefore returns and removes the oldest waiting tick if its position is
// at or below off.
func (r *Reader) tickBefore(off uint64) (Entry, bool) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if len(r.ticks) == 0 || r.ticks[0].Offset > off {
		return Entry{}, false
	}
	t := r.ticks[0]
	r.ticks = r.ticks[1:]
	return Entry{Offset: t.Offset, IsTick: true, Tick: t.Time}, true
}

// head is the offset of the next entry the reader returns.
func (r *Reader) head() uint64 {
	if len(r.buf) > 0 {
		return r.buf[0].Offset
	}
	return r.next
}

// NewReader returns a Reader positioned at from, which must lie between the
// log's start and end (inclusive: a Reader at the end waits for the next
// append). With ticks, the Reader also returns the time ticks appended from
// now on, in their places between the entries.
func (l *Log) NewReader(from uint64, ticks bool) (*Reader, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, ErrClosed
	case from < l.start:
		return nil, &TruncatedError{Offset: from, Start: l.start}
	case from > l.end:
		return nil, fmt.Errorf("%w: offset %d, end %d", ErrOutOfRange, from, l.end)
	}
	r := &Reader{l: l, next: from}
	if ticks {
		l.tickReaders[r] = struct{}{}
	}
	return r, nil
}

// Next returns the next entry or tick, waiting for one at the tail until ctx
// ends.
func (r *Reader) Next(ctx context.Context) (Entry, error) {
	for {
		if t, ok := r.tickBefore(r.head()); ok {
			return t, nil
		}
		if len(r.buf) > 0 {
			e := r.buf[0]
			r.buf = r.buf[1:]
			return e, nil
		}
		if err := r.fill(ctx, true); err != nil {
			return Entry{}, err
		}
	}
}

// NextBatch returns up to max entries (at least one), waiting at the tail for
// the first one until ctx ends but not for the others.
func (r *Reader) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	if max <= 0 {
		return nil, errors.New("wal: NextBatch of no entries")
	}
	var out []Entry
	for len(out) < max {
		if t, ok := r.tickBefore(r.head()); ok {
			out = append(out, t)
			continue
		}
		if len(r.buf) == 0 {
			err := r.fill(ctx, len(out) == 0)
			if err == errWouldWait || (err != nil && len(out) > 0) {
				break
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		n := min(max-len(out), len(r.buf))
		n = r.entriesBefore(n)
		out = append(out, r.buf[:n]...)
		r.buf = r.buf[n:]
	}
	return out, nil
}

var errWouldWait = errors.New("wal: reader would wait")

// entriesBefore returns how many of the first n buffered entries come before
// the oldest waiting tick.
func (r *Reader) entriesBefore(n int) int {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if len(r.ticks) == 0 {
		return n
	}
	pos := r.ticks[0].Offset
	k := 0
	for k < n && r.buf[k].Offset < pos {
		k++
	}
	return k
}

// fill decodes the batch holding the next offset into buf. It returns with
// buf empty when a tick at the next offset has arrived.
func (r *Reader) fill(ctx context.Context, wait bool) error {
	for retried := false; ; {
		l := r.l
		l.mu.Lock()
		start, end, advanced, closed := l.start, l.end, l.advanced, l.closed
		seg, found := l.locate(r.next)
		tick := len(r.ticks) > 0 && r.ticks[0].Offset <= r.next
		l.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case tick:
			return nil
		case r.next < start:
			return &TruncatedError{Offset: r.next, Start: start}
		case r.next >= end || !found:
			if !wait {
				return errWouldWait
			}
			select {
			case <-advanced:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := r.scan(seg); err != nil {
			if errors.Is(err, fs.ErrNotExist) && !retried {
				retried = true
				continue // deleted by truncation or retention: the start has moved
			}
			return err
		}
		b, pos, err := r.sc.Next()
		if err != nil {
			if errors.Is(err, record.ErrCorrupt) || errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
				return &segment.CorruptError{Path: r.seg.Path, Pos: pos, Err: fmt.Errorf("reading offset %d: %w", r.next, err)}
			}
			return err
		}
		r.buf = r.buf[:0]
		err = b.Each(func(off uint64, e record.Entry) error {
			if off >= r.next {
				r.buf = append(r.buf, Entry{Offset: off, Entry: e})
			}
			return nil
		})
		if err != nil {
			return &segment.CorruptError{Path: r.seg.Path, Pos: pos, Err: err}
		}
		if len(r.buf) > 0 {
			r.next = b.NextOffset()
			return nil
		}
	}
}

// scan points the scanner at seg, reusing the open file if seg is the one
// already being read (it may have been sealed since).
func (r *Reader) scan(seg segment.Info) error {
	if r.f != nil && r.seg.Path == seg.Path {
		r.seg = seg
		r.sc.SetLimit(seg.End)
		return nil
	}
	r.closeFile()
	f, err := r.l.opts.FS.Open(seg.Path)
	if err != nil {
		return err
	}
	r.f, r.seg = f, seg
	r.sc = segment.NewScanner(f, seg.Find(r.next), seg.End)
	return nil
}

// locate returns the segment holding off, as acknowledged. The caller holds mu.
func (l *Log) locate(off uint64) (segment.Info, bool) {
	if l.active.Path != "" && off >= l.active.Base {
		return l.active, off < l.active.Next
	}
	k := sort.Search(len(l.sealed), func(i int) bool { return l.sealed[i].Next > off })
	if k == len(l.sealed) || off < l.sealed[k].Base {
		return segment.Info{}, false
	}
	return l.sealed[k], true
}

func (r *Reader) closeFile() {
	if r.f != nil {
		r.f.Close()
		r.f, r.sc = nil, nil
	}
}

// Close releases the Reader's file and stops its ticks.
func (r *Reader) Close() error {
	r.closeFile()
	r.buf = nil
	r.l.mu.Lock()
	delete(r.l.tickReaders, r)
	r.ticks = nil
	r.l.mu.Unlock()
	return nil
}
