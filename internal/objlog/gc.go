package objlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
)

// Truncate is engine.Engine's. A segment goes as its objects, then its
// metadata.
func (l *Log) Truncate(before uint64) error {
	return engine.Truncate(&l.mu, &l.start, &l.end, before, l.ApplyRetention)
}

// ApplyRetention is engine.Engine's. A segment whose deletion fails stays
// in metadata, below the start, and the next pass deletes it.
func (l *Log) ApplyRetention(now time.Time, r engine.Retention) error {
	l.gcMu.Lock()
	defer l.gcMu.Unlock()
	l.mu.Lock()
	segs := make([]engine.Segment, len(l.segs))
	for i, s := range l.segs {
		segs[i] = engine.Segment{End: s.end, Bytes: s.bytes, MaxTime: s.maxTime, Sealed: s.sealed()}
	}
	n, start := r.Expired(now, l.start, l.end, segs)
	drop := l.segs[:n:n]
	l.segs = l.segs[n:]
	l.start = start
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*metaTimeout)
	defer cancel()
	for i, s := range drop {
		if err := l.deleteSegment(ctx, s.m); err != nil {
			// Keep what is left in the list, below the start, so that
			// the next pass deletes it.
			l.mu.Lock()
			l.segs = append(drop[i:], l.segs...)
			l.mu.Unlock()
			return err
		}
	}
	return nil
}

// deleteSegment deletes every object under segment m's prefix, and the
// replicas' copies of a quorum segment not yet offloaded, then its
// metadata.
func (l *Log) deleteSegment(ctx context.Context, m meta.Segment) error {
	if err := DeleteAll(ctx, l.opts.Bucket, l.segPrefix(m.Seq)); err != nil {
		return err
	}
	if len(m.Ensemble) > 0 && l.opts.Placement != nil {
		l.opts.Placement.Drop(ctx, m)
	}
	if err := l.opts.Meta.DeleteSegment(ctx, m.Seq); err != nil {
		return fmt.Errorf("objlog: delete segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
	}
	return nil
}

// DeleteAll deletes every object whose key starts with prefix.
func DeleteAll(ctx context.Context, b blob.Bucket, prefix string) error {
	return deleteUnder(ctx, b, prefix, nil)
}

// deleteUnder deletes every object whose key starts with prefix and is not
// in keep.
func deleteUnder(ctx context.Context, b blob.Bucket, prefix string, keep map[string]bool) error {
	infos, err := b.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("objlog: list %s: %w", prefix, err)
	}
	for _, in := range infos {
		if keep[in.Key] {
			continue
		}
		if err := b.Delete(ctx, in.Key); err != nil {
			return fmt.Errorf("objlog: delete %s: %w", in.Key, err)
		}
	}
	return nil
}

// Compact rewrites the fragments of every sealed segment into objects of
// about CompactBytes, records them in metadata, then deletes the fragments,
// the fence and whatever else lies under the segment's prefix. Readers that
// were reading a deleted fragment look their offset up again. It reports
// how many segments it compacted.
//
// A fragment that fails its checks is never copied: its segment is left as
// it is, the others are compacted, and the error (a *rpcerr.CorruptError)
// is returned once they are done.
func (l *Log) Compact(ctx context.Context) (int, error) {
	l.gcMu.Lock()
	defer l.gcMu.Unlock()
	l.mu.Lock()
	var todo []*seg
	for _, s := range l.segs {
		if s.sealed() && needsCompaction(s) {
			todo = append(todo, s)
		}
	}
	l.mu.Unlock()
	done := 0
	var damaged []error
	for _, s := range todo {
		err := l.compact(ctx, s)
		switch {
		case errors.Is(err, rpcerr.ErrCorrupt):
			damaged = append(damaged, err)
		case err != nil:
			return done, err
		default:
			done++
		}
	}
	return done, errors.Join(damaged...)
}

// needsCompaction reports whether a sealed segment is in more than one
// fragment. Compacted objects have keys that start with "c". A quorum
// segment's offload compacts it.
func needsCompaction(s *seg) bool {
	return len(s.objs) > 1 && !strings.HasPrefix(s.objs[0].key, "c") && len(s.m.Ensemble) == 0
}

