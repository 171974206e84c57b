package objlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
)

// frag is a fragment: the groups cut together, uploaded as one object.
type frag struct {
	seg     *seg // nil for a fragment of ticks only, which uploads nothing
	n       int  // its number in seg
	epoch   uint64
	groups  []*engine.Group
	data    []byte
	saved   int64 // bytes compression saved
	base    uint64
	end     uint64
	maxTime int64
	done    bool
	err     error
}

// Append queues entries, written by the writer of the given epoch, to be
// uploaded together in one batch, and returns at once. o deduplicates and
// conditions it (engine.Engine's Append).
func (l *Log) Append(epoch uint64, entries []record.Entry, o engine.AppendOptions) (engine.Pending, error) {
	if o.Producer != 0 {
		if err := l.loadDedup(o); err != nil {
			return engine.Pending{}, err
		}
	}
	l.mu.Lock()
	if err := engine.Refuse(l.closed, l.failed, epoch == l.epoch && !l.fencing); err != nil {
		l.mu.Unlock()
		return engine.Pending{}, err
	}
	p, started, err := l.queue.Add(epoch, entries, o, l.opts.Now())
	full := l.queue.Bytes() >= l.opts.FlushBytes
	l.mu.Unlock()
	if started || full {
		// a new oldest group for the flush interval, or enough to flush
		engine.Wake(l.wake)
	}
	return p, err
}

// AppendTick queues a time tick from the writer of the given epoch (see
// engine.Engine): it is delivered after every entry queued before it, and
// writes nothing.
func (l *Log) AppendTick(epoch, t uint64) (engine.Pending, error) {
	l.mu.Lock()
	if err := engine.Refuse(l.closed, l.failed, epoch == l.epoch && !l.fencing); err != nil {
		l.mu.Unlock()
		return engine.Pending{}, err
	}
	p := l.queue.AddTick(epoch, t, l.opts.Now())
	l.mu.Unlock()
	engine.Wake(l.wake)
	return p, nil
}

// failQueued fails every queued group with err. The caller holds mu.
func (l *Log) failQueued(err error) { l.queue.Fail(err) }

// failLog makes every queued and later append fail with err until a new
// writer recovers the log. The caller holds mu.
func (l *Log) failLog(err error) {
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %w", engine.ErrNeedsWriter, err)
		l.opts.Logger.Error("log failed; a new writer recovers it", "prefix", l.opts.Prefix, "err", err)
	}
	l.failQueued(l.failed)
}

type stepKind int

const (
	stepWait stepKind = iota
	stepExit
	stepCreate
	stepSeal
	stepUpload
)

// flusher cuts queued groups into fragments and starts their uploads, and
// creates and seals segments as they fill, until the log is closed and its
// queue empty.
func (l *Log) flusher() {
	defer close(l.flushed)
	for {
		l.mu.Lock()
		kind, f := l.step()
		open := l.open
		l.busy = kind == stepCreate || kind == stepSeal
		l.mu.Unlock()
		switch kind {
		case stepExit:
			return
		case stepWait:
			<-l.wake
		case stepCreate:
			l.create()
			l.idle()
		case stepSeal:
			ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
			if err := l.seal(ctx, open); err != nil {
				l.mu.Lock()
				l.failQueued(err)
				l.mu.Unlock()
			}
			cancel()
			l.idle()
		case stepUpload:
			if f.seg != nil {
				f.join()
			}
			switch {
			case f.seg == nil:
				l.complete(f)
			case f.seg.stream != nil:
				f.seg.stream.Send(f.n, f.data, func(err error) { // in fragment order
					f.err = err
					l.complete(f)
					l.uploads.Done()
				})
			default:
				go l.upload(f)
			}
		}
	}
}

// idle ends a metadata call of the flusher, and wakes a Fence waiting for
// it: a create or seal of the old epoch must not land after Fence reloads.
func (l *Log) idle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.busy = false
	if l.fencing {
		close(l.advanced)
		l.advanced = make(chan struct{})
	}
}

