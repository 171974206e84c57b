package objlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/wal"
)

// maxQueuedTicks bounds the ticks waiting for one reader, as in package wal.
const maxQueuedTicks = 1 << 16

// maxPlanObjects bounds the objects a catch-up reader plans to fetch before
// it looks the log up again.
const maxPlanObjects = 256

// Reader reads a log in offset order from a starting offset and waits at the
// tail for new acknowledged entries. It never returns an entry that was not
// acknowledged. A Reader is not safe for concurrent use.
//
// The bytes of returned entries are the Reader's to give away: they are never
// reused or modified.
type Reader struct {
	l     *Log
	next  uint64 // offset of the next entry to return
	buf   []wal.Entry
	f     *fetcher   // the catch-up reads in flight, or nil
	ticks []wal.Tick // guarded by l.mu; not yet returned, oldest first
}

func (r *Reader) addTick(t wal.Tick) {
	if n := len(r.ticks); n > 0 && (r.ticks[n-1].Offset == t.Offset || n >= maxQueuedTicks) {
		r.ticks[n-1] = t
		return
	}
	r.ticks = append(r.ticks, t)
}

func (r *Reader) tickBefore(off uint64) (wal.Entry, bool) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if len(r.ticks) == 0 || r.ticks[0].Offset > off {
		return wal.Entry{}, false
	}
	t := r.ticks[0]
	r.ticks = r.ticks[1:]
	return wal.Entry{Offset: t.Offset, IsTick: true, Tick: t.Time}, true
}

func (r *Reader) head() uint64 {
	if len(r.buf) > 0 {
		return r.buf[0].Offset
	}
	return r.next
}

// NewReader returns a Reader positioned at from, which must lie between the
// log's start and end (inclusive). With ticks, the Reader also returns the
// time ticks appended from now on, in their places between the entries.
func (l *Log) NewReader(from uint64, ticks bool) (*Reader, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, wal.ErrClosed
	case from < l.start:
		return nil, &wal.TruncatedError{Offset: from, Start: l.start}
	case from > l.end:
		return nil, fmt.Errorf("%w: offset %d, end %d", wal.ErrOutOfRange, from, l.end)
	}
	r := &Reader{l: l, next: from}
	if ticks {
		l.tickReaders[r] = struct{}{}
	}
	return r, nil
}

// Next returns the next entry or tick, waiting at the tail until ctx ends.
func (r *Reader) Next(ctx context.Context) (wal.Entry, error) {
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
			return wal.Entry{}, err
		}
	}
}

// NextBatch returns up to max entries (at least one), waiting at the tail
// for the first one until ctx ends but not for the others.
func (r *Reader) NextBatch(ctx context.Context, max int) ([]wal.Entry, error) {
	if max <= 0 {
		return nil, errors.New("objlog: NextBatch of no entries")
	}
	var out []wal.Entry
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
		n := r.entriesBefore(min(max-len(out), len(r.buf)))
		out = append(out, r.buf[:n]...)
		r.buf = r.buf[n:]
	}
	return out, nil
}

var errWouldWait = errors.New("objlog: reader would wait")

func (r *Reader) entriesBefore(n int) int {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if len(r.ticks) == 0 {
		return n
	}
	k := 0
	for k < n && r.buf[k].Offset < r.ticks[0].Offset {
		k++
	}
	return k
}

