package metatest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// Segments are created open, listed by Seq and sealed once.
func testSegments(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	if segs, err := s.Segments(ctx, "a"); err != nil || segs != nil {
		t.Fatalf("Segments of a new log = %#v, %v, want nil", segs, err)
	}
	epoch := bump(t, s, "a")

	var want []meta.Segment
	base := uint64(0)
	// Seqs that sort differently as decimal text, up to the largest.
	for i, seq := range []uint64{1, 2, 9, 10, 100, 1 << 40, 1<<64 - 1} {
		open := meta.Segment{
			Seq:     seq,
			Epoch:   epoch,
			Base:    base,
			Created: time.Date(2024, 5, 6, 7, 8, 9, 123456789+i, time.UTC),
		}
		createSegment(t, s, "a", open)
		checkSegments(t, s, "a", append(want, open)...)

		end := base + uint64(i)*10 // the first is empty
		var objs []meta.SegmentObject
		for j := base; j < end; j += 5 {
			objs = append(objs, meta.SegmentObject{Key: fmt.Sprintf("%d/%d", seq, j), Base: j, Bytes: 100})
		}
		sealed := sealedOf(open, end, objs...)
		got, err := s.SealSegment(ctx, "a", sealed)
		if err != nil {
			t.Fatalf("SealSegment(%d): %v", seq, err)
		}
		if !SegmentEqual(got, sealed) {
			t.Fatalf("SealSegment(%d) = %+v, want %+v", seq, got, sealed)
		}
		want = append(want, sealed)
		checkSegments(t, s, "a", want...)
		base = end
	}

	// Segments are not logs, and leave the log alone.
	if logs, err := s.ListLogs(ctx, ""); err != nil || len(logs) != 1 || logs[0].Epoch != epoch {
		t.Errorf("ListLogs with segments = %+v, %v, want a alone, Epoch %d", logs, err, epoch)
	}
}

// Every field of a segment, and every object, reads back as it was stored,
// to the nanosecond of Created; the store keeps no slice of the caller's and
// hands out none of its own.
func testSegmentRoundTrip(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	created := time.Date(2023, 1, 2, 3, 4, 5, 987654321, time.FixedZone("UTC+5:30", 5*3600+1800))
	open := meta.Segment{Seq: 7, Epoch: epoch, Base: 1<<63 + 5, Created: created}
	createSegment(t, s, "x", open)
	checkSegments(t, s, "x", open)

	// Not sorted by key or base: the order is the caller's.
	objs := []meta.SegmentObject{
		{Key: "b", Base: 1<<63 + 5, Bytes: 0},
		{Key: "a/b/c", Base: 1<<63 + 6, Bytes: 1},
		{Key: "", Base: 0, Bytes: 1 << 62},
		{Key: `q"u\o'te` + "\n\t", Base: 1<<64 - 1, Bytes: 12345},
		{Key: "ключ 鍵 🔑", Base: 42, Bytes: 7},
		{Key: "b", Base: 1<<63 + 5, Bytes: 0}, // a repeat
	}
	sealed := open
	sealed.Sealed = true
	sealed.End = 1<<64 - 1
	sealed.Bytes = 99 // the caller's figure, not checked against the objects
	sealed.MaxTime = -1<<63 + 1
	sealed.Objects = slices.Clone(objs)
	got, err := s.SealSegment(ctx, "x", sealed)
	if err != nil {
		t.Fatalf("SealSegment: %v", err)
	}
	if !SegmentEqual(got, sealed) {
		t.Fatalf("SealSegment = %+v, want %+v", got, sealed)
	}
	sealed.Objects[0].Key = "changed by the caller"
	sealed.Objects = objs
	segs := checkSegments(t, s, "x", sealed)
	if !segs[0].Created.Equal(created) {
		t.Fatalf("Created = %v, want %v", segs[0].Created, created)
	}
	segs[0].Objects[1].Key = "changed in a listed segment"
	checkSegments(t, s, "x", sealed)

	// The zero time, empty objects and the largest values.
	zero := meta.Segment{Seq: 8, Epoch: epoch, Base: 1<<64 - 1}
	createSegment(t, s, "x", zero)
	checkSegments(t, s, "x", sealed, zero)
	zero.Sealed, zero.End, zero.Bytes, zero.MaxTime = true, 1<<64-1, 1<<63-1, 1<<63-1
	zero.Objects = []meta.SegmentObject{}
	if _, err := s.SealSegment(ctx, "x", zero); err != nil {
		t.Fatalf("SealSegment: %v", err)
	}
	segs = checkSegments(t, s, "x", sealed, zero)
	if !segs[1].Created.IsZero() || len(segs[1].Objects) != 0 {
		t.Fatalf("segment 8 = %+v, want the zero Created and no objects", segs[1])
	}
}