// step decides the flusher's next move. The caller holds mu. For stepUpload
// it has cut the fragment and queued it in inflight, with l.uploads counted.
//
// An upload slot free cuts what is queued at once, however little: waiting
// for more would only add to the appends' latency. With every slot taken
// the queue fills meanwhile, and the next fragment takes up to FlushBytes of
// it, so a log at full load still uploads full fragments. A log thus makes
// at most MaxInFlight PUTs per PUT latency.
func (l *Log) step() (stepKind, *frag) {
	if l.queue.Len() == 0 {
		if l.closed {
			return stepExit, nil
		}
		return stepWait, nil
	}
	if l.fencing {
		return stepWait, nil
	}
	ticks := l.queue.Groups()[0].IsTick
	if !ticks {
		l.prepareRoll()
		if o := l.open; o != nil && o.frags > 0 && (l.mustRoll(o) || o.stream != nil && o.stream.Degraded()) {
			switched, wait := l.rollAhead()
			if !switched {
				if wait || len(l.inflight) > 0 || l.sealing != nil {
					return stepWait, nil
				}
				return stepSeal, nil
			}
		}
		if l.open == nil {
			return stepCreate, nil
		}
	}
	if len(l.inflight) >= l.opts.MaxInFlight {
		return stepWait, nil
	}
	if !ticks && l.owned != nil && !l.owned() {
		l.failLog(engine.NotOwned())
		return stepWait, nil
	}
	f := l.cut()
	l.inflight = append(l.inflight, f)
	if f.seg != nil {
		l.uploads.Add(1)
	}
	return stepUpload, f
}

// mustRoll reports whether the open segment o is full or old. The caller
// holds mu.
func (l *Log) mustRoll(o *seg) bool {
	return o.bytes+int64(l.queue.Bytes()) > l.opts.SegmentBytes ||
		o.frags >= l.opts.MaxFragments ||
		(l.opts.SegmentAge > 0 && l.opts.Now().Sub(o.m.Created) >= l.opts.SegmentAge)
}

// cut takes the leading ticks, or the queued groups up to the first that
// brings them to FlushBytes, gives them their offsets, and makes them a
// fragment. A fragment cut for its size thus holds FlushBytes and less than
// one group more. The caller holds mu; join makes the fragment's data once
// it is released.
func (l *Log) cut() *frag {
	f := &frag{epoch: l.epoch, base: l.next}
	queued := l.queue.Groups()
	n := 0
	if queued[0].IsTick {
		for n < len(queued) && queued[n].IsTick {
			queued[n].Base = l.next
			n++
		}
	} else {
		size := 0
		for n < len(queued) && size < l.opts.FlushBytes {
			if g := queued[n]; !g.IsTick {
				size += g.B.Bytes()
			}
			n++
		}
		f.seg, f.n = l.open, l.open.frags
		l.open.frags++
		for _, g := range queued[:n] {
			g.Base = l.next
			if g.IsTick {
				continue
			}
			l.next += uint64(g.B.Count())
			f.maxTime = max(f.maxTime, g.MaxTime)
		}
	}
	f.end = l.next
	f.groups = l.queue.Take(n)
	return f
}

// join makes the data of f, a fragment of entries that cut made: its
// groups' batches one after the other. Only the flusher touches f and its
// groups' buffers between cut and join, so join runs without mu.
func (f *frag) join() {
	batches := make([][]byte, 0, len(f.groups))
	for _, g := range f.groups {
		if !g.IsTick {
			batches = append(batches, g.B.FinishUnsummed(g.Base, g.Epoch))
			f.saved += int64(g.B.Bytes() - len(batches[len(batches)-1]))
		}
	}
	// Join copies them into a buffer it does not zero first; each batch is
	// summed in the copy, which the copy has brought into the cache.
	f.data = bytes.Join(batches, nil)
	at := 0
	for _, b := range batches {
		record.PutCRC(f.data[at : at+len(b)])
		at += len(b)
	}
	for _, g := range f.groups {
		g.Release()
	}
}

