package objlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/miniotest"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
)

// forEachBucket runs f on a bucket in memory ("mem") and on a real MinIO
// ("minio"), one server for the test, a prefix of its own per subtest.
func forEachBucket(t *testing.T, f func(t *testing.T, b blob.Bucket)) {
	t.Run("mem", func(t *testing.T) { f(t, blob.NewMem()) })
	t.Run("minio", func(t *testing.T) {
		srv := minioServer(t)
		b, err := blob.OpenS3(t.Context(), blob.S3Options{
			Endpoint: srv.Endpoint, Bucket: srv.Bucket, Prefix: strings.ReplaceAll(t.Name(), "/", "_"),
			AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		f(t, b)
	})
}

// minioServer starts one MinIO per top-level test.
func minioServer(t *testing.T) *miniotest.Server {
	t.Helper()
	return miniotest.Start(t)
}

// env is a bucket and a metadata store holding one log, "l".
type env struct{ *objlogtest.Env }

func newEnv(t *testing.T, b blob.Bucket) *env { return &env{objlogtest.NewEnv(t, b)} }

// open opens the log with o's tuning; the test closes it unless it says
// otherwise.
func (e *env) open(o Options) *Log {
	e.T.Helper()
	ml, err := e.Store.Log(context.Background(), "l")
	if err != nil {
		e.T.Fatal(err)
	}
	o.Bucket, o.Meta, o.Prefix = e.Bucket, StoreMeta(e.Store, "l"), "7/"
	o.Epoch, o.Start = ml.Epoch, ml.Start
	l, err := Open(context.Background(), o)
	if err != nil {
		e.T.Fatal(err)
	}
	return l
}

func TestAppendReadFromMemoryAndBucket(t *testing.T) {
	forEachBucket(t, func(t *testing.T, b blob.Bucket) {
		e := newEnv(t, b)
		// Tiny fragments and cache: most reads go to the bucket.
		l := e.open(Options{FlushBytes: 512, MaxBatchBytes: 100, CacheBytes: 1, ChunkBytes: 300, ReadAhead: 3})
		defer l.Close()
		epoch := e.Writer(l)
		offs := objlogtest.AppendN(t, l, epoch, "a", 500)
		for i, off := range offs {
			if off != uint64(i) {
				t.Fatalf("append %d got offset %d", i, off)
			}
		}
		objlogtest.WantSeq(t, objlogtest.ReadAll(t, l, 0, 500), "a", 500)
		if got := objlogtest.ReadAll(t, l, 250, 500); got[0] != "a-250" || len(got) != 250 {
			t.Fatalf("read from 250: %d entries, first %q", len(got), got[0])
		}
		infos, err := e.Bucket.List(context.Background(), "7/")
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) < 10 {
			t.Fatalf("%d objects for 500 appends in fragments of 512 bytes", len(infos))
		}
		if st := l.Stats(); st.End != 500 || st.Start != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestTailReaderFollows(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	l := e.open(Options{})
	defer l.Close()
	epoch := e.Writer(l)
	r, err := l.NewReader(0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan []string)
	go func() {
		var got []string
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for len(got) < 101 {
			e, err := r.Next(ctx)
			if err != nil {
				t.Error(err)
				break
			}
			if e.IsTick {
				got = append(got, fmt.Sprintf("tick %d at %d", e.Tick, e.Offset))
			} else {
				got = append(got, string(e.Payload))
			}
		}
		done <- got
	}()
	objlogtest.AppendN(t, l, epoch, "x", 50)
	p, err := l.AppendTick(epoch, 9)
	if err != nil {
		t.Fatal(err)
	}
	if off, err := p.Wait(context.Background()); err != nil || off != 50 {
		t.Fatalf("tick at %d, %v", off, err)
	}
	objlogtest.AppendN(t, l, epoch, "y", 50)
	got := <-done
	if got[50] != "tick 9 at 50" || got[49] != "x-49" || got[51] != "y-0" {
		t.Fatalf("around the tick: %q", got[48:53])
	}
}

// TestAcksInOrder delays the first fragment's upload: the second, stored
// first, is acknowledged only after it.
func TestAcksInOrder(t *testing.T) {
	release := make(chan struct{})
	f := blob.NewFaulty(blob.NewMem(), nil)
	e := newEnv(t, f)
	l := e.open(Options{FlushBytes: 1, MaxInFlight: 4})
	defer l.Close()
	epoch := e.Writer(l)
	held := make(chan struct{}, 1)
	f.SetDecide(func(op blob.Op, key string) blob.Fault {
		if op == "put" && strings.HasSuffix(key, "/00000000") {
			held <- struct{}{}
			<-release
		}
		return blob.Fault{}
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release) // a failed test still closes the log
		}
	}()
	p1, _ := l.Append(epoch, objlogtest.Entry("first"), engine.AppendOptions{})
	<-held // the first fragment is cut alone
	p2, _ := l.Append(epoch, objlogtest.Entry("second"), engine.AppendOptions{})
	// The second fragment is stored while the first waits.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		infos, _ := e.Bucket.List(context.Background(), "7/")
		if len(infos) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second fragment was not stored")
		}
	}
	select {
	case <-p2.Done():
		t.Fatal("the second append was acknowledged before the first")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if off, err := p2.Wait(context.Background()); err != nil || off != 1 {
		t.Fatalf("second: %d, %v", off, err)
	}
	if off, err := p1.Wait(context.Background()); err != nil || off != 0 {
		t.Fatalf("first: %d, %v", off, err)
	}
}

// TestFaultyUploads appends through PUT errors and lost responses: every
// acknowledged entry is read back once, in order, and nothing else.
func TestFaultyUploads(t *testing.T) {
	forEachBucket(t, func(t *testing.T, b blob.Bucket) {
		f := blob.NewFaulty(b, nil)
		e := newEnv(t, f)
		l := e.open(Options{FlushBytes: 256, MaxBatchBytes: 100, CacheBytes: 1})
		defer l.Close()
		epoch := e.Writer(l)
		decide := blob.Random(1, 0.3, 0.5)
		f.SetDecide(func(op blob.Op, key string) blob.Fault {
			if op != "put" {
				return blob.Fault{}
			}
			return decide(op, key)
		})
		offs := objlogtest.AppendN(t, l, epoch, "f", 300)
		f.SetDecide(nil)
		for i, off := range offs {
			if off != uint64(i) {
				t.Fatalf("append %d at %d", i, off)
			}
		}
		objlogtest.WantSeq(t, objlogtest.ReadAll(t, l, 0, 300), "f", 300)
		infos, err := b.List(context.Background(), "7/")
		if err != nil {
			t.Fatal(err)
		}
		if puts := f.Counts()["put"]; puts <= len(infos) {
			t.Fatalf("%d PUTs for %d objects: no fault was injected", puts, len(infos))
		}
	})
}

// TestUploadFailsForGood: an upload that keeps failing fails the log, every
// later append fails, and a new writer recovers it with every acknowledged
// entry.
func TestUploadFailsForGood(t *testing.T) {
	f := blob.NewFaulty(blob.NewMem(), nil)
	e := newEnv(t, f)
	l := e.open(Options{RetryTimeout: 50 * time.Millisecond})
	defer l.Close()
	epoch := e.Writer(l)
	objlogtest.AppendN(t, l, epoch, "ok", 10)
	f.SetDecide(func(op blob.Op, key string) blob.Fault {
		if op == "put" {
			return blob.Fault{Err: blob.ErrInjected}
		}
		return blob.Fault{}
	})
	p, err := l.Append(epoch, objlogtest.Entry("lost"), engine.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(context.Background()); err == nil || !errors.Is(err, blob.ErrInjected) {
		t.Fatalf("append during the outage: %v", err)
	}
	if _, err := l.Append(epoch, objlogtest.Entry("after"), engine.AppendOptions{}); err == nil {
		t.Fatal("append to a failed log succeeded")
	}
	f.SetDecide(nil)
	epoch = e.Writer(l)
	objlogtest.AppendN(t, l, epoch, "new", 5)
	got := objlogtest.ReadAll(t, l, 0, l.Stats().End)
	if len(got) != 15 || got[9] != "ok-9" || got[10] != "new-0" {
		t.Fatalf("after recovery: %q", got)
	}
}

// TestTwoWriters: a writer in another process (another Log on the same
// bucket and metadata) fences the first, which can add nothing after.
func TestTwoWriters(t *testing.T) {
	forEachBucket(t, func(t *testing.T, b blob.Bucket) {
		e := newEnv(t, b)
		opts := Options{}
		l1 := e.open(opts)
		defer l1.Close()
		e1 := e.Writer(l1)
		objlogtest.AppendN(t, l1, e1, "one", 20)

		l2 := e.open(opts)
		defer l2.Close()
		e2 := e.Writer(l2) // fences l1's open segment
		if st := l2.Stats(); st.End != 20 {
			t.Fatalf("the second writer sees the log end at %d, want 20", st.End)
		}
		objlogtest.WantFenced(t, l1, e1)
		objlogtest.AppendN(t, l2, e2, "two", 20)
		got := objlogtest.ReadAll(t, l2, 0, 40)
		for i, g := range got {
			want := fmt.Sprintf("one-%d", i)
			if i >= 20 {
				want = fmt.Sprintf("two-%d", i-20)
			}
			if g != want {
				t.Fatalf("entry %d is %q, want %q", i, g, want)
			}
		}
		// The fenced writer cannot start a segment either.
		segs, err := e.Store.Segments(context.Background(), "l")
		if err != nil {
			t.Fatal(err)
		}
		if len(segs) != 2 || !segs[0].Sealed || segs[1].Epoch != e2 {
			t.Fatalf("segments %+v", segs)
		}
	})
}

// TestCrashedWriterRecovered: a writer that stops without closing (its
// process died) leaves an open segment; a new one finds every acknowledged
// entry.
func TestCrashedWriterRecovered(t *testing.T) {
	forEachBucket(t, func(t *testing.T, b blob.Bucket) {
		e := newEnv(t, b)
		l1 := e.open(Options{FlushBytes: 300, MaxBatchBytes: 100})
		e1 := e.Writer(l1)
		objlogtest.AppendN(t, l1, e1, "c", 100)
		// l1 is abandoned, not closed.

		l2 := e.open(Options{})
		defer l2.Close()
		if st := l2.Stats(); st.End != 100 {
			t.Fatalf("a reader of the crashed log sees it end at %d, want 100", st.End)
		}
		objlogtest.WantSeq(t, objlogtest.ReadAll(t, l2, 0, 100), "c", 100)
		e2 := e.Writer(l2)
		objlogtest.AppendN(t, l2, e2, "d", 1)
		if got := objlogtest.ReadAll(t, l2, 99, 101); got[0] != "c-99" || got[1] != "d-0" {
			t.Fatalf("across the recovery: %q", got)
		}
		l1.Close()
	})
}

func TestSegmentsRollCompactAndTruncate(t *testing.T) {
	forEachBucket(t, func(t *testing.T, b blob.Bucket) {
		mem := b
		e := newEnv(t, mem)
		l := e.open(Options{FlushBytes: 200, MaxBatchBytes: 100, MaxFragments: 5, CacheBytes: 1, CompactBytes: 600})
		defer l.Close()
		epoch := e.Writer(l)
		for i := range 10 {
			objlogtest.AppendN(t, l, epoch, fmt.Sprint("r", i), 20)
		}
		segs, err := e.Store.Segments(context.Background(), "l")
		if err != nil {
			t.Fatal(err)
		}
		if len(segs) < 3 {
			t.Fatalf("%d segments", len(segs))
		}
		countObjects := func() int {
			infos, err := mem.List(context.Background(), "7/")
			if err != nil {
				t.Fatal(err)
			}
			return len(infos)
		}
		before := countObjects()

		// Readers keep reading while compaction deletes the fragments under
		// them.
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				got := objlogtest.ReadAll(t, l, 0, 200)
				if len(got) != 200 || got[0] != "r0-0" || got[199] != "r9-19" {
					t.Errorf("read during compaction: %d entries", len(got))
				}
			})
		}
		n, err := l.Compact(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		after := countObjects()
		if n == 0 || after >= before {
			t.Fatalf("compacted %d segments: %d objects before, %d after", n, before, after)
		}
		got := objlogtest.ReadAll(t, l, 0, 200)
		if len(got) != 200 || got[20] != "r1-0" {
			t.Fatalf("after compaction: %d entries", len(got))
		}

		// Truncation deletes exactly the sealed segments wholly below.
		segs, _ = e.Store.Segments(context.Background(), "l")
		cut := segs[1].End // the end of the second segment
		if err := l.Truncate(cut); err != nil {
			t.Fatal(err)
		}
		left, _ := e.Store.Segments(context.Background(), "l")
		if len(left) != len(segs)-2 || left[0].Seq != segs[2].Seq {
			t.Fatalf("after truncating at %d: %d segments from %d, had %d", cut, len(left), left[0].Seq, len(segs))
		}
		for _, s := range segs[:2] {
			if infos, _ := mem.List(context.Background(), fmt.Sprintf("7/%08d/", s.Seq)); len(infos) != 0 {
				t.Fatalf("segment %d still has %d objects", s.Seq, len(infos))
			}
		}
		if infos, _ := mem.List(context.Background(), fmt.Sprintf("7/%08d/", segs[2].Seq)); len(infos) == 0 {
			t.Fatalf("segment %d lost its objects", segs[2].Seq)
		}
		if _, err := l.NewReader(cut-1, false); !errors.Is(err, rpcerr.ErrTruncated) {
			t.Fatalf("read below the start: %v", err)
		}
		if got := objlogtest.ReadAll(t, l, cut, 200); len(got) != int(200-cut) {
			t.Fatalf("read after truncation: %d", len(got))
		}
	})
}

func TestCloseSealsAndReopens(t *testing.T) {
	forEachBucket(t, func(t *testing.T, b blob.Bucket) {
		e := newEnv(t, b)
		l := e.open(Options{})
		epoch := e.Writer(l)
		objlogtest.AppendN(t, l, epoch, "z", 30)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		segs, _ := e.Store.Segments(context.Background(), "l")
		if len(segs) != 1 || !segs[0].Sealed || segs[0].End != 30 {
			t.Fatalf("after Close: %+v", segs)
		}
		l = e.open(Options{})
		defer l.Close()
		objlogtest.WantSeq(t, objlogtest.ReadAll(t, l, 0, 30), "z", 30)
	})
}

// TestMinIORestartDuringAppends stops MinIO under a steady load of appends
// and starts it again: the uploads are retried, and every acknowledged
// entry is read back once, in order.
func TestMinIORestartDuringAppends(t *testing.T) {
	srv := minioServer(t)
	b, err := blob.OpenS3(t.Context(), blob.S3Options{Endpoint: srv.Endpoint, Bucket: srv.Bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e := newEnv(t, b)
	l := e.open(Options{RetryTimeout: time.Minute})
	defer l.Close()
	epoch := e.Writer(l)

	stop := make(chan struct{})
	var mu sync.Mutex
	acked := map[uint64]string{}
	failed := 0
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				payload := fmt.Sprintf("p%d-%d", p, i)
				pd, err := l.Append(epoch, objlogtest.Entry(payload), engine.AppendOptions{})
				var off uint64
				if err == nil {
					off, err = pd.Wait(context.Background())
				}
				mu.Lock()
				if err == nil {
					acked[off] = payload
				} else {
					failed++
				}
				mu.Unlock()
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitFor := func(n int) {
		for deadline := time.Now().Add(time.Minute); count() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d appends acknowledged, waiting for %d", count(), n)
			}
		}
	}
	waitFor(100)
	srv.Stop()
	during := count()
	time.Sleep(2 * time.Second)
	srv.Restart(t)
	waitFor(during + 200)
	close(stop)
	wg.Wait()
	if failed > 0 {
		t.Fatalf("%d appends failed across a 2s outage, with a minute of retries", failed)
	}
	end := l.Stats().End
	got := objlogtest.ReadAll(t, l, 0, end)
	seen := map[string]bool{}
	for off, p := range got {
		if seen[p] {
			t.Fatalf("%q read twice", p)
		}
		seen[p] = true
		if want, ok := acked[uint64(off)]; ok && want != p {
			t.Fatalf("offset %d holds %q, acknowledged as %q", off, p, want)
		}
	}
	if len(acked) != len(got) {
		t.Fatalf("%d acknowledged, %d read", len(acked), len(got))
	}
}

// TestFencedByEpoch: a writer whose segment was sealed before a newer writer
// opened is stopped by metadata: it cannot start a segment.
func TestFencedByEpoch(t *testing.T) {
	forEachBucket(t, func(t *testing.T, b blob.Bucket) {
		e := newEnv(t, b)
		// One fragment per segment: every flush seals and starts one.
		l1 := e.open(Options{MaxFragments: 1})
		defer l1.Close()
		e1 := e.Writer(l1)
		objlogtest.AppendN(t, l1, e1, "one", 3)

		l2 := e.open(Options{})
		defer l2.Close()
		e2 := e.Writer(l2)
		p, err := l1.Append(e1, objlogtest.Entry("stale"), engine.AppendOptions{})
		if err == nil {
			_, err = p.Wait(context.Background())
		}
		if !errors.Is(err, rpcerr.ErrFenced) || !strings.Contains(err.Error(), "no longer the newest") {
			t.Fatalf("the fenced writer's append: %v, want ErrFenced from the metadata", err)
		}
		objlogtest.AppendN(t, l2, e2, "two", 1)
		got := objlogtest.ReadAll(t, l2, 0, l2.Stats().End)
		if len(got) != 4 || got[2] != "one-2" || got[3] != "two-0" {
			t.Fatalf("read %q", got)
		}
		segs, err := e.Store.Segments(context.Background(), "l")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range segs[:len(segs)-1] {
			if s.Epoch != e1 || !s.Sealed {
				t.Fatalf("segment %+v", s)
			}
		}
		if last := segs[len(segs)-1]; last.Epoch != e2 {
			t.Fatalf("the last segment is epoch %d's, want %d's", last.Epoch, e2)
		}
	})
}

// A truncation whose deletions fail leaves its segments for the next one
// to delete, and a new writer's Fence, which reloads the segments from
// metadata, does not move the start back.
func TestTruncateRetriedAndStartKept(t *testing.T) {
	f := blob.NewFaulty(blob.NewMem(), nil)
	e := newEnv(t, f)
	l := e.open(Options{FlushBytes: 200, MaxBatchBytes: 100, MaxFragments: 5, CacheBytes: 1})
	defer l.Close()
	epoch := e.Writer(l)
	for i := range 12 {
		objlogtest.AppendN(t, l, epoch, fmt.Sprint("r", i), 20)
	}
	segs, err := e.Store.Segments(context.Background(), "l")
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 4 {
		t.Fatalf("%d segments, want at least 4", len(segs))
	}
	cut := segs[1].End + 1 // inside the third segment
	f.SetDecide(func(op blob.Op, key string) blob.Fault {
		if op == blob.OpDelete {
			return blob.Fault{Err: errors.New("injected delete failure")}
		}
		return blob.Fault{}
	})
	if err := l.Truncate(cut); err == nil {
		t.Fatal("a truncation whose deletions failed returned no error")
	}
	f.SetDecide(nil)
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	left, err := e.Store.Segments(context.Background(), "l")
	if err != nil {
		t.Fatal(err)
	}
	if left[0].Seq != segs[2].Seq {
		t.Fatalf("after the second truncation the first segment is %d, want %d", left[0].Seq, segs[2].Seq)
	}
	for _, s := range segs[:2] {
		if infos, _ := e.Bucket.List(context.Background(), fmt.Sprintf("7/%08d/", s.Seq)); len(infos) != 0 {
			t.Fatalf("segment %d still has %d objects", s.Seq, len(infos))
		}
	}
	e.Writer(l)
	if st := l.Stats(); st.Start != cut {
		t.Fatalf("after a new writer's fence the start is %d, want %d", st.Start, cut)
	}
	if _, err := l.NewReader(cut-1, false); !errors.Is(err, rpcerr.ErrTruncated) {
		t.Fatalf("read below the start after the fence: %v", err)
	}
}

// blockCreate holds CreateSegment until release is closed, after saying so
// on entered.
type blockCreate struct {
	Meta
	entered chan struct{}
	release chan struct{}
}

func (b *blockCreate) CreateSegment(ctx context.Context, s meta.Segment) error {
	b.entered <- struct{}{}
	<-b.release
	return b.Meta.CreateSegment(ctx, s)
}

// replaceHook runs hook once, inside the first ReplaceObjects that
// succeeds.
type replaceHook struct {
	Meta
	hook func()
}

func (r *replaceHook) ReplaceObjects(ctx context.Context, seq uint64, old, new []meta.SegmentObject) error {
	err := r.Meta.ReplaceObjects(ctx, seq, old, new)
	if h := r.hook; err == nil && h != nil {
		r.hook = nil
		h()
	}
	return err
}

// A new writer's Fence reloads the segments while compaction records a
// segment's new objects: the segment the log reads from then must be given
// the new objects, since compaction deletes the old ones next.
func TestCompactWhileFenced(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	ml, err := e.Store.Log(context.Background(), "l")
	if err != nil {
		t.Fatal(err)
	}
	rm := &replaceHook{Meta: StoreMeta(e.Store, "l")}
	l, err := Open(context.Background(), Options{Bucket: e.Bucket, Meta: rm, Prefix: "7/", Epoch: ml.Epoch,
		FlushBytes: 200, MaxBatchBytes: 100, MaxFragments: 5, CacheBytes: 1, CompactBytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	epoch := e.Writer(l)
	for i := range 4 {
		objlogtest.AppendN(t, l, epoch, fmt.Sprint("r", i), 20)
	}
	rm.hook = func() { e.Writer(l) }
	if n, err := l.Compact(context.Background()); n == 0 || err != nil {
		t.Fatalf("Compact = %d, %v", n, err)
	}
	got := objlogtest.ReadAll(t, l, 0, 80)
	if len(got) != 80 || got[0] != "r0-0" || got[79] != "r3-19" {
		t.Fatalf("after compaction: %d entries", len(got))
	}
}

// A Fence while the old writer's flusher is creating a segment waits for
// it: the old epoch's refused create must not fail the new writer's log.
func TestFenceWaitsForCreate(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	ml, err := e.Store.Log(context.Background(), "l")
	if err != nil {
		t.Fatal(err)
	}
	bm := &blockCreate{Meta: StoreMeta(e.Store, "l"), entered: make(chan struct{}, 1), release: make(chan struct{})}
	l, err := Open(context.Background(), Options{Bucket: e.Bucket, Meta: bm, Prefix: "7/", Epoch: ml.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	epoch := e.Writer(l)
	if _, err := l.Append(epoch, objlogtest.Entry("old"), engine.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	<-bm.entered
	fenced := make(chan uint64, 1)
	go func() { fenced <- e.Writer(l) }()
	// Let the Fence run ahead of the create if it can.
	var newer uint64
	select {
	case newer = <-fenced:
	case <-time.After(200 * time.Millisecond):
	}
	close(bm.release)
	if newer == 0 {
		newer = <-fenced
	}
	p, err := l.Append(newer, objlogtest.Entry("new"), engine.AppendOptions{})
	if err != nil {
		t.Fatalf("append of the new writer: %v", err)
	}
	if _, err := p.Wait(context.Background()); err != nil {
		t.Fatalf("append of the new writer: %v", err)
	}
}