// Operations on a missing log fail with ErrNotFound, on a missing segment of
// a log that exists with ErrSegmentNotFound (DeleteSegment with none), and
// none creates anything.
func testSegmentNotFound(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "gone", nil)
	createSegment(t, s, "gone", meta.Segment{Seq: 1})
	create(t, s, "other", nil)
	seg := meta.Segment{Seq: 1, Created: time.Unix(1, 2)}
	createSegment(t, s, "other", seg)
	seg = seal(t, s, "other", sealedOf(seg, 10, meta.SegmentObject{Key: "k", Base: 0, Bytes: 10}))
	if err := s.DeleteLog(ctx, "gone"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}

	for _, log := range []string{"missing", "gone", "othe", "other/"} {
		err := s.CreateSegment(ctx, log, meta.Segment{Seq: 2})
		checkErr(t, fmt.Sprintf("CreateSegment(%q)", log), err, meta.ErrNotFound, meta.ErrSegmentNotFound)
		checkSegmentErrs(t, s, log, 1, meta.ErrNotFound)
		_, err = s.Segments(ctx, log)
		checkErr(t, fmt.Sprintf("Segments(%q)", log), err, meta.ErrNotFound, meta.ErrSegmentNotFound)
		err = s.DeleteSegment(ctx, log, 1)
		checkErr(t, fmt.Sprintf("DeleteSegment(%q)", log), err, meta.ErrNotFound, meta.ErrSegmentNotFound)
	}
	for _, seq := range []uint64{0, 2, 1<<64 - 1} {
		checkSegmentErrs(t, s, "other", seq, meta.ErrSegmentNotFound)
	}
	if logs, err := s.ListLogs(ctx, ""); err != nil || !slices.Equal(names(logs), []string{"other"}) {
		t.Errorf("ListLogs = %+v, %v, want [other]", logs, err)
	}
	checkSegments(t, s, "other", seg)
}

// checkSegmentErrs checks that SealSegment and ReplaceObjects of segment seq
// fail with want, and not with the other not-found error.
func checkSegmentErrs(t *testing.T, s meta.Store, log string, seq uint64, want error) {
	t.Helper()
	ctx := t.Context()
	other := meta.ErrSegmentNotFound
	if want == meta.ErrSegmentNotFound {
		other = meta.ErrNotFound
	}
	_, err := s.SealSegment(ctx, log, meta.Segment{Seq: seq, Sealed: true})
	checkErr(t, fmt.Sprintf("SealSegment(%q, %d)", log, seq), err, want, other)
	err = s.ReplaceObjects(ctx, log, seq, nil, []meta.SegmentObject{{Key: "k"}})
	checkErr(t, fmt.Sprintf("ReplaceObjects(%q, %d)", log, seq), err, want, other)
}

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

