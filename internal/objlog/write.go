package objlog

import (
	"bytes"
	"context"
	"encoding/binary"
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
	base    uint64
	end     uint64
	maxTime int64
	done    bool
	err     error
}

// Append queues entries, written by the writer of the given epoch, to be
// uploaded together in one batch, and returns at once.
func (l *Log) Append(epoch uint64, entries []record.Entry) (engine.Pending, error) {
	l.mu.Lock()
	if err := engine.Refuse(l.closed, l.failed, epoch == l.epoch && !l.fencing); err != nil {
		l.mu.Unlock()
		return engine.Pending{}, err
	}
	p, started, err := l.queue.Add(epoch, entries, l.opts.Now())
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
		l.failed = err
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
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		l.mu.Lock()
		kind, f, wait := l.step()
		open := l.open
		l.busy = kind == stepCreate || kind == stepSeal
		l.mu.Unlock()
		switch kind {
		case stepExit:
			return
		case stepWait:
			if wait > 0 {
				timer.Reset(wait)
			}
			select {
			case <-l.wake:
			case <-timer.C:
			}
			timer.Stop()
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
func (l *Log) step() (stepKind, *frag, time.Duration) {
	if l.queue.Len() == 0 {
		if l.closed {
			return stepExit, nil, 0
		}
		return stepWait, nil, 0
	}
	if l.fencing {
		return stepWait, nil, 0
	}
	ticks := l.queue.Groups()[0].IsTick
	if !ticks {
		if o := l.open; o != nil && o.frags > 0 && (l.mustRoll(o) || o.stream != nil && o.stream.Degraded()) {
			if len(l.inflight) > 0 {
				return stepWait, nil, 0
			}
			return stepSeal, nil, 0
		}
		if l.open == nil {
			return stepCreate, nil, 0
		}
	}
	if !ticks && !l.closed && l.queue.Bytes() < l.opts.FlushBytes {
		if wait := l.opts.FlushInterval - l.opts.Now().Sub(l.queue.Groups()[0].Queued); wait > 0 {
			return stepWait, nil, wait
		}
	}
	if len(l.inflight) >= l.opts.MaxInFlight {
		return stepWait, nil, 0
	}
	if !ticks && l.owned != nil && !l.owned() {
		l.failLog(engine.NotOwned())
		return stepWait, nil, 0
	}
	f := l.cut()
	l.inflight = append(l.inflight, f)
	if f.seg != nil {
		l.uploads.Add(1)
	}
	return stepUpload, f, 0
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
		s.maxTime = max(s.maxTime, f.maxTime)
		l.end = f.end
		l.cache = append(l.cache, cached{base: f.base, end: f.end, data: f.data})
		l.cacheBytes += int64(len(f.data))
		for len(l.cache) > 1 && l.cacheBytes > l.opts.CacheBytes {
			l.cacheBytes -= int64(len(l.cache[0].data))
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

// Fence makes epoch the log's writer epoch; the caller has stored it durably
// first. It waits for the uploads in flight (their appends are acknowledged
// under the old epoch), fails the queued ones with ErrFenced, then fences
// the open segment left by any earlier writer, here or in another process,
// and seals it. When Fence returns no append of an older epoch will be
// acknowledged, and a log that had failed works again.
//
// owned, if not nil, is asked before every upload and acknowledgement
// whether the writer can still prove it holds epoch. It must be cheap.
func (l *Log) Fence(ctx context.Context, epoch uint64, owned func() bool) error {
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return rpcerr.ErrClosed
	case epoch <= l.epoch:
		cur := l.epoch
		l.mu.Unlock()
		return fmt.Errorf("objlog: fence with epoch %d, which is not above the current %d", epoch, cur)
	case l.fencing:
		l.mu.Unlock()
		return fmt.Errorf("objlog: another writer of %s is being opened; retry", l.opts.Prefix)
	}
	l.fencing = true
	l.failQueued(rpcerr.ErrFenced)
	for len(l.inflight) > 0 || l.busy {
		advanced := l.advanced
		l.mu.Unlock()
		<-advanced
		l.mu.Lock()
	}
	l.epoch, l.owned = epoch, owned
	var st Stream
	if l.open != nil {
		st, l.open.stream = l.open.stream, nil
	}
	l.mu.Unlock()
	if st != nil {
		st.Close() // the recovery below fences its placement
	}

	// The flusher is idle now (fencing, nothing queued or in flight, no
	// metadata call under way) and starts nothing until fencing ends.
	err := l.load(ctx, true)
	l.mu.Lock()
	l.fencing = false
	l.failed = nil
	if err != nil {
		l.failed = fmt.Errorf("objlog: recovering %s for writer epoch %d: %w", l.opts.Prefix, epoch, err)
	}
	close(l.advanced)
	l.advanced = make(chan struct{})
	l.mu.Unlock()
	engine.Wake(l.wake)
	return err
}

// fenceSize is the size of a fence object: "TRNFENCE" and the epoch that
// stored it. A fragment is never this small (a batch header alone is 48
// bytes), so a listing tells them apart.
const fenceSize = 16

func fenceObject(epoch uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte("TRNFENCE"), epoch)
}

// fenceSegment fences the open segment m, at the first fragment number with
// no object, and seals it in metadata with the fragments before the fence.
// It returns the segment as stored.
func (l *Log) fenceSegment(ctx context.Context, m meta.Segment) (meta.Segment, error) {
	for {
		s, fenced, err := l.scan(ctx, m, l.opts.Bucket)
		if err != nil {
			return meta.Segment{}, err
		}
		if !fenced {
			key := l.segPrefix(m.Seq) + fragKey(s.frags)
			err := l.opts.Bucket.PutIfAbsent(ctx, key, fenceObject(l.epochNow()))
			if errors.Is(err, blob.ErrExist) {
				continue // a fragment got there first: the segment is longer
			}
			if err != nil {
				return meta.Segment{}, fmt.Errorf("objlog: fence segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
			}
		}
		stored, err := l.opts.Meta.SealSegment(ctx, s.sealedMeta())
		if err != nil {
			return meta.Segment{}, fmt.Errorf("objlog: seal segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
		}
		return stored, nil
	}
}

func (l *Log) epochNow() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// Lister is what scan reads an open segment from: the bucket, or where a
// Placement keeps the segment.
type Lister interface {
	List(ctx context.Context, prefix string) ([]blob.Info, error)
	GetRange(ctx context.Context, key string, off int64, p []byte) (int, error)
	Get(ctx context.Context, key string) ([]byte, error)
}

// scan lists the open segment m's objects in src and reads the fragments'
// headers (the last one whole, for where it ends). It reports whether a
// fence ends the fragments.
func (l *Log) scan(ctx context.Context, m meta.Segment, src Lister) (*seg, bool, error) {
	prefix := l.segPrefix(m.Seq)
	infos, err := src.List(ctx, prefix)
	if err != nil {
		return nil, false, fmt.Errorf("objlog: list segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
	}
	sizes := map[string]int64{}
	for _, in := range infos {
		sizes[in.Key[len(prefix):]] = in.Size
	}
	s := &seg{m: m, end: m.Base}
	fenced := false
	for {
		size, ok := sizes[fragKey(s.frags)]
		if !ok {
			break
		}
		if size == fenceSize {
			fenced = true
			break
		}
		s.objs = append(s.objs, object{key: fragKey(s.frags), bytes: size})
		s.frags++
	}
	if len(s.objs) == 0 {
		return s, fenced, nil
	}
	// Each fragment's first offset, from its first batch header.
	err = parallel(len(s.objs), 16, func(i int) error {
		var h [record.HeaderBytes]byte
		key := prefix + s.objs[i].key
		if _, err := src.GetRange(ctx, key, 0, h[:]); err != nil {
			return fmt.Errorf("objlog: read %s: %w", key, err)
		}
		hd, err := record.ParseHeader(h[:])
		if err != nil {
			return &rpcerr.CorruptError{Path: key, Pos: 0, Err: err}
		}
		s.objs[i].base = hd.BaseOffset
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	// Where the last fragment ends, and its newest entry.
	last := &s.objs[len(s.objs)-1]
	data, err := src.Get(ctx, prefix+last.key)
	if err != nil {
		return nil, false, fmt.Errorf("objlog: read %s: %w", prefix+last.key, err)
	}
	end, maxTime, err := scanBatches(prefix+last.key, data, last.base)
	if err != nil {
		return nil, false, err
	}
	for i := range s.objs {
		if i+1 < len(s.objs) {
			s.objs[i].end = s.objs[i+1].base
		} else {
			s.objs[i].end = end
		}
		s.bytes += s.objs[i].bytes
	}
	// The first offsets come from headers whose CRC has not been checked:
	// out of order, one of them is damaged.
	if s.objs[0].base != m.Base {
		return nil, false, &rpcerr.CorruptError{Path: prefix + s.objs[0].key, Pos: 0,
			Err: fmt.Errorf("%w: segment %d starts at offset %d, its first fragment at %d", record.ErrCorrupt, m.Seq, m.Base, s.objs[0].base)}
	}
	for i := range s.objs {
		if s.objs[i].end <= s.objs[i].base {
			return nil, false, misordered(ctx, src, prefix, s.objs[i:min(i+2, len(s.objs))])
		}
	}
	s.end, s.maxTime = end, maxTime
	return s, fenced, nil
}

// misordered reports that the first offsets of objs, consecutive fragments,
// are out of order: the fragment whose first batch fails its checks has the
// damaged header.
func misordered(ctx context.Context, src Lister, prefix string, objs []object) error {
	for _, o := range objs {
		data, err := src.Get(ctx, prefix+o.key)
		if err != nil {
			return fmt.Errorf("objlog: read %s: %w", prefix+o.key, err)
		}
		if _, err := record.Decode(data); err != nil {
			return &rpcerr.CorruptError{Path: prefix + o.key, Pos: 0, Err: err}
		}
	}
	return &rpcerr.CorruptError{Path: prefix + objs[0].key, Pos: 0,
		Err: fmt.Errorf("%w: fragments out of order: the next starts at offset %d, this one at %d", record.ErrCorrupt, objs[0].end, objs[0].base)}
}

// scanBatches checks the batches filling data, the object key, whose
// offsets must run densely from base, and returns the offset after the last
// one and the newest entry time. Damage is a *rpcerr.CorruptError.
func scanBatches(key string, data []byte, base uint64) (end uint64, maxTime int64, err error) {
	end = base
	for pos := int64(0); len(data) > 0; {
		b, err := record.Decode(data)
		if err != nil {
			return 0, 0, &rpcerr.CorruptError{Path: key, Pos: pos, Err: err}
		}
		if b.BaseOffset != end {
			return 0, 0, &rpcerr.CorruptError{Path: key, Pos: pos,
				Err: fmt.Errorf("%w: batch has offset %d, expected %d", record.ErrCorrupt, b.BaseOffset, end)}
		}
		err = b.Each(func(_ uint64, e record.Entry) error {
			maxTime = max(maxTime, e.Time)
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
		end = b.NextOffset()
		data = data[b.Header.Length:]
		pos += int64(b.Header.Length)
	}
	return end, maxTime, nil
}