// fill decodes the batch holding the next offset into buf, from the
// writer's memory when it still holds it and from the bucket otherwise. It
// returns with buf empty when a tick at the next offset has arrived.
func (r *Reader) fill(ctx context.Context, wait bool) error {
	for lookups := 0; ; {
		l := r.l
		l.mu.Lock()
		start, end, advanced, closed := l.start, l.end, l.advanced, l.closed
		tick := len(r.ticks) > 0 && r.ticks[0].Offset <= r.next
		var mem []byte
		var plan []fetchObj
		inRange := r.next >= start && r.next < end
		if inRange {
			if c, ok := l.cachedAt(r.next); ok {
				mem = c.data
			} else if r.f == nil || r.f.pos != r.next {
				plan = l.plan(r.next)
			}
		}
		l.mu.Unlock()
		switch {
		case closed:
			return wal.ErrClosed
		case tick:
			return nil
		case r.next < start:
			return &wal.TruncatedError{Offset: r.next, Start: start}
		case r.next >= end:
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
		if mem != nil {
			r.stopFetch()
			b, err := batchAt(mem, r.next)
			if err != nil {
				return fmt.Errorf("objlog: %s, offset %d in memory: %w", l.opts.Prefix, r.next, err)
			}
			r.take(b)
			return nil
		}
		if plan != nil {
			if len(plan) == 0 {
				return fmt.Errorf("objlog: %s: no object holds offset %d, below the end %d", l.opts.Prefix, r.next, end)
			}
			r.stopFetch()
			r.f = newFetcher(l, plan, r.next)
		}
		b, err := r.f.batch(ctx)
		switch {
		case err == errPlanDone:
			r.stopFetch()
			continue
		case isNotFound(err) && lookups < 3:
			// Compacted or deleted under the reader: look again.
			lookups++
			r.stopFetch()
			continue
		case err != nil:
			return err
		}
		if r.take(b) {
			return nil
		}
	}
}

// take buffers b's entries from the next offset on and reports whether there
// were any.
func (r *Reader) take(b record.Batch) bool {
	r.buf = r.buf[:0]
	b.Each(func(off uint64, e record.Entry) error { // b decoded: Each cannot fail
		if off >= r.next {
			r.buf = append(r.buf, wal.Entry{Offset: off, Entry: e})
		}
		return nil
	})
	if len(r.buf) == 0 {
		return false
	}
	r.next = b.NextOffset()
	if r.f != nil {
		r.f.pos = r.next
	}
	return true
}

func (r *Reader) stopFetch() {
	if r.f != nil {
		r.f.close()
		r.f = nil
	}
}

// Close releases the Reader's reads in flight and stops its ticks.
func (r *Reader) Close() error {
	r.stopFetch()
	r.buf = nil
	r.l.mu.Lock()
	delete(r.l.tickReaders, r)
	r.ticks = nil
	r.l.mu.Unlock()
	return nil
}

// cachedAt returns the fragment in memory that holds off. The caller holds
// mu.
func (l *Log) cachedAt(off uint64) (cached, bool) {
	for i := len(l.cache) - 1; i >= 0; i-- {
		c := l.cache[i]
		if c.base <= off && off < c.end {
			return c, true
		}
		if c.end <= off {
			break
		}
	}
	return cached{}, false
}

// batchAt decodes the batch of data (whole batches) that holds off.
func batchAt(data []byte, off uint64) (record.Batch, error) {
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil {
			return record.Batch{}, err
		}
		if h.NextOffset() > off {
			return record.Decode(data)
		}
		if uint64(len(data)) < uint64(h.Length) {
			return record.Batch{}, io.ErrUnexpectedEOF
		}
		data = data[h.Length:]
	}
	return record.Batch{}, fmt.Errorf("%w: offset %d is not in the batches", record.ErrCorrupt, off)
}

// plan returns the acknowledged objects from the one holding off on, up to
// maxPlanObjects. The caller holds mu.
func (l *Log) plan(off uint64) []fetchObj {
	s, i, ok := l.locate(off)
	if !ok {
		return []fetchObj{}
	}
	var plan []fetchObj
	for k := slices.Index(l.segs, s); k < len(l.segs) && len(plan) < maxPlanObjects; k, i = k+1, 0 {
		sg := l.segs[k]
		for _, o := range sg.objs[i:] {
			plan = append(plan, fetchObj{key: l.segPrefix(sg.m.Seq) + o.key, size: o.bytes})
			if len(plan) == maxPlanObjects {
				break
			}
		}
	}
	return plan
}

// fetchObj is an object a catch-up reader reads whole, in order.
type fetchObj struct {
	key  string
	size int64
}

// chunk is one ranged GET of a fetcher.
type chunk struct {
	obj  int
	done chan struct{}
	data []byte
	err  error
}

