package metatest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// SealSegment of a sealed segment leaves it as it is and returns it, so that
// the caller can compare.
func testSealSegmentTwice(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	open := meta.Segment{Seq: 1, Epoch: epoch, Base: 10, Created: time.Unix(1, 0)}
	createSegment(t, s, "x", open)
	first := seal(t, s, "x", sealedOf(open, 30, meta.SegmentObject{Key: "a", Base: 10, Bytes: 5}))

	second := sealedOf(open, 40, meta.SegmentObject{Key: "b", Base: 10, Bytes: 6}, meta.SegmentObject{Key: "c", Base: 30, Bytes: 7})
	second.Created = time.Unix(2, 0)
	second.MaxTime = 12345
	got, err := s.SealSegment(ctx, "x", second)
	if err != nil {
		t.Fatalf("second SealSegment: %v", err)
	}
	if !SegmentEqual(got, first) {
		t.Fatalf("second SealSegment = %+v, want the stored %+v", got, first)
	}
	// Even the same content is not written again: the result is the same.
	if got, err = s.SealSegment(ctx, "x", first); err != nil || !SegmentEqual(got, first) {
		t.Fatalf("third SealSegment = %+v, %v, want %+v", got, err, first)
	}
	checkSegments(t, s, "x", first)
}

// A sealed segment keeps the LogicalBytes it was sealed with, in what
// Segments reads and through ReplaceObjects; one sealed without (zero, or
// below Bytes) reads back as Bytes, and follows Bytes.
func testSegmentLogicalBytes(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	frags := []meta.SegmentObject{{Key: "1/0", Base: 0, Bytes: 10}, {Key: "1/1", Base: 5, Bytes: 20}}
	var want []meta.Segment
	for i, lb := range []int64{300, 0, 7} {
		open := meta.Segment{Seq: uint64(i + 1), Epoch: epoch, Base: uint64(i * 10), Created: time.Unix(1, 0)}
		createSegment(t, s, "x", open)
		sealed := sealedOf(open, uint64(i*10+10), frags...)
		sealed.LogicalBytes = lb
		got, err := s.SealSegment(ctx, "x", sealed)
		if err != nil {
			t.Fatalf("SealSegment: %v", err)
		}
		if w := max(lb, 30); got.LogicalBytes != w {
			t.Fatalf("SealSegment with LogicalBytes %d of 30 bytes returned %d, want %d", lb, got.LogicalBytes, w)
		}
		for _, sg := range checkSegments(t, s, "x", append(want, got)...) {
			if sg.LogicalBytes < sg.Bytes {
				t.Fatalf("Segments: segment %d has LogicalBytes %d below its Bytes %d", sg.Seq, sg.LogicalBytes, sg.Bytes)
			}
		}
		want = append(want, got)
	}
	// Compaction: the same batches in other objects.
	compacted := []meta.SegmentObject{{Key: "c", Base: 0, Bytes: 30}}
	for _, seq := range []uint64{1, 2} {
		if err := s.ReplaceObjects(ctx, "x", seq, frags, compacted); err != nil {
			t.Fatalf("ReplaceObjects: %v", err)
		}
		want[seq-1].Objects = compacted
	}
	checkSegments(t, s, "x", want...)
	// Other bytes: logical ones follow where they were the stored ones.
	bigger := []meta.SegmentObject{{Key: "d", Base: 0, Bytes: 40}}
	for _, seq := range []uint64{1, 2} {
		if err := s.ReplaceObjects(ctx, "x", seq, compacted, bigger); err != nil {
			t.Fatalf("ReplaceObjects: %v", err)
		}
		want[seq-1].Objects, want[seq-1].Bytes = bigger, 40
	}
	want[1].LogicalBytes = 40
	got := checkSegments(t, s, "x", want...)
	if got[0].LogicalBytes != 300 || got[1].LogicalBytes != 40 {
		t.Fatalf("after ReplaceObjects: LogicalBytes %d and %d, want 300 and 40", got[0].LogicalBytes, got[1].LogicalBytes)
	}
}

// ReplaceObjects swaps the objects of a sealed segment if they are the ones
// the caller names, and sets Bytes to the new objects' sum; it changes
// nothing else.
func testReplaceObjects(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	open := meta.Segment{Seq: 1, Epoch: epoch, Base: 100, Created: time.Unix(1, 5)}
	createSegment(t, s, "x", open)
	frags := []meta.SegmentObject{
		{Key: "1/0", Base: 100, Bytes: 10},
		{Key: "1/1", Base: 120, Bytes: 20},
		{Key: "1/2", Base: 150, Bytes: 30},
	}
	seg := sealedOf(open, 200, frags...)
	seg.MaxTime = 777
	seg = seal(t, s, "x", seg)
	other := meta.Segment{Seq: 2, Epoch: epoch, Base: 200, Created: time.Unix(2, 0)}
	createSegment(t, s, "x", other)
	other = seal(t, s, "x", sealedOf(other, 210, frags[0]))

	compacted := []meta.SegmentObject{{Key: "1/c0", Base: 100, Bytes: 40}, {Key: "1/c1", Base: 160, Bytes: 15}}
	if err := s.ReplaceObjects(ctx, "x", 1, slices.Clone(frags), compacted); err != nil {
		t.Fatalf("ReplaceObjects: %v", err)
	}
	seg.Objects, seg.Bytes = compacted, 55
	checkSegments(t, s, "x", seg, other)

	conflict := func(what string, old []meta.SegmentObject) {
		t.Helper()
		err := s.ReplaceObjects(ctx, "x", 1, old, []meta.SegmentObject{{Key: "lost", Base: 100, Bytes: 1}})
		checkErr(t, "ReplaceObjects with "+what, err, meta.ErrConflict, meta.ErrSegmentNotFound)
	}
	conflict("the objects replaced already", frags)
	conflict("the objects in another order", []meta.SegmentObject{compacted[1], compacted[0]})
	conflict("one object", compacted[:1])
	conflict("no objects", nil)
	changed := slices.Clone(compacted)
	changed[1].Bytes++
	conflict("other Bytes", changed)
	changed = slices.Clone(compacted)
	changed[1].Base++
	conflict("another Base", changed)
	changed = slices.Clone(compacted)
	changed[1].Key += "x"
	conflict("another Key", changed)
	checkSegments(t, s, "x", seg, other)

	// To no objects and back; nil and empty are both no objects.
	if err := s.ReplaceObjects(ctx, "x", 1, compacted, []meta.SegmentObject{}); err != nil {
		t.Fatalf("ReplaceObjects to none: %v", err)
	}
	seg.Objects, seg.Bytes = nil, 0
	checkSegments(t, s, "x", seg, other)
	if err := s.ReplaceObjects(ctx, "x", 1, nil, frags); err != nil {
		t.Fatalf("ReplaceObjects from none: %v", err)
	}
	seg.Objects, seg.Bytes = frags, 60
	checkSegments(t, s, "x", seg, other)
}

