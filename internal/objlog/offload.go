package objlog

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// offloader moves the sealed quorum segments to the bucket, one at a time,
// oldest first, until the log closes. A segment that fails is tried again
// later.
func (l *Log) offloader() {
	defer close(l.offloaded)
	backoff := time.Second
	for {
		select {
		case <-l.offloadCtx.Done():
			return
		case <-l.offloadWake:
		case <-time.After(backoff):
		}
		if _, err := l.Offload(l.offloadCtx); err != nil {
			if l.offloadCtx.Err() == nil {
				l.opts.Logger.Warn("offload failed; retrying", "prefix", l.opts.Prefix, "err", err, "in", backoff)
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Minute
	}
}

// Offload moves every sealed quorum segment to the bucket now, oldest
// first, and reports how many it moved. The log does it by itself after
// each seal; Offload is for tests and tools that want it done.
func (l *Log) Offload(ctx context.Context) (int, error) {
	l.gcMu.Lock() // no truncation deletes a segment under it
	defer l.gcMu.Unlock()
	// Another process (an earlier owner) may have offloaded a segment: its
	// replicas have dropped it.
	if err := l.refreshOffloaded(ctx); err != nil {
		return 0, err
	}
	done := 0
	for {
		l.mu.Lock()
		i := slices.IndexFunc(l.segs, func(s *seg) bool { return s.sealed() && len(s.m.Ensemble) > 0 })
		var s *seg
		if i >= 0 {
			s = l.segs[i]
		}
		l.mu.Unlock()
		if s == nil {
			return done, nil
		}
		if err := l.offload(ctx, s); err != nil {
			return done, err
		}
		done++
	}
}

func (l *Log) offloadSoon() {
	select {
	case l.offloadWake <- struct{}{}:
	default:
	}
}

// offload has the Placement move the sealed segment s to the bucket, in
// objects of about CompactBytes, records them in metadata, which clears the
// ensemble, and has the Placement drop its copies. The caller holds gcMu.
func (l *Log) offload(ctx context.Context, s *seg) error {
	l.mu.Lock()
	m := s.m
	objs := slices.Clone(s.objs)
	l.mu.Unlock()
	if len(m.Ensemble) == 0 {
		return nil // deleted or offloaded meanwhile
	}
	if l.opts.Placement == nil {
		return errUnplaced(l.opts.Prefix, m.Seq)
	}
	count := uint64(len(objs))
	if count == 0 {
		// Sealed empty: nothing to move, and replicas that never got a
		// fragment may not know the segment.
		return l.recordOffload(ctx, m, nil)
	}
	var out []meta.SegmentObject
	var plan []Span
	for _, r := range runs(objs, l.opts.CompactBytes) {
		key := "c" + objs[r.from].key
		plan = append(plan, Span{Key: l.segPrefix(m.Seq) + key, From: uint64(r.from), To: uint64(r.to)})
		out = append(out, meta.SegmentObject{Key: key, Base: objs[r.from].base, Bytes: r.bytes})
	}
	if err := l.opts.Placement.Move(ctx, m, count, plan); err != nil {
		return fmt.Errorf("objlog: offload segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
	}
	return l.recordOffload(ctx, m, out)
}

// recordOffload records that segment m is in the bucket as out, and
// has its replicas drop their copies.
func (l *Log) recordOffload(ctx context.Context, m meta.Segment, out []meta.SegmentObject) error {
	if err := l.opts.Meta.ReplaceObjects(ctx, m.Seq, m.Objects, out); err != nil {
		return fmt.Errorf("objlog: offload segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
	}
	l.setObjects(m.Seq, out)
	l.opts.Placement.Drop(ctx, m)
	return nil
}

// refreshOffloaded reloads from metadata the sealed quorum segments that
// the log still believes are on their replicas: another process (an
// earlier owner) may have offloaded them, and the replicas dropped them.
func (l *Log) refreshOffloaded(ctx context.Context) error {
	l.mu.Lock()
	stale := slices.ContainsFunc(l.segs, func(s *seg) bool { return s.sealed() && len(s.m.Ensemble) > 0 })
	l.mu.Unlock()
	if !stale {
		return nil
	}
	ms, err := l.opts.Meta.Segments(ctx)
	if err != nil {
		return fmt.Errorf("objlog: read the segments of %s: %w", l.opts.Prefix, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		if !s.sealed() || len(s.m.Ensemble) == 0 {
			continue
		}
		i := slices.IndexFunc(ms, func(m meta.Segment) bool { return m.Seq == s.m.Seq })
		if i >= 0 && ms[i].Sealed && len(ms[i].Ensemble) == 0 {
			fresh := sealedSeg(ms[i])
			s.m, s.objs, s.bytes = fresh.m, fresh.objs, fresh.bytes
		}
	}
	return nil
}
