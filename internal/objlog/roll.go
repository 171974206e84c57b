package objlog

// A roll off the appends' path, for logs without a Placement: the segment
// after the open one is created ahead, pending (meta.Segment.Pending: its
// Base is not known yet), once the open one is 3/4 of the way to a roll.
// At the roll the flusher cuts the next fragments into it at once, and a
// goroutine seals the rolled segment once its own uploads have completed:
// that seal gives the pending segment its Base in metadata, in the same
// atomic step. Acknowledgements stay in offset order and wait for no seal.
// Without a spare ready at the roll, or after any failure, the flusher
// rolls as before: it waits for the uploads, seals, then creates.
//
// Both goroutines count in bg, which Fence waits for as it waits for the
// flusher's own metadata calls (busy): a create or seal of an old epoch
// never lands after Fence reloads the segments.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
)

// nearRoll reports whether the open segment o is 3/4 of the way to one of
// mustRoll's limits. The caller holds mu.
func (l *Log) nearRoll(o *seg) bool {
	return 4*o.bytes >= 3*l.opts.SegmentBytes ||
		4*o.frags >= 3*l.opts.MaxFragments ||
		(l.opts.SegmentAge > 0 && 4*l.opts.Now().Sub(o.m.Created) >= 3*l.opts.SegmentAge)
}

// prepareRoll starts creating the spare segment, pending, after the open
// one, if it is time and nothing stands in the way. The caller holds mu.
func (l *Log) prepareRoll() {
	o := l.open
	if l.opts.Placement != nil || o == nil || o.m.Pending || o.ahead || l.spare != nil || l.creating ||
		l.sealing != nil || l.failed != nil || l.fencing || l.closed || !l.nearRoll(o) {
		return
	}
	o.ahead = true // once: a failed create is not retried for this segment
	m := meta.Segment{Seq: o.m.Seq + 1, Epoch: l.epoch, Created: l.opts.Now(), Pending: true}
	l.creating = true
	l.bgStart()
	go l.createSpare(m)
}

// createSpare creates the pending segment m in metadata and makes it the
// spare. A failure leaves no spare: the roll falls back to sealing first.
func (l *Log) createSpare(m meta.Segment) {
	ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
	err := l.opts.Meta.CreateSegment(ctx, m)
	cancel()
	if err != nil && !errors.Is(err, meta.ErrPending) && !errors.Is(err, meta.ErrSegmentExist) && !errors.Is(err, meta.ErrStaleEpoch) {
		// It may have been stored all the same: the roll's own create
		// would then find it in the way.
		ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
		if derr := l.opts.Meta.DeleteSegment(ctx, m.Seq); derr != nil {
			l.mu.Lock()
			l.failLog(fmt.Errorf("objlog: creating segment %d of %s ahead failed (%w) and deleting it too: %w", m.Seq, l.opts.Prefix, err, derr))
			l.mu.Unlock()
		}
		cancel()
	}
	l.mu.Lock()
	l.creating = false
	if err == nil {
		// Kept even if the log failed meanwhile: Close deletes it, and a
		// Fence reloads the segments, the pending one included.
		l.spare = &seg{m: m}
	} else {
		l.opts.Logger.Warn("creating the next segment ahead failed; the roll seals first", "prefix", l.opts.Prefix, "seq", m.Seq, "err", err)
	}
	l.bgEnd()
	l.mu.Unlock()
	engine.Wake(l.wake)
}

// rollAhead switches the flusher from the open segment, which must roll,
// to the spare, and starts sealing the open one behind it. It reports
// whether it did; if not, the flusher waits while the spare is being
// created and otherwise rolls the old way. The caller holds mu.
func (l *Log) rollAhead() (switched, wait bool) {
	o, sp := l.open, l.spare
	if sp == nil || l.sealing != nil || l.failed != nil || sp.m.Epoch != l.epoch {
		return false, l.creating
	}
	sp.m.Base, sp.end = l.next, l.next // as N's seal will store it
	// Its age counts from its first fragment, as if it were created now;
	// its seal stores this time.
	sp.m.Created = l.opts.Now()
	l.segs = append(l.segs, sp)
	l.open, l.spare, l.sealing = sp, nil, o
	l.bgStart()
	go l.sealBehind(o, sp)
	return true, false
}