func (l *Log) compact(ctx context.Context, s *seg) error {
	prefix := l.segPrefix(s.m.Seq)
	l.mu.Lock()
	objs := append([]object(nil), s.objs...)
	old := s.m.Objects
	l.mu.Unlock()

	var out []meta.SegmentObject
	for _, r := range runs(objs, l.opts.CompactBytes) {
		i, j, size := r.from, r.to, r.bytes
		parts, err := l.getAll(ctx, prefix, objs[i:j])
		if err != nil {
			return fmt.Errorf("objlog: compact segment %d of %s: %w", s.m.Seq, l.opts.Prefix, err)
		}
		// A compacted object replaces its fragments: damage copied into
		// it would outlive the copies a person could still repair from.
		for k, part := range parts {
			if err := checkObject(prefix+objs[i+k].key, objs[i+k], part); err != nil {
				return fmt.Errorf("objlog: compact segment %d of %s: %w", s.m.Seq, l.opts.Prefix, err)
			}
		}
		data := bytes.Join(parts, nil)
		key := "c" + objs[i].key
		err = l.opts.Bucket.PutIfAbsent(ctx, prefix+key, data)
		if errors.Is(err, blob.ErrExist) {
			// An earlier pass stored it and stopped before recording it.
			got, gerr := l.opts.Bucket.Get(ctx, prefix+key)
			if gerr != nil {
				err = gerr
			} else if bytes.Equal(got, data) {
				err = nil
			}
		}
		if err != nil {
			return fmt.Errorf("objlog: compact segment %d of %s: write %s: %w", s.m.Seq, l.opts.Prefix, key, err)
		}
		out = append(out, meta.SegmentObject{Key: key, Base: objs[i].base, Bytes: size})
	}
	if err := l.opts.Meta.ReplaceObjects(ctx, s.m.Seq, old, out); err != nil {
		return fmt.Errorf("objlog: compact segment %d of %s: %w", s.m.Seq, l.opts.Prefix, err)
	}
	l.setObjects(s.m.Seq, out)

	keep := map[string]bool{}
	for _, o := range out {
		keep[prefix+o.Key] = true
	}
	if err := deleteUnder(ctx, l.opts.Bucket, prefix, keep); err != nil {
		return fmt.Errorf("objlog: compact segment %d of %s: %w", s.m.Seq, l.opts.Prefix, err)
	}
	return nil
}

// checkObject checks that data, the object at key, is o as metadata records
// it: its size, and valid batches filling it whose offsets run densely from
// o.base to o.end. Damage is a *rpcerr.CorruptError.
func checkObject(key string, o object, data []byte) error {
	if int64(len(data)) != o.bytes {
		return &rpcerr.CorruptError{Path: key, Pos: int64(len(data)),
			Err: fmt.Errorf("%w: the object holds %d bytes, its segment records %d", record.ErrCorrupt, len(data), o.bytes)}
	}
	end, _, _, err := scanBatches(key, data, o.base)
	if err != nil {
		return err
	}
	if end != o.end {
		return &rpcerr.CorruptError{Path: key, Pos: int64(len(data)),
			Err: fmt.Errorf("%w: the object's batches end at offset %d, its segment records %d", record.ErrCorrupt, end, o.end)}
	}
	return nil
}

// setObjects records that sealed segment seq is in the bucket as objs, and
// on no replicas, once metadata says so. It changes the segment that the
// log holds now: a Fence reloads the segments while gcMu is held by the
// caller, and the one the caller looked up before its metadata call may
// have been replaced. Left as it was, the reloaded one would keep the
// objects the caller goes on to delete.
func (l *Log) setObjects(seq uint64, objs []meta.SegmentObject) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.segs, func(s *seg) bool { return s.m.Seq == seq })
	if i < 0 {
		return // truncated meanwhile
	}
	s := l.segs[i]
	m := s.m
	m.Objects, m.Ensemble, m.AckQuorum, m.Bytes = objs, nil, 0, 0
	for _, o := range objs {
		m.Bytes += o.Bytes
	}
	fresh := sealedSeg(m)
	s.m, s.objs, s.bytes = fresh.m, fresh.objs, fresh.bytes
}

// run is objects [from, to) of a segment, bytes in all, that compaction
// writes as one.
type run struct {
	from, to int
	bytes    int64
}

// runs cuts objs into runs of at most limit bytes, or of one object larger
// than that.
func runs(objs []object, limit int64) []run {
	var rs []run
	for i := 0; i < len(objs); {
		j, size := i, int64(0)
		for j < len(objs) && (j == i || size+objs[j].bytes <= limit) {
			size += objs[j].bytes
			j++
		}
		rs = append(rs, run{i, j, size})
		i = j
	}
	return rs
}

// getAll reads the objects, ReadAhead at a time, and returns their bytes in
// order.
func (l *Log) getAll(ctx context.Context, prefix string, objs []object) ([][]byte, error) {
	parts := make([][]byte, len(objs))
	err := parallel(len(objs), l.opts.ReadAhead, func(i int) (err error) {
		if parts[i], err = l.opts.Bucket.Get(ctx, prefix+objs[i].key); err != nil {
			return fmt.Errorf("read %s: %w", objs[i].key, err)
		}
		return nil
	})
	return parts, err
}

// NeedsCompaction reports, from a log's segment metadata alone, whether
// Compact would rewrite any of its sealed segments: a caller can decide
// whether to open the log at all.
func NeedsCompaction(ms []meta.Segment) bool {
	for _, m := range ms {
		if m.Sealed && needsCompaction(sealedSeg(m)) {
			return true
		}
	}
	return false
}