// A quorum segment's Ensemble is fixed at creation: sealing keeps it
// whatever the seal says, and ReplaceObjects, which means the objects are in
// the bucket, clears it.
func testSegmentEnsemble(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "q", nil)
	epoch := bump(t, s, "q")
	open := meta.Segment{Seq: 1, Epoch: epoch, Base: 0, Created: time.Unix(1, 0),
		Ensemble: []string{"n3", "n1", "n2"}, AckQuorum: 2}
	createSegment(t, s, "q", open)
	checkSegments(t, s, "q", open)

	frags := []meta.SegmentObject{{Key: "1/0", Base: 0, Bytes: 10}}
	sealed := sealedOf(open, 5, frags...)
	other := sealed
	other.Ensemble, other.AckQuorum = []string{"x"}, 1
	got, err := s.SealSegment(ctx, "q", other)
	if err != nil {
		t.Fatalf("SealSegment: %v", err)
	}
	if !SegmentEqual(got, sealed) {
		t.Fatalf("SealSegment with another ensemble = %+v, want the ensemble kept: %+v", got, sealed)
	}
	checkSegments(t, s, "q", sealed)

	if err := s.ReplaceObjects(ctx, "q", 1, frags, frags); err != nil {
		t.Fatalf("ReplaceObjects: %v", err)
	}
	sealed.Ensemble, sealed.AckQuorum = nil, 0
	checkSegments(t, s, "q", sealed)
}

// Of many concurrent SealSegments of one open segment, each with its own
// content, one seals it and every one returns what it sealed it with.
func testConcurrentSealSegment(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	open := meta.Segment{Seq: 1, Epoch: epoch, Base: 5, Created: time.Unix(1, 0)}
	createSegment(t, s, "x", open)
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results []meta.Segment
		inputs  []meta.Segment
	)
	for i := range n {
		in := sealedOf(open, 5+uint64(i), meta.SegmentObject{Key: fmt.Sprint(i), Base: 5, Bytes: int64(i)})
		inputs = append(inputs, in)
		wg.Go(func() {
			got, err := s.SealSegment(ctx, "x", in)
			if err != nil {
				t.Errorf("SealSegment: %v", err)
				return
			}
			mu.Lock()
			results = append(results, got)
			mu.Unlock()
		})
	}
	wg.Wait()
	segs, err := s.Segments(ctx, "x")
	if err != nil || len(segs) != 1 {
		t.Fatalf("Segments = %+v, %v, want one", segs, err)
	}
	stored := segs[0]
	if !slices.ContainsFunc(inputs, func(in meta.Segment) bool { return SegmentEqual(in, stored) }) {
		t.Errorf("stored %+v, none of the SealSegments' segments", stored)
	}
	for _, got := range results {
		if !SegmentEqual(got, stored) {
			t.Errorf("SealSegment = %+v, want the stored %+v", got, stored)
		}
	}
}

// Of many concurrent ReplaceObjects from the same objects exactly one
// succeeds; the others fail with ErrConflict.
func testConcurrentReplaceObjects(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	frags := []meta.SegmentObject{{Key: "a", Base: 0, Bytes: 3}, {Key: "b", Base: 3, Bytes: 4}}
	seg := meta.Segment{Seq: 1, Epoch: epoch}
	createSegment(t, s, "x", seg)
	seg = seal(t, s, "x", sealedOf(seg, 6, frags...))
	const n = 16
	won, errs := race(n, func(i int) (meta.Segment, error) {
		objs := []meta.SegmentObject{{Key: fmt.Sprintf("c%d", i), Base: 0, Bytes: int64(10 + i)}}
		want := seg
		want.Objects, want.Bytes = objs, int64(10+i)
		return want, s.ReplaceObjects(ctx, "x", 1, slices.Clone(frags), objs)
	}, meta.ErrConflict)
	if len(errs) > 0 {
		t.Fatalf("ReplaceObjects errors other than ErrConflict: %v", errs)
	}
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent ReplaceObjects succeeded, want 1", len(won), n)
	}
	checkSegments(t, s, "x", won[0])
}
