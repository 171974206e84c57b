package metatest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// A pending segment is created while the one before it is open, with no
// Base; sealing that one gives it its Base and makes it the open segment.
func testPendingSegment(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	seg1 := meta.Segment{Seq: 1, Epoch: epoch, Base: 7, Created: time.Unix(1, 0)}
	createSegment(t, s, "x", seg1)
	seg2 := meta.Segment{Seq: 2, Epoch: epoch, Created: time.Unix(2, 0), Pending: true}
	createSegment(t, s, "x", seg2)
	checkSegments(t, s, "x", seg1, seg2)

	// At most one pending segment, and nothing else while it is there.
	err := s.CreateSegment(ctx, "x", meta.Segment{Seq: 3, Epoch: epoch, Pending: true})
	checkErr(t, "CreateSegment of a second pending segment", err, meta.ErrPending, meta.ErrSegmentExist)
	err = s.CreateSegment(ctx, "x", meta.Segment{Seq: 3, Epoch: epoch, Base: 9})
	checkErr(t, "CreateSegment after a pending segment", err, meta.ErrSegmentExist, meta.ErrPending)
	err = s.CreateSegment(ctx, "x", meta.Segment{Seq: 2, Epoch: epoch, Pending: true})
	checkErr(t, "CreateSegment of the pending Seq again", err, meta.ErrSegmentExist, meta.ErrPending)

	// Not sealed before the one before it.
	_, err = s.SealSegment(ctx, "x", sealedOf(seg2, 0))
	checkErr(t, "SealSegment of a pending segment", err, meta.ErrPending, meta.ErrConflict)
	checkSegments(t, s, "x", seg1, seg2)

	seg1 = seal(t, s, "x", sealedOf(seg1, 20, meta.SegmentObject{Key: "0", Base: 7, Bytes: 5}))
	seg2.Base, seg2.Pending = 20, false
	checkSegments(t, s, "x", seg1, seg2)
	// Sealing seg1 again changes neither.
	if got, err := s.SealSegment(ctx, "x", sealedOf(seg1, 99)); err != nil || !SegmentEqual(got, seg1) {
		t.Fatalf("SealSegment of the sealed segment 1 = %+v, %v, want it as it was", got, err)
	}
	checkSegments(t, s, "x", seg1, seg2)

	// seg2 is an open segment like any other now.
	seg3 := meta.Segment{Seq: 3, Epoch: epoch, Pending: true}
	createSegment(t, s, "x", seg3)
	seg2 = seal(t, s, "x", sealedOf(seg2, 30, meta.SegmentObject{Key: "0", Base: 20, Bytes: 9}))
	seg3.Base, seg3.Pending = 30, false
	checkSegments(t, s, "x", seg1, seg2, seg3)
	// An empty segment passes its Base on.
	seg4 := meta.Segment{Seq: 4, Epoch: epoch, Pending: true}
	createSegment(t, s, "x", seg4)
	seg3 = seal(t, s, "x", sealedOf(seg3, 30))
	seg4.Base, seg4.Pending = 30, false
	checkSegments(t, s, "x", seg1, seg2, seg3, seg4)
}

// CreateSegment of a pending segment fails unless it comes right after an
// open segment that is not pending, at the log's epoch, with no Base.
func testPendingSegmentRules(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	pending := func(seq uint64) error {
		return s.CreateSegment(ctx, "x", meta.Segment{Seq: seq, Epoch: epoch, Pending: true})
	}
	checkErr(t, "CreateSegment(1) pending in an empty log", pending(1), meta.ErrPending, meta.ErrSegmentExist)
	seg1 := meta.Segment{Seq: 1, Epoch: epoch}
	createSegment(t, s, "x", seg1)
	checkErr(t, "CreateSegment(3) pending after 1", pending(3), meta.ErrPending, meta.ErrSegmentExist)
	checkErr(t, "CreateSegment(1) pending", pending(1), meta.ErrSegmentExist, meta.ErrPending)
	if err := s.CreateSegment(ctx, "x", meta.Segment{Seq: 2, Epoch: epoch, Base: 5, Pending: true}); err == nil {
		t.Error("CreateSegment of a pending segment with a Base succeeded, want an error")
	}
	err := s.CreateSegment(ctx, "x", meta.Segment{Seq: 2, Epoch: epoch + 1, Pending: true})
	checkErr(t, "CreateSegment(2) pending with a newer epoch", err, meta.ErrStaleEpoch, meta.ErrPending)
	checkSegments(t, s, "x", seg1)

	seg1 = seal(t, s, "x", sealedOf(seg1, 0))
	checkErr(t, "CreateSegment(2) pending after a sealed one", pending(2), meta.ErrPending, meta.ErrSegmentExist)
	checkSegments(t, s, "x", seg1)

	// A newer epoch fences the pending segment's writer.
	seg2 := meta.Segment{Seq: 2, Epoch: epoch}
	createSegment(t, s, "x", seg2)
	bump(t, s, "x")
	checkErr(t, "CreateSegment(3) pending with the old epoch", pending(3), meta.ErrStaleEpoch, meta.ErrPending)
	checkSegments(t, s, "x", seg1, seg2)
}

