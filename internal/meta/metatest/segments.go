package metatest

import (
	"context"
	"errors"
	"fmt"
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
// fields, Created compared as an instant, Objects by content and order
// (nil equals empty), and LogicalBytes as stored (a figure below Bytes is
// Bytes).
func SegmentEqual(a, b meta.Segment) bool {
	return a.Seq == b.Seq && a.Epoch == b.Epoch && a.Base == b.Base && a.Created.Equal(b.Created) &&
		a.Sealed == b.Sealed && a.Pending == b.Pending && a.End == b.End && a.Bytes == b.Bytes && a.MaxTime == b.MaxTime &&
		slices.Equal(a.Objects, b.Objects) && slices.Equal(a.Ensemble, b.Ensemble) && a.AckQuorum == b.AckQuorum &&
		max(a.LogicalBytes, a.Bytes) == max(b.LogicalBytes, b.Bytes)
}
