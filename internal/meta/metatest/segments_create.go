package metatest

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// CreateSegment fails with ErrStaleEpoch unless the segment has the log's
// epoch, as BumpEpoch or ClaimWriter left it.
func testCreateSegmentStaleEpoch(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	stale := func(seq, epoch uint64) {
		t.Helper()
		err := s.CreateSegment(ctx, "x", meta.Segment{Seq: seq, Epoch: epoch})
		checkErr(t, fmt.Sprintf("CreateSegment(%d) with epoch %d", seq, epoch), err, meta.ErrStaleEpoch, meta.ErrSegmentExist)
	}
	stale(1, 1) // before the first writer, the epoch is 0
	e1 := bump(t, s, "x")
	seg1 := meta.Segment{Seq: 1, Epoch: e1, Created: time.Unix(100, 0)}
	createSegment(t, s, "x", seg1)
	seg1 = seal(t, s, "x", sealedOf(seg1, 0))

	e2 := bump(t, s, "x")
	stale(2, e1)
	stale(2, e2+1)
	e3 := claim(t, s, "x").Epoch()
	stale(2, e1)
	stale(2, e2)
	stale(2, 0)
	checkSegments(t, s, "x", seg1)

	seg2 := meta.Segment{Seq: 2, Epoch: e3, Created: time.Unix(200, 0)}
	createSegment(t, s, "x", seg2)
	checkSegments(t, s, "x", seg1, seg2)
}

// CreateSegment fails with ErrSegmentExist while the newest segment is open,
// and for a Seq that is taken or lower than one that is.
func testCreateSegmentExist(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	exist := func(seq uint64) {
		t.Helper()
		err := s.CreateSegment(ctx, "x", meta.Segment{Seq: seq, Epoch: epoch, Base: 999})
		checkErr(t, fmt.Sprintf("CreateSegment(%d)", seq), err, meta.ErrSegmentExist, meta.ErrStaleEpoch)
	}
	seg3 := meta.Segment{Seq: 3, Epoch: epoch, Created: time.Unix(3, 0)}
	createSegment(t, s, "x", seg3)
	seg5 := meta.Segment{Seq: 5, Epoch: epoch, Base: 0, Created: time.Unix(5, 0)}
	seg3 = seal(t, s, "x", sealedOf(seg3, 0))
	createSegment(t, s, "x", seg5)

	for _, seq := range []uint64{6, 100, 1<<64 - 1, 5, 4, 3, 1, 0} { // the newest is open
		exist(seq)
	}
	checkSegments(t, s, "x", seg3, seg5)

	seg5 = seal(t, s, "x", sealedOf(seg5, 20, meta.SegmentObject{Key: "o", Bytes: 1}))
	for _, seq := range []uint64{5, 4, 3, 2, 0} { // taken, or lower than one that is
		exist(seq)
	}
	checkSegments(t, s, "x", seg3, seg5)

	seg6 := meta.Segment{Seq: 6, Epoch: epoch, Base: 20}
	createSegment(t, s, "x", seg6)
	exist(6)
	checkSegments(t, s, "x", seg3, seg5, seg6)
}

// Of many concurrent CreateSegments of one Seq exactly one succeeds.
func testConcurrentCreateSegment(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	const n = 16
	won, errs := race(n, func(i int) (meta.Segment, error) {
		seg := meta.Segment{Seq: 1, Epoch: epoch, Base: uint64(i), Created: time.Unix(int64(i), 0)}
		return seg, s.CreateSegment(ctx, "x", seg)
	}, meta.ErrSegmentExist)
	if len(errs) > 0 {
		t.Fatalf("CreateSegment errors other than ErrSegmentExist: %v", errs)
	}
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent CreateSegments succeeded, want 1", len(won), n)
	}
	checkSegments(t, s, "x", won[0])
}