// errPlanDone says a fetcher has returned every batch of its objects.
var errPlanDone = errors.New("objlog: end of the planned objects")

// fetcher reads a run of objects with ranged GETs, ReadAhead of them in
// flight, and returns their batches in order.
type fetcher struct {
	l      *Log
	objs   []fetchObj
	ctx    context.Context
	cancel context.CancelFunc
	issued []*chunk // in flight or done, not yet consumed, in order
	obj    int      // the object of the next GET
	off    int64    // and its offset there
	cur    []byte   // unconsumed bytes of object curObj
	curObj int
	skip   uint64 // batches ending at or below it are skipped unchecked
	pos    uint64 // the offset its reader expects next
}

func newFetcher(l *Log, objs []fetchObj, from uint64) *fetcher {
	f := &fetcher{l: l, objs: objs, skip: from, pos: from}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

func (f *fetcher) close() { f.cancel() }

// issue starts GETs until ReadAhead are in flight or the plan is done.
func (f *fetcher) issue() {
	for len(f.issued) < f.l.opts.ReadAhead && f.obj < len(f.objs) {
		o := f.objs[f.obj]
		n := min(int64(f.l.opts.ChunkBytes), o.size-f.off)
		if n <= 0 {
			f.obj, f.off = f.obj+1, 0
			continue
		}
		c := &chunk{obj: f.obj, done: make(chan struct{})}
		off := f.off
		go func() {
			defer close(c.done)
			buf := make([]byte, n)
			got, err := f.l.opts.Bucket.GetRange(f.ctx, o.key, off, buf)
			switch {
			case err == io.EOF && int64(got) < n:
				err = fmt.Errorf("objlog: %s ends at byte %d, before the %d its segment records: %w", o.key, off+int64(got), o.size, record.ErrCorrupt)
			case err == io.EOF:
				err = nil
			case err != nil:
				err = fmt.Errorf("objlog: read %s: %w", o.key, err)
			}
			c.data, c.err = buf[:got], err
		}()
		f.issued = append(f.issued, c)
		if f.off += n; f.off >= o.size {
			f.obj, f.off = f.obj+1, 0
		}
	}
}

// batch returns the next batch of the objects, or errPlanDone after the
// last.
func (f *fetcher) batch(ctx context.Context) (record.Batch, error) {
	for {
		for len(f.cur) >= record.HeaderBytes {
			h, err := record.ParseHeader(f.cur)
			if err != nil {
				return record.Batch{}, f.corrupt(err)
			}
			if uint64(len(f.cur)) < uint64(h.Length) {
				break
			}
			if h.NextOffset() <= f.skip {
				f.cur = f.cur[h.Length:]
				continue
			}
			b, err := record.Decode(f.cur)
			if err != nil {
				return record.Batch{}, f.corrupt(err)
			}
			f.cur = f.cur[h.Length:]
			return b, nil
		}
		f.issue()
		if len(f.issued) == 0 {
			if len(f.cur) > 0 {
				return record.Batch{}, f.corrupt(io.ErrUnexpectedEOF)
			}
			return record.Batch{}, errPlanDone
		}
		c := f.issued[0]
		select {
		case <-c.done:
		case <-ctx.Done():
			return record.Batch{}, ctx.Err()
		}
		f.issued[0] = nil
		f.issued = f.issued[1:]
		f.issue() // keep ReadAhead GETs in flight while this chunk is decoded
		if c.err != nil {
			return record.Batch{}, c.err
		}
		switch {
		case c.obj != f.curObj:
			if len(f.cur) > 0 {
				return record.Batch{}, f.corrupt(io.ErrUnexpectedEOF)
			}
			f.curObj, f.cur = c.obj, c.data
		case len(f.cur) == 0:
			f.cur = c.data
		default:
			// A batch spans two GETs: join them in a new array, since
			// batches already returned alias the old one.
			f.cur = append(slices.Clip(f.cur), c.data...)
		}
	}
}

func (f *fetcher) corrupt(err error) error {
	return fmt.Errorf("objlog: %s is damaged: %w", f.objs[f.curObj].key, err)
}
