package objlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
)

// maxPlanObjects bounds the objects a catch-up reader plans to fetch before
// it looks the log up again.
const maxPlanObjects = 256

// Reader is the Source of a log's readers: it reads from the writer's
// memory when that still holds the next offset, and from the bucket (or a
// quorum segment's replicas) otherwise.
type Reader struct {
	l *Log
	f *fetcher // the catch-up reads in flight, or nil
}

// NewReader returns a Reader positioned at from, which must lie between the
// log's start and end (inclusive), or past the end while the log is
// unsettled (an open segment a writer elsewhere left, not yet recovered):
// such a Reader waits until the end passes from. With ticks, the Reader
// also returns the time ticks appended from now on, in their places
// between the entries.
func (l *Log) NewReader(from uint64, ticks bool) (engine.Reader, error) {
	return l.readers.Start(from, ticks, l.view, &Reader{l: l})
}

// view is the log as readers see it. The caller holds mu.
func (l *Log) view() engine.View {
	return engine.View{Start: l.start, End: l.end, Closed: l.closed, Advanced: l.advanced, Unsettled: l.unsettled}
}

// Fill decodes the batch holding c's next offset into c, from the writer's
// memory when it still holds it and from the bucket otherwise. It returns
// with nothing taken when a tick at the next offset has arrived.
func (r *Reader) Fill(ctx context.Context, c *engine.Cursor, wait bool) error {
	for lookups := 0; ; {
		l := r.l
		next := c.Pos()
		var mem []byte
		var plan []fetchObj
		var end uint64
		ready, err := c.Await(ctx, wait, func() engine.View {
			v := l.view()
			end = v.End
			mem, plan = nil, nil
			if next >= v.Start && next < v.End {
				if cd, ok := l.cachedAt(next); ok {
					mem = cd.data
				} else if r.f == nil || r.f.pos != next {
					plan = l.plan(next)
				}
			}
			return v
		})
		if !ready {
			return err
		}
		if mem != nil {
			r.stopFetch()
			b, err := batchAt(mem, next)
			if err != nil {
				return fmt.Errorf("objlog: %s, offset %d in memory: %w", l.opts.Prefix, next, err)
			}
			_, err = c.Take(b)
			return err
		}
		if plan != nil {
			if len(plan) == 0 {
				return fmt.Errorf("objlog: %s: no object holds offset %d, below the end %d", l.opts.Prefix, next, end)
			}
			r.stopFetch()
			r.f = newFetcher(l, plan, next)
		}
		b, err := r.f.batch(ctx)
		switch {
		case err == errPlanDone:
			r.stopFetch()
			continue
		case isNotFound(err) && lookups < 3:
			// Compacted or deleted under the reader, or offloaded by
			// another process: look again.
			lookups++
			r.stopFetch()
			if err := l.refreshOffloaded(ctx); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		took, err := c.Take(b)
		if err != nil {
			return r.f.corruptLast(err)
		}
		if took {
			r.f.pos = c.Pos()
			return nil
		}
	}
}

func (r *Reader) stopFetch() {
	if r.f != nil {
		r.f.close()
		r.f = nil
	}
}

// Close releases the Reader's reads in flight.
func (r *Reader) Close() { r.stopFetch() }

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
		for j := i; j < len(sg.objs); j++ {
			o := sg.objs[j]
			fo := fetchObj{key: l.segPrefix(sg.m.Seq) + o.key, size: o.bytes, end: o.end, src: l.source(sg)}
			if j+1 < len(sg.objs) {
				fo.next, fo.nextSize = l.segPrefix(sg.m.Seq)+sg.objs[j+1].key, sg.objs[j+1].bytes
			}
			plan = append(plan, fo)
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
	end  uint64 // the offset after its last entry
	src  Ranger
	// The next object of its segment, if any, whose first offset is end.
	// In the open segment a crash left (and in one a fence sealed), that
	// offset was read from the next object's first header without
	// checking its CRC.
	next     string
	nextSize int64
}

// chunk is one ranged GET of a fetcher.
type chunk struct {
	obj  int
	off  int64 // where in the object it starts
	size int64 // the bytes asked for
	done chan struct{}
	data []byte
	err  error
}

// errPlanDone says a fetcher has returned every batch of its objects.
var errPlanDone = errors.New("objlog: end of the planned objects")

// maxGetsPerChunk bounds a fetcher's GETs in flight to this many per
// ReadAhead, when its objects are smaller than ChunkBytes.
const maxGetsPerChunk = 4

// fetcher reads a run of objects with ranged GETs and returns their batches
// in order. It keeps about ReadAhead times ChunkBytes in flight: ReadAhead
// GETs of whole chunks, or more of smaller objects, up to maxGetsPerChunk
// times ReadAhead of them.
type fetcher struct {
	l      *Log
	objs   []fetchObj
	ctx    context.Context
	cancel context.CancelFunc
	issued []*chunk      // in flight or done, not yet consumed, in order
	ahead  int64         // the bytes of issued
	flying atomic.Int64  // the bytes of the GETs of issued not done yet
	landed chan struct{} // has a value when a GET has ended
	obj    int           // the object of the next GET
	off    int64         // and its offset there
	cur    []byte        // unconsumed bytes of object curObj
	curObj int
	curPos int64  // the position of cur in its object
	last   int64  // the position in its object of the batch last returned
	skip   uint64 // batches ending at or below it are skipped unchecked
	pos    uint64 // the offset its reader expects next
}

func newFetcher(l *Log, objs []fetchObj, from uint64) *fetcher {
	f := &fetcher{l: l, objs: objs, skip: from, pos: from, landed: make(chan struct{}, 1)}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

func (f *fetcher) close() { f.cancel() }

// issue starts GETs until ReadAhead chunks' worth of bytes are in flight
// (the last GET may go over by less than its own size: four GETs of
// fragments a little over ChunkBytes must not become three), or twice that
// is fetched and not yet consumed, or the plan is done.
func (f *fetcher) issue() {
	budget := int64(f.l.opts.ReadAhead) * int64(f.l.opts.ChunkBytes)
	for len(f.issued) < maxGetsPerChunk*f.l.opts.ReadAhead && f.obj < len(f.objs) {
		o := f.objs[f.obj]
		// A GET of ChunkBytes, or of the rest of the object when that is
		// under one and a half: a fragment a little over ChunkBytes
		// should not cost a second request.
		n := o.size - f.off
		if chunk := int64(f.l.opts.ChunkBytes); n >= chunk+chunk/2 {
			n = chunk
		}
		if n <= 0 {
			f.obj, f.off = f.obj+1, 0
			continue
		}
		if f.flying.Load() >= budget || f.ahead >= 2*budget {
			return
		}
		c := &chunk{obj: f.obj, off: f.off, size: n, done: make(chan struct{})}
		off := f.off
		f.issued = append(f.issued, c)
		f.ahead += n
		f.flying.Add(n)
		go func() {
			buf := make([]byte, n)
			got, err := o.src.GetRange(f.ctx, o.key, off, buf)
			switch {
			case err == io.EOF && int64(got) < n:
				err = &rpcerr.CorruptError{Path: o.key, Pos: off + int64(got),
					Err: fmt.Errorf("%w: the object ends before the %d bytes its segment records", record.ErrCorrupt, o.size)}
			case err == io.EOF:
				err = nil
			case err != nil:
				err = fmt.Errorf("objlog: read %s: %w", o.key, err)
			}
			c.data, c.err = buf[:got], err
			f.flying.Add(-n)
			close(c.done)
			select {
			case f.landed <- struct{}{}:
			default:
			}
		}()
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
				f.cur, f.curPos = f.cur[h.Length:], f.curPos+int64(h.Length)
				continue
			}
			b, err := record.Decode(f.cur)
			if err != nil {
				return record.Batch{}, f.corrupt(err)
			}
			// Past its object's end (and so maybe the log's, as the
			// objects planned are acknowledged), it would give a reader
			// starting here other entries than the next object gives
			// one starting there.
			if end := f.objs[f.curObj].end; b.NextOffset() > end {
				return record.Batch{}, f.pastEnd(ctx, b)
			}
			f.last = f.curPos
			f.cur, f.curPos = f.cur[h.Length:], f.curPos+int64(h.Length)
			return b, nil
		}
		f.issue()
		if len(f.issued) == 0 {
			if len(f.cur) > 0 {
				return record.Batch{}, f.corrupt(io.ErrUnexpectedEOF)
			}
			return record.Batch{}, errPlanDone
		}
		// Wait for the next chunk in order, and replace every GET that
		// ends before it, as a reader with a GET per worker would.
		c := f.issued[0]
		for waiting := true; waiting; {
			select {
			case <-c.done:
				waiting = false
			case <-f.landed:
				f.issue()
			case <-ctx.Done():
				return record.Batch{}, ctx.Err()
			}
		}
		f.issued[0] = nil
		f.issued = f.issued[1:]
		f.ahead -= c.size
		f.issue() // keep the GETs going while this chunk is decoded
		if c.err != nil {
			return record.Batch{}, c.err
		}
		switch {
		case c.obj != f.curObj:
			if len(f.cur) > 0 {
				return record.Batch{}, f.corrupt(io.ErrUnexpectedEOF)
			}
			f.curObj, f.cur, f.curPos = c.obj, c.data, c.off
		case len(f.cur) == 0:
			f.cur, f.curPos = c.data, c.off
		default:
			// A batch spans two GETs: join them in a new array, since
			// batches already returned alias the old one.
			f.cur = append(slices.Clip(f.cur), c.data...)
		}
	}
}