// Of many concurrent CreateSegments of one epoch, each with its own Seq,
// exactly one succeeds: the others find it open, or its Seq higher.
func testConcurrentCreateSegmentSeqs(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	first := meta.Segment{Seq: 1, Epoch: epoch}
	createSegment(t, s, "x", first)
	first = seal(t, s, "x", sealedOf(first, 10, meta.SegmentObject{Key: "1", Bytes: 1}))
	const n = 16
	won, errs := race(n, func(i int) (meta.Segment, error) {
		seg := meta.Segment{Seq: uint64(2 + i), Epoch: epoch, Base: 10}
		return seg, s.CreateSegment(ctx, "x", seg)
	}, meta.ErrSegmentExist)
	if len(errs) > 0 {
		t.Fatalf("CreateSegment errors other than ErrSegmentExist: %v", errs)
	}
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent CreateSegments succeeded, want 1: %+v", len(won), n, won)
	}
	checkSegments(t, s, "x", first, won[0])
}

// A CreateSegment that races a new epoch, from BumpEpoch or ClaimWriter,
// succeeds only if it came first: its segment is there for whoever looks
// once the new epoch is stored, and after that the old epoch is refused.
func testCreateSegmentRacesEpoch(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	const rounds, creators = 24, 4
	var (
		epoch uint64 // the log's
		seq   = uint64(1)
		segs  []meta.Segment
		wins  int
	)
	for r := range rounds {
		start := make(chan struct{})
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			won      []meta.Segment
			newEpoch uint64
			listed   []meta.Segment
			bumpErr  error
		)
		for i := range creators {
			wg.Go(func() {
				<-start
				seg := meta.Segment{Seq: seq, Epoch: epoch, Base: uint64(i), Created: time.Unix(int64(r), int64(i))}
				err := s.CreateSegment(ctx, "x", seg)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, seg)
				case !errors.Is(err, meta.ErrStaleEpoch) && !errors.Is(err, meta.ErrSegmentExist):
					t.Errorf("CreateSegment: %v", err)
				}
			})
		}
		wg.Go(func() {
			<-start
			// A few reads first, more in some rounds than in others, so
			// that the creators come first in some rounds and not in
			// others, whatever the store's latency.
			for range r % 4 {
				if _, err := s.Log(ctx, "x"); err != nil {
					t.Errorf("Log: %v", err)
				}
				runtime.Gosched()
			}
			if r%2 == 0 {
				newEpoch, bumpErr = s.BumpEpoch(ctx, "x")
			} else {
				var c meta.Claim
				if c, bumpErr = s.ClaimWriter(ctx, "x", meta.ClaimOptions{}); bumpErr == nil {
					newEpoch = c.Epoch()
				}
			}
			if bumpErr == nil {
				listed, bumpErr = s.Segments(ctx, "x")
			}
		})
		close(start)
		wg.Wait()
		if bumpErr != nil {
			t.Fatalf("round %d: new epoch: %v", r, bumpErr)
		}
		if t.Failed() {
			return
		}
		if newEpoch != epoch+1 {
			t.Fatalf("round %d: new epoch %d, want %d", r, newEpoch, epoch+1)
		}
		if len(won) > 1 {
			t.Fatalf("round %d: %d CreateSegments of Seq %d succeeded, want at most 1", r, len(won), seq)
		}
		if len(won) == 1 {
			// It succeeded with epoch, so it came before newEpoch, and
			// the list made after newEpoch was stored has it.
			if i := slices.IndexFunc(listed, func(g meta.Segment) bool { return g.Seq == seq }); i < 0 || !SegmentEqual(listed[i], won[0]) {
				t.Fatalf("round %d: CreateSegment of Seq %d with epoch %d succeeded, but Segments after epoch %d was stored = %+v",
					r, seq, epoch, newEpoch, listed)
			}
			wins++
			segs = append(segs, seal(t, s, "x", sealedOf(won[0], won[0].Base)))
			seq++
		}
		err := s.CreateSegment(ctx, "x", meta.Segment{Seq: seq, Epoch: epoch})
		checkErr(t, fmt.Sprintf("round %d: CreateSegment with the old epoch", r), err, meta.ErrStaleEpoch, meta.ErrSegmentExist)
		epoch = newEpoch
	}
	checkSegments(t, s, "x", segs...)
	t.Logf("%d of %d rounds created a segment", wins, rounds)
}
