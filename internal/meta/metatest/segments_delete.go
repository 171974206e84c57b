package metatest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// DeleteSegment removes one segment, whichever it is; deleting one that does
// not exist is not an error.
func testDeleteSegment(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	var segs []meta.Segment
	for seq := uint64(1); seq <= 4; seq++ {
		seg := meta.Segment{Seq: seq, Epoch: epoch, Base: seq * 10, Created: time.Unix(int64(seq), 0)}
		createSegment(t, s, "x", seg)
		if seq < 4 {
			seg = seal(t, s, "x", sealedOf(seg, seq*10+10, meta.SegmentObject{Key: fmt.Sprint(seq), Base: seq * 10, Bytes: 1}))
		}
		segs = append(segs, seg)
	}
	del := func(seq uint64) {
		t.Helper()
		if err := s.DeleteSegment(ctx, "x", seq); err != nil {
			t.Fatalf("DeleteSegment(%d): %v", seq, err)
		}
	}
	del(2) // in the middle
	checkSegments(t, s, "x", segs[0], segs[2], segs[3])
	del(2)
	del(0)
	del(99)
	del(1<<64 - 1)
	checkSegments(t, s, "x", segs[0], segs[2], segs[3])
	checkSegmentErrs(t, s, "x", 2, meta.ErrSegmentNotFound)

	del(4) // the open one: the log has none open now
	checkSegments(t, s, "x", segs[0], segs[2])
	checkSegmentErrs(t, s, "x", 4, meta.ErrSegmentNotFound)
	seg5 := meta.Segment{Seq: 5, Epoch: epoch, Base: 40}
	createSegment(t, s, "x", seg5)
	checkSegments(t, s, "x", segs[0], segs[2], seg5)

	del(1)
	del(3)
	del(5)
	checkSegments(t, s, "x")
	if segs, err := s.Segments(ctx, "x"); err != nil || segs != nil {
		t.Fatalf("Segments after deleting all = %#v, %v, want nil", segs, err)
	}
}

// DeleteLog deletes the log's segments: a log created again under its name
// has none, and its own start over.
func testSegmentsDeletedWithLog(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	createSegment(t, s, "x", meta.Segment{Seq: 1, Epoch: epoch})
	seal(t, s, "x", sealedOf(meta.Segment{Seq: 1, Epoch: epoch}, 5, meta.SegmentObject{Key: "k", Bytes: 5}))
	createSegment(t, s, "x", meta.Segment{Seq: 2, Epoch: epoch, Base: 5})
	if err := s.DeleteLog(ctx, "x"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	if _, err := s.Segments(ctx, "x"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("Segments of a deleted log: err = %v, want ErrNotFound", err)
	}

	create(t, s, "x", nil)
	if segs, err := s.Segments(ctx, "x"); err != nil || segs != nil {
		t.Fatalf("Segments of the re-created log = %#v, %v, want nil", segs, err)
	}
	checkSegmentErrs(t, s, "x", 1, meta.ErrSegmentNotFound)
	checkSegmentErrs(t, s, "x", 2, meta.ErrSegmentNotFound)
	// The new log has epoch 0, and the old open segment does not hold it.
	seg := meta.Segment{Seq: 1, Epoch: 0, Base: 0, Created: time.Unix(9, 0)}
	createSegment(t, s, "x", seg)
	checkSegments(t, s, "x", seg)
}