// What the contracts ask of the caller's segment is checked: CreateSegment
// refuses a sealed one, SealSegment one that is not sealed or whose Epoch or
// Base are not the stored ones, ReplaceObjects an open segment. None changes
// anything.
func testSegmentArguments(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	bad := func(op string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s succeeded, want an error", op)
		}
	}
	bad("CreateSegment of a sealed segment",
		s.CreateSegment(ctx, "x", sealedOf(meta.Segment{Seq: 1, Epoch: epoch}, 0)))
	checkSegments(t, s, "x")

	open := meta.Segment{Seq: 1, Epoch: epoch, Base: 10, Created: time.Unix(1, 0)}
	createSegment(t, s, "x", open)
	_, err := s.SealSegment(ctx, "x", open)
	bad("SealSegment of a segment that is not sealed", err)
	wrongEpoch := sealedOf(open, 20)
	wrongEpoch.Epoch++
	_, err = s.SealSegment(ctx, "x", wrongEpoch)
	bad("SealSegment with another Epoch", err)
	wrongBase := sealedOf(open, 20)
	wrongBase.Base--
	_, err = s.SealSegment(ctx, "x", wrongBase)
	bad("SealSegment with another Base", err)
	bad("ReplaceObjects of an open segment", s.ReplaceObjects(ctx, "x", 1, nil, []meta.SegmentObject{{Key: "k"}}))
	checkSegments(t, s, "x", open)
}

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

// Segments of different logs are independent, also when one log's name is a
// prefix of the other's.
func testSegmentsOfTwoLogs(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	create(t, s, "a/b", nil)
	ea := bump(t, s, "a")
	bump(t, s, "a/b")
	eab := bump(t, s, "a/b")

	a := meta.Segment{Seq: 1, Epoch: ea, Base: 0, Created: time.Unix(1, 0)}
	ab := meta.Segment{Seq: 1, Epoch: eab, Base: 100, Created: time.Unix(2, 0)}
	createSegment(t, s, "a", a)
	createSegment(t, s, "a/b", ab) // a's open segment does not stop it
	ab = seal(t, s, "a/b", sealedOf(ab, 150, meta.SegmentObject{Key: "ab", Base: 100, Bytes: 3}))
	checkSegments(t, s, "a", a) // still open
	checkSegments(t, s, "a/b", ab)
	err := s.CreateSegment(ctx, "a/b", meta.Segment{Seq: 2, Epoch: ea})
	checkErr(t, "CreateSegment of a/b with a's epoch", err, meta.ErrStaleEpoch, meta.ErrSegmentExist)

	err = s.CreateSegment(ctx, "a", meta.Segment{Seq: 2, Epoch: ea})
	checkErr(t, "CreateSegment of a while its segment is open", err, meta.ErrSegmentExist, meta.ErrStaleEpoch)
	ab2 := meta.Segment{Seq: 2, Epoch: eab, Base: 150}
	createSegment(t, s, "a/b", ab2)

	if err := s.DeleteSegment(ctx, "a", 1); err != nil {
		t.Fatalf("DeleteSegment: %v", err)
	}
	checkSegments(t, s, "a")
	checkSegments(t, s, "a/b", ab, ab2)
	a = meta.Segment{Seq: 2, Epoch: ea, Base: 0}
	createSegment(t, s, "a", a)
	if err := s.DeleteLog(ctx, "a"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	checkSegments(t, s, "a/b", ab, ab2)
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
				if c, bumpErr = s.ClaimWriter(ctx, "x"); bumpErr == nil {
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

// A canceled context fails every segment call with context.Canceled and
// changes nothing.
func testCanceledContextSegments(t *testing.T, s meta.Store) {
	create(t, s, "x", nil)
	epoch := bump(t, s, "x")
	sealed := meta.Segment{Seq: 1, Epoch: epoch}
	createSegment(t, s, "x", sealed)
	sealed = seal(t, s, "x", sealedOf(sealed, 3, meta.SegmentObject{Key: "k", Bytes: 3}))
	open := meta.Segment{Seq: 2, Epoch: epoch, Base: 3}
	createSegment(t, s, "x", open)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", op, err)
		}
	}
	check("CreateSegment", s.CreateSegment(ctx, "x", meta.Segment{Seq: 3, Epoch: epoch}))
	_, err := s.SealSegment(ctx, "x", sealedOf(open, 3))
	check("SealSegment", err)
	check("ReplaceObjects", s.ReplaceObjects(ctx, "x", 1, sealed.Objects, nil))
	_, err = s.Segments(ctx, "x")
	check("Segments", err)
	check("DeleteSegment", s.DeleteSegment(ctx, "x", 1))
	checkSegments(t, s, "x", sealed, open)
}

// race runs fn(0) to fn(n-1) at once and returns the segments of those that
// succeeded and the errors that are not ok.
func race(n int, fn func(i int) (meta.Segment, error), ok error) (won []meta.Segment, errs []error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			seg, err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, seg)
			case !errors.Is(err, ok):
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return won, errs
}

