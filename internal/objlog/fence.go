package objlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
)

// Fence makes epoch the log's writer epoch; the caller has stored it durably
// first. It waits for the uploads in flight (their appends are acknowledged
// under the old epoch), fails the queued ones with ErrFenced, then fences
// the open segment left by any earlier writer, here or in another process,
// and seals it. When Fence returns no append of an older epoch will be
// acknowledged, and a log that had failed works again. A Close that runs
// meanwhile makes it fail with rpcerr.ErrClosed.
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
	for len(l.inflight) > 0 || l.busy || l.bg > 0 {
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
	// metadata call under way, its own or roll.go's goroutines') and starts
	// nothing until fencing ends.
	before := l.Stats().End
	err := l.load(ctx, true)
	if err != nil || l.Stats().End != before {
		// A writer elsewhere appended: what was read back is stale.
		l.dedupLoad.Forget(func() {
			l.mu.Lock()
			l.queue.Dedup.Reset()
			l.mu.Unlock()
		})
	}
	l.mu.Lock()
	l.fencing = false
	if l.closed {
		// Close ran meanwhile (the log was given up): it wakes the readers,
		// closing advanced for good, and the log takes no writer.
		l.mu.Unlock()
		return errors.Join(rpcerr.ErrClosed, err)
	}
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
	// Only the last fragment is read whole: the compressed batches of the
	// others count as stored (docs/durability.md).
	end, maxTime, saved, err := scanBatches(prefix+last.key, data, last.base)
	if err != nil {
		return nil, false, err
	}
	s.saved = saved
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
// one, the newest entry time and the bytes compression saved in them.
// Damage is a *rpcerr.CorruptError.
func scanBatches(key string, data []byte, base uint64) (end uint64, maxTime, saved int64, err error) {
	end = base
	for pos := int64(0); len(data) > 0; {
		b, err := record.Decode(data)
		if err != nil {
			return 0, 0, 0, &rpcerr.CorruptError{Path: key, Pos: pos, Err: err}
		}
		if b.BaseOffset != end {
			return 0, 0, 0, &rpcerr.CorruptError{Path: key, Pos: pos,
				Err: fmt.Errorf("%w: batch has offset %d, expected %d", record.ErrCorrupt, b.BaseOffset, end)}
		}
		saved += b.Header.LogicalBytes() - int64(b.Header.Length)
		err = b.Each(func(_ uint64, e record.Entry) error {
			maxTime = max(maxTime, e.Time)
			return nil
		})
		if err != nil {
			return 0, 0, 0, err
		}
		end = b.NextOffset()
		data = data[b.Header.Length:]
		pos += int64(b.Header.Length)
	}
	return end, maxTime, saved, nil
}