// pastEnd reports b, a valid batch of the current object that goes past
// the object's end. That end is where the next object of the segment
// starts, as its first header said when the segment was scanned, unchecked:
// when the next object's first batch is damaged (its base offset lowered,
// say), the damage is there and b is intact, so the error names the next
// object, the one to restore. Otherwise it names the current one.
func (f *fetcher) pastEnd(ctx context.Context, b record.Batch) error {
	o := f.objs[f.curObj]
	err := f.corrupt(fmt.Errorf("%w: batch of offsets %d to %d, past its object's end %d",
		record.ErrCorrupt, b.BaseOffset, b.NextOffset()-1, o.end))
	if o.next == "" {
		return err
	}
	if nerr := checkFirstBatch(ctx, o.src, o.next, o.nextSize); nerr != nil {
		return nerr
	}
	return err
}

// checkFirstBatch reads the first batch of the object key, of size bytes,
// and returns a *rpcerr.CorruptError naming the object unless the batch is
// valid. It returns other errors (of the read) as they are. (A valid batch
// that starts elsewhere than its object's recorded start is not the
// object's damage: the object is what its writer wrote.)
func checkFirstBatch(ctx context.Context, src Ranger, key string, size int64) error {
	corrupt := func(err error) error { return &rpcerr.CorruptError{Path: key, Pos: 0, Err: err} }
	var h [record.HeaderBytes]byte
	got, err := src.GetRange(ctx, key, 0, h[:])
	switch {
	case err == io.EOF && got < len(h):
		return corrupt(io.ErrUnexpectedEOF)
	case err != nil && err != io.EOF:
		return fmt.Errorf("objlog: read %s: %w", key, err)
	}
	hd, err := record.ParseHeader(h[:])
	if err != nil {
		return corrupt(err)
	}
	if int64(hd.Length) > size {
		return corrupt(fmt.Errorf("%w: first batch of %d bytes, in an object of %d", record.ErrCorrupt, hd.Length, size))
	}
	data := make([]byte, hd.Length)
	got, err = src.GetRange(ctx, key, 0, data)
	switch {
	case err == io.EOF && got < len(data):
		return corrupt(io.ErrUnexpectedEOF)
	case err != nil && err != io.EOF:
		return fmt.Errorf("objlog: read %s: %w", key, err)
	}
	if _, err := record.Decode(data); err != nil {
		return corrupt(err)
	}
	return nil
}

// corrupt reports bytes of the current object, from the position of cur
// on, that are not whole valid batches.
func (f *fetcher) corrupt(err error) error {
	return &rpcerr.CorruptError{Path: f.objs[f.curObj].key, Pos: f.curPos, Err: err}
}

// corruptLast reports the batch last returned, which its reader could not
// take.
func (f *fetcher) corruptLast(err error) error {
	return &rpcerr.CorruptError{Path: f.objs[f.curObj].key, Pos: f.last, Err: err}
}
