package objlog

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
)

// blockSeal holds SealSegment of segment seq until release is closed,
// after saying so on entered.
type blockSeal struct {
	Meta
	seq     uint64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockSeal) SealSegment(ctx context.Context, s meta.Segment) (meta.Segment, error) {
	if s.Seq == b.seq {
		b.once.Do(func() { close(b.entered) })
		<-b.release
	}
	return b.Meta.SealSegment(ctx, s)
}

// openRolling opens a log whose segments roll every 4 fragments of one
// entry each, through m if not nil.
func (e *env) openRolling(m Meta) *Log {
	e.T.Helper()
	ml, err := e.Store.Log(context.Background(), "l")
	if err != nil {
		e.T.Fatal(err)
	}
	if m == nil {
		m = StoreMeta(e.Store, "l")
	}
	l, err := Open(context.Background(), Options{Bucket: e.Bucket, Meta: m, Prefix: "7/", Epoch: ml.Epoch,
		FlushBytes: 1, MaxFragments: 4, RetryTimeout: 100 * time.Millisecond})
	if err != nil {
		e.T.Fatal(err)
	}
	return l
}

// appendOne appends one entry and waits for it.
func appendOne(t *testing.T, l *Log, epoch uint64, s string) uint64 {
	t.Helper()
	p, err := l.Append(epoch, objlogtest.Entry(s), engine.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	off, err := p.Wait(context.Background())
	if err != nil {
		t.Fatalf("append %s: %v", s, err)
	}
	return off
}

// A segment rolls onto the one created ahead: the appends after the roll
// are acknowledged before the rolled segment is sealed, and a writer that
// dies then (the Log abandoned, its seal never made) loses none of them: a
// new writer's fence finds every acknowledged entry, in order, once.
func TestRollAheadCrashBeforeSeal(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	bs := &blockSeal{Meta: StoreMeta(e.Store, "l"), seq: 1, entered: make(chan struct{}), release: make(chan struct{})}
	old := e.openRolling(bs)
	defer func() { close(bs.release); old.Close() }()
	epoch := e.Writer(old)
	for i := range 6 {
		if off := appendOne(t, old, epoch, fmt.Sprint("a-", i)); off != uint64(i) {
			t.Fatalf("a%d at %d", i, off)
		}
	}
	<-bs.entered
	segs := e.Segments()
	if len(segs) != 2 || segs[0].Sealed || !segs[1].Pending {
		t.Fatalf("segments after the roll, before the seal: %+v; want 1 open, 2 pending", segs)
	}

	l := e.openRolling(nil)
	defer l.Close()
	epoch2 := e.Writer(l)
	objlogtest.WantSeq(t, objlogtest.ReadAll(t, l, 0, 6), "a", 6)
	if off := appendOne(t, l, epoch2, "b"); off != 6 {
		t.Fatalf("the new writer's first append at %d, want 6", off)
	}
	segs = e.Segments()
	if segs[0].End != 4 || segs[1].Base != 4 || segs[1].End != 6 || !segs[1].Sealed {
		t.Fatalf("segments after the fence: %+v", segs)
	}
	if _, err := old.Append(epoch, objlogtest.Entry("late"), engine.AppendOptions{}); err == nil {
		// The old writer's log still takes it; it must not be
		// acknowledged nor read.
		l2 := e.openRolling(nil)
		defer l2.Close()
		if got := objlogtest.ReadAll(t, l2, 0, l2.Stats().End); len(got) != 7 || got[6] != "b" {
			t.Fatalf("after the new writer's append: %q", got)
		}
	}
}

// The rolled segment's last fragment is lost while the first fragment of
// the next one, created ahead, is stored: neither is acknowledged, the
// fence keeps the rolled segment up to its end, drops the next one's
// leftover without calling it damage, and the log goes on from there.
func TestRollAheadLostFragment(t *testing.T) {
	f := blob.NewFaulty(blob.NewMem(), nil)
	e := newEnv(t, f)
	l := e.openRolling(nil)
	defer l.Close()
	epoch := e.Writer(l)
	for i := range 3 {
		appendOne(t, l, epoch, fmt.Sprint("a-", i))
	}
	lost := SegmentPrefix("7/", 1) + FragmentKey(3)
	next := SegmentPrefix("7/", 2) + FragmentKey(0)
	held, stored := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.SetDecide(func(op blob.Op, key string) blob.Fault {
		if op == "put" && key == lost {
			once.Do(func() { close(held) })
			<-stored
			return blob.Fault{Err: blob.ErrInjected}
		}
		return blob.Fault{}
	})
	p3, err := l.Append(epoch, objlogtest.Entry("a-3"), engine.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-held
	p4, err := l.Append(epoch, objlogtest.Entry("a-4"), engine.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := e.Bucket.Get(context.Background(), next); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the next segment's first fragment was not stored")
		}
	}
	close(stored)
	for i, p := range []engine.Pending{p3, p4} {
		if _, err := p.Wait(context.Background()); err == nil {
			t.Fatalf("append a%d was acknowledged, want it failed", 3+i)
		}
	}
	f.SetDecide(nil)

	epoch = e.Writer(l)
	objlogtest.WantSeq(t, objlogtest.ReadAll(t, l, 0, l.Stats().End), "a", 3)
	if off := appendOne(t, l, epoch, "b"); off != 3 {
		t.Fatalf("the new writer's first append at %d, want 3", off)
	}
	got := objlogtest.ReadAll(t, l, 0, 4)
	if len(got) != 4 || got[3] != "b" {
		t.Fatalf("after the fence: %q", got)
	}
	segs := e.Segments()
	if len(segs) < 3 || segs[0].End != 3 || !segs[1].Sealed || segs[1].Base != 3 || segs[1].End != 3 || len(segs[1].Objects) != 0 {
		t.Fatalf("segments after the fence: %+v; want 1 ending at 3, 2 sealed empty at 3", segs)
	}
	// Another process sees the same.
	l2 := e.openRolling(nil)
	defer l2.Close()
	if got := objlogtest.ReadAll(t, l2, 0, 4); len(got) != 4 || got[3] != "b" {
		t.Fatalf("read by another log: %q", got)
	}
}

// A Fence while a rolled segment is being sealed behind the appends waits
// for that seal: the old epoch's seal does not land after the fence reads
// the segments.
func TestFenceWaitsForRollSeal(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	bs := &blockSeal{Meta: StoreMeta(e.Store, "l"), seq: 1, entered: make(chan struct{}), release: make(chan struct{})}
	l := e.openRolling(bs)
	defer l.Close()
	epoch := e.Writer(l)
	for i := range 6 {
		appendOne(t, l, epoch, fmt.Sprint("a-", i))
	}
	<-bs.entered
	fenced := make(chan uint64, 1)
	go func() { fenced <- e.Writer(l) }()
	select {
	case <-fenced:
		t.Fatal("Fence returned while the old epoch's seal was under way")
	case <-time.After(200 * time.Millisecond):
	}
	close(bs.release)
	newer := <-fenced
	if off := appendOne(t, l, newer, "a-6"); off != 6 {
		t.Fatalf("the new writer's first append at %d, want 6", off)
	}
	objlogtest.WantSeq(t, objlogtest.ReadAll(t, l, 0, 7), "a", 7)
	for _, s := range e.Segments() {
		if s.Pending {
			t.Fatalf("segment %d is still pending: %+v", s.Seq, e.Segments())
		}
	}
}

// Rolls ahead happen over and over with readers and a close: every entry
// is read back once, in order, by this log and by another one, and Close
// leaves no pending segment.
func TestRollAheadManyRolls(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	l := e.openRolling(nil)
	epoch := e.Writer(l)
	for i := range 50 {
		appendOne(t, l, epoch, fmt.Sprint("a-", i))
	}
	objlogtest.WantSeq(t, objlogtest.ReadAll(t, l, 0, 50), "a", 50)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := e.Segments()
	for i, s := range segs {
		if !s.Sealed || s.Pending || (i > 0 && s.Base != segs[i-1].End) {
			t.Fatalf("segments after Close: %+v", segs)
		}
	}
	if len(segs) < 12 {
		t.Fatalf("%d segments for 50 fragments of at most 4", len(segs))
	}
	l2 := e.openRolling(nil)
	defer l2.Close()
	objlogtest.WantSeq(t, objlogtest.ReadAll(t, l2, 0, 50), "a", 50)
}

// settle waits until no segment is being created ahead or sealed behind
// the appends, so that metadata and the log agree on which are sealed.
func settle(l *Log) {
	for {
		l.mu.Lock()
		n := l.bg
		l.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