// create starts a segment for the current epoch at the next offset.
func (l *Log) create() {
	l.mu.Lock()
	m := meta.Segment{Seq: 1, Epoch: l.epoch, Base: l.next, Created: l.opts.Now()}
	if n := len(l.segs); n > 0 {
		m.Seq = l.segs[n-1].m.Seq + 1
	}
	l.mu.Unlock()
	var st Stream
	if p := l.opts.Placement; p != nil {
		var err error
		if st, err = p.Start(&m, func() { engine.Wake(l.wake) }); err != nil {
			l.mu.Lock()
			l.failQueued(err)
			l.mu.Unlock()
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
	defer cancel()
	err := l.opts.Meta.CreateSegment(ctx, m)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case m.Epoch != l.epoch:
		// Fenced meanwhile: Fence reloads the segments.
	case errors.Is(err, meta.ErrStaleEpoch):
		l.failLog(fmt.Errorf("%w: epoch %d of %s is no longer the newest", rpcerr.ErrFenced, m.Epoch, l.opts.Prefix))
	case err != nil:
		l.failQueued(fmt.Errorf("objlog: start segment %d of %s: %w", m.Seq, l.opts.Prefix, err))
	default:
		s := &seg{m: m, end: m.Base, stream: st}
		l.segs = append(l.segs, s)
		l.open = s
		return
	}
	if st != nil {
		go st.Close()
	}
}

// takeStream detaches the stream of segment s, if it has one, for the
// caller to close.
func (l *Log) takeStream(s *seg) Stream {
	if s == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := s.stream
	s.stream = nil
	return st
}

// seal records the open segment s, whose uploads have all completed, as
// sealed in metadata.
func (l *Log) seal(ctx context.Context, s *seg) error {
	l.mu.Lock()
	m := s.sealedMeta()
	l.mu.Unlock()
	stored, err := l.opts.Meta.SealSegment(ctx, m)
	if err != nil {
		return fmt.Errorf("objlog: seal segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == s {
		l.open = nil
	}
	if st := s.stream; st != nil {
		s.stream = nil
		go st.Close()
	}
	if stored.End != m.End || len(stored.Objects) != len(m.Objects) {
		// A newer writer fenced and sealed the segment first.
		err := fmt.Errorf("%w: segment %d of %s was sealed by a newer writer", rpcerr.ErrFenced, m.Seq, l.opts.Prefix)
		l.failLog(err)
		return err
	}
	s.m = stored
	if len(stored.Ensemble) > 0 {
		l.offloadSoon()
	}
	return nil
}

// upload stores f's fragment and completes it.
func (l *Log) upload(f *frag) {
	defer l.uploads.Done()
	f.err = l.put(l.segPrefix(f.seg.m.Seq)+fragKey(f.n), f.data)
	l.complete(f)
}

// put stores data at key with a conditional PUT, retrying failures for up
// to RetryTimeout. An object found at key counts as stored only if it holds
// data: then an earlier attempt stored it and its response was lost.
func (l *Log) put(key string, data []byte) error {
	deadline := time.Now().Add(l.opts.RetryTimeout)
	backoff := 10 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.RetryTimeout)
		err := l.opts.Bucket.PutIfAbsent(ctx, key, data)
		if errors.Is(err, blob.ErrExist) {
			var got []byte
			if got, err = l.opts.Bucket.Get(ctx, key); err == nil {
				cancel()
				if bytes.Equal(got, data) {
					return nil
				}
				return fmt.Errorf("%w: %s holds a newer writer's fence or data", rpcerr.ErrFenced, key)
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("objlog: storing %s failed for %v (last error: %w); the appends in it may or may not have been stored", key, l.opts.RetryTimeout, err)
		}
		l.opts.Logger.Warn("object upload failed; retrying", "key", key, "err", err, "in", backoff)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// complete records that f's upload ended, and acknowledges (or fails) the
// fragments at the head of inflight whose outcome is known, in order.
func (l *Log) complete(f *frag) {
	l.mu.Lock()
	f.done = true
	for len(l.inflight) > 0 && l.inflight[0].done {
		h := l.inflight[0]
		l.inflight[0] = nil
		l.inflight = l.inflight[1:]
		err := h.err
		switch {
		case err != nil:
		case l.failed != nil:
			err = l.failed
		case h.epoch != l.epoch || (h.seg != nil && l.owned != nil && !l.owned()):
			err = fmt.Errorf("%w: the writer can no longer prove it owns the log; the appends of %s may or may not have been stored", rpcerr.ErrFenced, l.opts.Prefix)
		}
		if err != nil {
			l.failLog(err)
			for _, g := range h.groups {
				g.Finish(err)
			}
			continue
		}
		l.publish(h)
	}
	close(l.advanced)
	l.advanced = make(chan struct{})
	l.mu.Unlock()
	engine.Wake(l.wake)
}

// publish makes an uploaded fragment readable and acknowledges its appends.
// The caller holds mu.
func (l *Log) publish(f *frag) {
	if f.seg != nil {
		s := f.seg
		s.objs = append(s.objs, object{key: fragKey(f.n), base: f.base, end: f.end, bytes: int64(len(f.data))})
		s.end = f.end
		s.bytes += int64(len(f.data))
		s.saved += f.saved
		s.maxTime = max(s.maxTime, f.maxTime)
		l.end = f.end
		l.cache = append(l.cache, cached{base: f.base, end: f.end, data: f.data})
		l.cacheBytes += int64(len(f.data))
		l.opts.SharedCache.add(int64(len(f.data)))
		for len(l.cache) > 1 && (l.cacheBytes > l.opts.CacheBytes || l.opts.SharedCache.over()) {
			n := int64(len(l.cache[0].data))
			l.cacheBytes -= n
			l.opts.SharedCache.add(-n)
			l.cache[0] = cached{}
			l.cache = l.cache[1:]
		}
	}
	for _, g := range f.groups {
		if g.IsTick {
			l.readers.Tick(engine.Tick{Time: g.Tick, Offset: g.Base})
		}
		g.Finish(nil)
	}
}