// A pending segment is deleted like any other; its predecessor stays open
// and is sealed as usual, and DeleteLog removes both.
func testPendingSegmentDelete(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	seg1 := meta.Segment{Seq: 1, Epoch: epoch}
	createSegment(t, s, "x", seg1)
	createSegment(t, s, "x", meta.Segment{Seq: 2, Epoch: epoch, Pending: true})
	if err := s.DeleteSegment(ctx, "x", 2); err != nil {
		t.Fatalf("DeleteSegment(2): %v", err)
	}
	checkSegments(t, s, "x", seg1)
	err := s.CreateSegment(ctx, "x", meta.Segment{Seq: 2, Epoch: epoch, Base: 4})
	checkErr(t, "CreateSegment(2) while 1 is open", err, meta.ErrSegmentExist, meta.ErrPending)
	seg2 := meta.Segment{Seq: 2, Epoch: epoch, Pending: true}
	createSegment(t, s, "x", seg2) // again
	checkSegments(t, s, "x", seg1, seg2)
	if err := s.DeleteSegment(ctx, "x", 2); err != nil {
		t.Fatalf("DeleteSegment(2): %v", err)
	}
	seg1 = seal(t, s, "x", sealedOf(seg1, 4))
	checkSegments(t, s, "x", seg1)
	seg2 = meta.Segment{Seq: 2, Epoch: epoch, Base: 4}
	createSegment(t, s, "x", seg2)
	createSegment(t, s, "x", meta.Segment{Seq: 3, Epoch: epoch, Pending: true})
	if err := s.DeleteLog(ctx, "x"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	create(t, s, "x", nil)
	checkSegments(t, s, "x")
}

// A pending create racing the seal of the segment before it either lands
// first, and is activated by the seal, or fails: a pending segment never
// follows a sealed one.
func testPendingSegmentRacesSeal(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	base := uint64(0)
	for seq := uint64(1); seq < 20; seq += 2 {
		open := meta.Segment{Seq: seq, Epoch: epoch, Base: base}
		createSegment(t, s, "x", open)
		sealed := sealedOf(open, base+3)
		var createErr, sealErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			createErr = s.CreateSegment(ctx, "x", meta.Segment{Seq: seq + 1, Epoch: epoch, Pending: true})
		})
		wg.Go(func() { _, sealErr = s.SealSegment(ctx, "x", sealed) })
		wg.Wait()
		if sealErr != nil {
			t.Fatalf("SealSegment(%d): %v", seq, sealErr)
		}
		if createErr != nil && !errors.Is(createErr, meta.ErrPending) {
			t.Fatalf("CreateSegment(%d) pending: %v, want nil or ErrPending", seq+1, createErr)
		}
		segs, err := s.Segments(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		last := segs[len(segs)-1]
		want := fmt.Sprintf("segment %d open at %d", seq+1, base+3)
		if createErr != nil {
			want = fmt.Sprintf("segment %d sealed", seq)
			if !last.Sealed || last.Seq != seq {
				t.Fatalf("the create failed, the last segment is %+v, want %s", last, want)
			}
			createSegment(t, s, "x", meta.Segment{Seq: seq + 1, Epoch: epoch, Base: base + 3})
		} else if last.Seq != seq+1 || last.Pending || last.Sealed || last.Base != base+3 {
			t.Fatalf("the last segment is %+v, want %s", last, want)
		}
		seal(t, s, "x", sealedOf(meta.Segment{Seq: seq + 1, Epoch: epoch, Base: base + 3}, base+5))
		base += 5
	}
}