// sealBehind waits for the uploads of s, the segment rolled to next, and
// seals it, which gives next its Base in metadata. It gives up, leaving
// both to the next writer's Fence, if the log fails first.
func (l *Log) sealBehind(s, next *seg) {
	l.mu.Lock()
	for l.failed == nil && l.uploading(s) {
		advanced := l.advanced
		l.mu.Unlock()
		<-advanced
		l.mu.Lock()
	}
	failed := l.failed != nil
	l.mu.Unlock()
	var err error
	for try := 0; !failed; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
		err = l.seal(ctx, s)
		cancel()
		if err == nil || try == 2 || errors.Is(err, meta.ErrStaleEpoch) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	l.mu.Lock()
	switch {
	case failed:
	case err != nil:
		l.failLog(err)
	case s.m.End != next.m.Base:
		l.failLog(fmt.Errorf("objlog: segment %d of %s was sealed at offset %d, the next one starts at %d", s.m.Seq, l.opts.Prefix, s.m.End, next.m.Base))
	default:
		next.m.Pending = false // as the seal stored it
	}
	l.sealing = nil
	l.bgEnd()
	l.mu.Unlock()
	engine.Wake(l.wake)
}

// uploading reports whether a fragment of s is in flight. The caller holds
// mu.
func (l *Log) uploading(s *seg) bool {
	for _, f := range l.inflight {
		if f.seg == s {
			return true
		}
	}
	return false
}

// bgStart and bgEnd count a background metadata call. The caller holds mu.
func (l *Log) bgStart() {
	l.bg++
	l.bgWG.Add(1)
}

func (l *Log) bgEnd() {
	l.bg--
	l.bgWG.Done()
	if l.fencing {
		close(l.advanced)
		l.advanced = make(chan struct{})
	}
}

// dropSpare deletes the spare segment, which has no fragments, from
// metadata, at Close. A failed log keeps it (a newer writer may have
// sealed it already), and so does a failure: the next writer's Fence
// seals it empty.
func (l *Log) dropSpare(ctx context.Context) {
	l.mu.Lock()
	sp, failed := l.spare, l.failed
	l.spare = nil
	l.mu.Unlock()
	if sp == nil || failed != nil {
		return
	}
	if err := l.opts.Meta.DeleteSegment(ctx, sp.m.Seq); err != nil {
		l.opts.Logger.Warn("deleting the unused next segment failed; the next writer seals it empty", "prefix", l.opts.Prefix, "seq", sp.m.Seq, "err", err)
	}
}

// fenceFollower fences and seals m, the segment that was pending after the
// one just sealed at m.Base. If its first fragment holds intact entries
// from above m.Base, the writer stored it while a fragment before it, at the
// end of the segment before, was in flight and then lost: none of its
// entries was acknowledged (acknowledgements are in offset order), so it is
// sealed empty and its objects are left to garbage collection.
func (l *Log) fenceFollower(ctx context.Context, m meta.Segment) (meta.Segment, error) {
	key := l.segPrefix(m.Seq) + fragKey(0)
	data, err := l.opts.Bucket.Get(ctx, key)
	switch {
	case isNotFound(err):
		return l.fenceSegment(ctx, m)
	case err != nil:
		return meta.Segment{}, fmt.Errorf("objlog: read %s: %w", key, err)
	}
	if len(data) != fenceSize {
		if b, err := record.Decode(data); err == nil && b.BaseOffset > m.Base {
			empty := m
			empty.Sealed, empty.End, empty.Objects = true, m.Base, []meta.SegmentObject{}
			stored, err := l.opts.Meta.SealSegment(ctx, empty)
			if err != nil {
				return meta.Segment{}, fmt.Errorf("objlog: seal segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
			}
			l.opts.Logger.Info("a segment held only unacknowledged entries: sealed empty", "prefix", l.opts.Prefix, "seq", m.Seq, "base", m.Base, "first", b.BaseOffset)
			return stored, nil
		}
	}
	return l.fenceSegment(ctx, m)
}