func bump(t *testing.T, s meta.Store, name string) uint64 {
	t.Helper()
	e, err := s.BumpEpoch(t.Context(), name)
	if err != nil {
		t.Fatalf("BumpEpoch(%q): %v", name, err)
	}
	return e
}

func createSegment(t *testing.T, s meta.Store, log string, seg meta.Segment) {
	t.Helper()
	if err := s.CreateSegment(t.Context(), log, seg); err != nil {
		t.Fatalf("CreateSegment(%q, %d): %v", log, seg.Seq, err)
	}
}

// seal seals the stored segment with seg, which must be the first to seal
// it, and returns seg.
func seal(t *testing.T, s meta.Store, log string, seg meta.Segment) meta.Segment {
	t.Helper()
	got, err := s.SealSegment(t.Context(), log, seg)
	if err != nil {
		t.Fatalf("SealSegment(%q, %d): %v", log, seg.Seq, err)
	}
	if !SegmentEqual(got, seg) {
		t.Fatalf("SealSegment(%q, %d) = %+v, want %+v", log, seg.Seq, got, seg)
	}
	return seg
}

// sealedOf returns open sealed at end with objs, and Bytes their sum.
func sealedOf(open meta.Segment, end uint64, objs ...meta.SegmentObject) meta.Segment {
	s := open
	s.Sealed = true
	s.End = end
	s.Objects = objs
	for _, o := range objs {
		s.Bytes += o.Bytes
	}
	return s
}

// checkSegments checks that Segments returns want, in order (nil if want is
// empty), and returns what it returned.
func checkSegments(t *testing.T, s meta.Store, log string, want ...meta.Segment) []meta.Segment {
	t.Helper()
	got, err := s.Segments(t.Context(), log)
	if err != nil {
		t.Fatalf("Segments(%q): %v", log, err)
	}
	if len(want) == 0 && got != nil {
		t.Fatalf("Segments(%q) = %#v, want nil", log, got)
	}
	if !slices.EqualFunc(got, want, SegmentEqual) {
		t.Fatalf("Segments(%q) =\n%+v\nwant\n%+v", log, got, want)
	}
	return got
}

// checkErr checks that err is want and not other.
func checkErr(t *testing.T, what string, err, want, other error) {
	t.Helper()
	if !errors.Is(err, want) || errors.Is(err, other) {
		t.Errorf("%s: err = %v, want %v", what, err, want)
	}
}

// SegmentEqual reports whether a and b describe the same segment: equal
// fields, Created compared as an instant, and Objects by content and order
// (nil equals empty).
func SegmentEqual(a, b meta.Segment) bool {
	return a.Seq == b.Seq && a.Epoch == b.Epoch && a.Base == b.Base && a.Created.Equal(b.Created) &&
		a.Sealed == b.Sealed && a.End == b.End && a.Bytes == b.Bytes && a.MaxTime == b.MaxTime &&
		slices.Equal(a.Objects, b.Objects) && slices.Equal(a.Ensemble, b.Ensemble) && a.AckQuorum == b.AckQuorum
}
