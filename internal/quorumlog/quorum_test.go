package quorumlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/replica"
	"github.com/ternwal/tern/internal/vfs"
)

var errDead = errors.New("test: node is down")

// faultNode is a real replica store in process that a test can kill (every
// call fails, and its streams end) or pause (its streams stop reporting
// progress).
type faultNode struct {
	replica.Node
	store *replica.Store
	hold  *atomic.Bool // refuse offloads while set

	mu      sync.Mutex
	dead    bool
	paused  bool
	hang    chan struct{} // opening a stream waits until it is closed, while set
	fencing chan struct{} // a fence call waits until it is closed, while set
	waiting atomic.Int32  // fence calls waiting for fencing
	streams []*faultStream
}

type faultStream struct {
	replica.Sender
	n       *faultNode
	once    sync.Once
	onErr   func(error)
	mu      sync.Mutex
	stopped bool
}

func (f *faultNode) down() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return errDead
	}
	return nil
}

func (f *faultNode) kill() {
	f.mu.Lock()
	f.dead = true
	streams := f.streams
	f.streams = nil
	f.mu.Unlock()
	for _, s := range streams {
		s.fail(errDead)
	}
}

func (f *faultNode) pause() {
	f.mu.Lock()
	f.paused = true
	f.mu.Unlock()
}

// resume undoes pause for the streams opened from now on; a paused stream
// stays silent, as one whose acknowledgements were lost.
func (f *faultNode) resume() {
	f.mu.Lock()
	f.paused = false
	f.mu.Unlock()
}

func (s *faultStream) fail(err error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.onErr(err)
	})
}

func (f *faultNode) Stream(ctx context.Context, seg replica.SegmentID, epoch uint64, onDurable func(uint64), onErr func(error)) (replica.Sender, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	hang := f.hang
	f.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	fs := &faultStream{n: f, onErr: onErr}
	inner, err := f.Node.Stream(ctx, seg, epoch, func(count uint64) {
		f.mu.Lock()
		paused := f.paused
		f.mu.Unlock()
		fs.mu.Lock()
		stopped := fs.stopped
		fs.mu.Unlock()
		if !paused && !stopped {
			onDurable(count)
		}
	}, fs.fail)
	if err != nil {
		return nil, err
	}
	fs.Sender = inner
	f.mu.Lock()
	f.streams = append(f.streams, fs)
	f.mu.Unlock()
	return fs, nil
}

func (s *faultStream) Send(n uint64, data []byte, sum uint32) error {
	if err := s.n.down(); err != nil {
		return err
	}
	return s.Sender.Send(n, data, sum)
}

func (f *faultNode) Fence(ctx context.Context, seg replica.SegmentID, epoch uint64) (uint64, error) {
	if err := f.down(); err != nil {
		return 0, err
	}
	f.mu.Lock()
	gate := f.fencing
	f.mu.Unlock()
	if gate != nil {
		f.waiting.Add(1)
		<-gate
	}
	return f.Node.Fence(ctx, seg, epoch)
}

func (f *faultNode) List(ctx context.Context, seg replica.SegmentID) ([]int64, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	return f.Node.List(ctx, seg)
}

func (f *faultNode) Read(ctx context.Context, seg replica.SegmentID, n uint64, off int64, p []byte) (int, error) {
	if err := f.down(); err != nil {
		return 0, err
	}
	return f.Node.Read(ctx, seg, n, off, p)
}

func (f *faultNode) Seal(ctx context.Context, seg replica.SegmentID, count uint64) error {
	if err := f.down(); err != nil {
		return err
	}
	return f.Node.Seal(ctx, seg, count)
}

func (f *faultNode) Offload(ctx context.Context, seg replica.SegmentID, objs []replica.Object) error {
	if err := f.down(); err != nil {
		return err
	}
	if f.hold.Load() {
		return errors.New("test: offloads are held")
	}
	return f.Node.Offload(ctx, seg, objs)
}

func (f *faultNode) Drop(ctx context.Context, seg replica.SegmentID) error {
	if err := f.down(); err != nil {
		return err
	}
	return f.Node.Drop(ctx, seg)
}

// cluster is n replica nodes, "n0" to "n<n-1>", on the bucket of e.
type cluster struct {
	nodes map[string]*faultNode
	ids   []string
	hold  atomic.Bool // refuse offloads
	stale bool        // live lists the killed nodes too
}

func newCluster(t *testing.T, e *env, n int) *cluster {
	t.Helper()
	c := &cluster{nodes: map[string]*faultNode{}}
	for i := range n {
		s, err := replica.Open(replica.Options{FS: vfs.NewMem(), Dir: "/replica", Bucket: e.Bucket})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		id := fmt.Sprintf("n%d", i)
		c.nodes[id] = &faultNode{Node: replica.NewLocal(s), store: s, hold: &c.hold}
		c.ids = append(c.ids, id)
	}
	return c
}

func (c *cluster) node(id string) (replica.Node, error) {
	n, ok := c.nodes[id]
	if !ok {
		return nil, fmt.Errorf("no node %q", id)
	}
	return n, nil
}

// live lists the nodes not killed.
func (c *cluster) live() []string {
	var ids []string
	for _, id := range c.ids {
		if c.stale || c.nodes[id].down() == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

func (c *cluster) replicas(cfg quorum.Config) *Replicas {
	return &Replicas{Config: cfg, Log: 7, Node: c.node, Live: c.live, LagTimeout: time.Minute}
}

// TestQuorumAppendReadOffload appends through an ensemble of three, reads
// back from memory and from the replicas, and checks that sealed segments
// move to the bucket and leave the replicas.
func TestQuorumAppendReadOffload(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	c.hold.Store(true) // read from the replicas first
	l := e.open(Options{Replicas: c.replicas(quorum.Default), SegmentBytes: 2000, FlushBytes: 300, MaxBatchBytes: 100, CacheBytes: 1})
	epoch := e.Writer(l)
	var want []string
	for r := range 30 {
		prefix := fmt.Sprintf("r%d", r)
		for i, off := range objlogtest.AppendN(t, l, epoch, prefix, 10) {
			if off != uint64(len(want)) {
				t.Fatalf("append %d of round %d got offset %d, want %d", i, r, off, len(want))
			}
			want = append(want, fmt.Sprintf("%s-%d", prefix, i))
		}
	}
	if got := objlogtest.ReadAll(t, l, 0, 300); !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}

	segs := e.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments of at most 2000 bytes for 300 appends", len(segs))
	}
	for _, s := range segs {
		if len(s.Ensemble) != 3 || s.AckQuorum != 2 {
			t.Fatalf("segment %d: ensemble %v, ack quorum %d", s.Seq, s.Ensemble, s.AckQuorum)
		}
	}
	c.hold.Store(false)
	if _, err := l.Offload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Close sealed the last segment; a new log handle offloads it.
	l = e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1})
	defer l.Close()
	if _, err := l.Offload(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range e.Segments() {
		if !s.Sealed || len(s.Ensemble) != 0 || len(s.Objects) != 1 || s.Objects[0].Key != "c00000000" {
			t.Fatalf("segment %d after offload: sealed %v, ensemble %v, objects %+v", s.Seq, s.Sealed, s.Ensemble, s.Objects)
		}
	}
	for id, n := range c.nodes {
		if segs := n.store.Segments(); len(segs) != 0 {
			t.Errorf("replica %s still holds %d segments after the offload", id, len(segs))
		}
	}
	if got := objlogtest.ReadAll(t, l, 0, 300); !slices.Equal(got, want) {
		t.Fatalf("read after the offload %q, want %q", got, want)
	}
}

// openEnsemble returns the open segment's sequence number and ensemble.
func (e *env) openEnsemble() (uint64, []string) {
	e.T.Helper()
	segs := e.Segments()
	if len(segs) == 0 || segs[len(segs)-1].Sealed {
		e.T.Fatalf("no open segment in %+v", segs)
	}
	s := segs[len(segs)-1]
	return s.Seq, s.Ensemble
}

// TestQuorumReplicaKilledRolls kills a replica of the open segment: the
// appends go on at the ack quorum, and the next segment's ensemble leaves
// the dead node out.
func TestQuorumReplicaKilledRolls(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 4)
	l := e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1})
	defer l.Close()
	epoch := e.Writer(l)
	objlogtest.AppendN(t, l, epoch, "a", 100)
	seq, ens := e.openEnsemble()
	dead := ens[1]
	c.nodes[dead].kill()
	objlogtest.AppendN(t, l, epoch, "b", 100)

	segs := e.Segments()
	i := slices.IndexFunc(segs, func(s meta.Segment) bool { return s.Seq == seq })
	if !segs[i].Sealed || i == len(segs)-1 {
		t.Fatalf("the segment with the dead replica is not sealed and followed: %+v", segs)
	}
	for _, s := range segs[i+1:] {
		if slices.Contains(s.Ensemble, dead) {
			t.Fatalf("segment %d has the dead replica %s in its ensemble %v", s.Seq, dead, s.Ensemble)
		}
	}
	got := objlogtest.ReadAll(t, l, 0, 200)
	objlogtest.WantSeq(t, got[:100], "a", 100)
	objlogtest.WantSeq(t, got[100:], "b", 100)
}

// TestQuorumLaggingReplicaRolls pauses a replica: once it stays behind the
// ack quorum for LagTimeout, the segment rolls without it.
func TestQuorumLaggingReplicaRolls(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 4)
	r := c.replicas(quorum.Default)
	r.LagTimeout = 20 * time.Millisecond
	l := e.open(Options{Replicas: r})
	defer l.Close()
	epoch := e.Writer(l)
	objlogtest.AppendN(t, l, epoch, "a", 10)
	seq, ens := e.openEnsemble()
	c.nodes[ens[0]].pause()
	deadline := time.Now().Add(20 * time.Second)
	n := 10
	for {
		objlogtest.AppendN(t, l, epoch, fmt.Sprintf("b%d", n), 1)
		n++
		if s, _ := e.openEnsemble(); s != seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the segment never rolled away from the paused replica")
		}
	}
	if _, ens2 := e.openEnsemble(); slices.Contains(ens2, ens[0]) {
		t.Fatalf("the new ensemble %v has the paused replica %s", ens2, ens[0])
	}
	if got := objlogtest.ReadAll(t, l, 0, uint64(n)); len(got) != n {
		t.Fatalf("read %d entries, want %d", len(got), n)
	}
}

// TestQuorumTooFewReplicasFails kills two of three replicas: appends fail
// rather than hang, the one in flight and those after it.
func TestQuorumTooFewReplicasFails(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	l := e.open(Options{Replicas: c.replicas(quorum.Default)})
	defer l.Close()
	epoch := e.Writer(l)
	objlogtest.AppendN(t, l, epoch, "a", 10)
	_, ens := e.openEnsemble()
	c.nodes[ens[0]].kill()
	c.nodes[ens[1]].kill()
	p, err := l.Append(epoch, objlogtest.Entry("lost"), engine.AppendOptions{})
	if err == nil {
		_, err = p.Wait(context.Background())
	}
	if err == nil {
		t.Fatal("an append with one replica of three left was acknowledged")
	}
	p, err = l.Append(epoch, objlogtest.Entry("later"), engine.AppendOptions{})
	if err == nil {
		_, err = p.Wait(context.Background())
	}
	if err == nil {
		t.Fatal("an append was acknowledged with one live node of three")
	}
}

// TestQuorumRecovery opens a second writer, as another process would, while
// the first still has its ensemble: every entry the first acknowledged is
// kept, and the first can acknowledge nothing more.
func TestQuorumRecovery(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	a := e.open(Options{Replicas: c.replicas(quorum.Default)})
	defer a.Close()
	ea := e.Writer(a)
	objlogtest.AppendN(t, a, ea, "a", 100)

	b := e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1})
	defer b.Close()
	eb := e.Writer(b)
	objlogtest.WantFenced(t, a, ea)
	objlogtest.AppendN(t, b, eb, "b", 50)
	got := objlogtest.ReadAll(t, b, 0, 150)
	objlogtest.WantSeq(t, got[:100], "a", 100)
	objlogtest.WantSeq(t, got[100:], "b", 50)
}

// TestQuorumRecoveryCopiesForward recovers a segment whose replicas hold
// different prefixes, one of them down: the longest prefix among those
// that answer is kept, and copied to the shorter one before the seal.
func TestQuorumRecoveryCopiesForward(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	old := e.leftOpen(c.ids, 2)
	// n0 has 5 fragments, n1 3, n2 all 6 but is down.
	id := replica.SegmentID{Log: 7, Seq: 1}
	c.addFragments(t, id, old, map[string]int{"n0": 5, "n1": 3, "n2": 6})
	c.nodes["n2"].kill()

	l := e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1})
	defer l.Close()
	e.Writer(l)
	segs := e.Segments()
	if !segs[0].Sealed || segs[0].End != 50 || len(segs[0].Objects) != 5 {
		t.Fatalf("recovered segment: %+v, want sealed at 50 with 5 fragments", segs[0])
	}
	if sizes, err := c.nodes["n1"].store.List(id); err != nil || len(sizes) != 5 {
		t.Fatalf("n1 after recovery holds %d fragments (%v), want 5 copied forward", len(sizes), err)
	}
	got := objlogtest.ReadAll(t, l, 0, 50)
	for i, g := range got {
		if want := fmt.Sprintf("f-%d", i); g != want {
			t.Fatalf("entry %d is %q, want %q", i, g, want)
		}
	}
	// The old epoch can add nothing to the fenced replicas.
	err := c.nodes["n0"].store.Add(id, old, 5, testFragment(5, old), replica.FrameSum(5, testFragment(5, old)), func(error) {})
	if !errors.Is(err, rpcerr.ErrSegmentFenced) && !errors.Is(err, rpcerr.ErrSegmentSealed) {
		t.Fatalf("add of the old epoch after recovery: %v, want fenced", err)
	}
	if st := l.Stats(); st.End != 50 {
		t.Fatalf("end after recovery %d, want 50", st.End)
	}
}

// TestQuorumSegmentNeverSent opens a log whose open segment its writer
// created in metadata and died before it sent anything: no replica knows
// the segment. A reader's process opens the log, without the segment's
// entries (there are none), and a new writer recovers it empty and appends.
func TestQuorumSegmentNeverSent(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	e.leftOpen(c.ids, 2)
	r := e.open(Options{Replicas: c.replicas(quorum.Default)})
	defer r.Close()
	if st := r.Stats(); st.End != 0 {
		t.Fatalf("a reader's log ends at %d, want 0", st.End)
	}
	w := e.open(Options{Replicas: c.replicas(quorum.Default)})
	defer w.Close()
	epoch := e.Writer(w)
	if segs := e.Segments(); !segs[0].Sealed || segs[0].End != 0 {
		t.Fatalf("the segment never sent: %+v, want sealed empty", segs[0])
	}
	objlogtest.AppendN(t, w, epoch, "after", 3)
	if got := objlogtest.ReadAll(t, w, 0, 3); len(got) != 3 || got[0] != "after-0" {
		t.Fatalf("read %q after recovery", got)
	}
}

// leftOpen records segment 1 as a writer of a new epoch creates it, on
// ensemble with ackQuorum, and returns the epoch: the segment is open, as
// the writer's death leaves it.
func (e *env) leftOpen(ensemble []string, ackQuorum int) uint64 {
	e.T.Helper()
	ctx := context.Background()
	epoch, err := e.Store.BumpEpoch(ctx, "l")
	if err != nil {
		e.T.Fatal(err)
	}
	m := meta.Segment{Seq: 1, Epoch: epoch, Created: time.Now(), Ensemble: ensemble, AckQuorum: ackQuorum}
	if err := e.Store.CreateSegment(ctx, "l", m); err != nil {
		e.T.Fatal(err)
	}
	return epoch
}

// testFragment returns fragment k of a test's segment written by epoch: a
// batch of entries "f-10k" to "f-10k+9", at offsets 10k to 10k+9.
func testFragment(k int, epoch uint64) []byte {
	var es []record.Entry
	for j := range 10 {
		es = append(es, record.Entry{Time: 1, Payload: fmt.Appendf(nil, "f-%d", 10*k+j)})
	}
	return record.Encode(uint64(10*k), epoch, es)
}

// addFragments stores on each node the first count fragments of segment
// id, as a writer of epoch would have sent them, each durable before the
// next, so that a replica with little memory makes room for it.
func (c *cluster) addFragments(t *testing.T, id replica.SegmentID, epoch uint64, counts map[string]int) {
	t.Helper()
	for node, count := range counts {
		for k := range count {
			done := make(chan error, 1)
			if err := c.nodes[node].store.Add(id, epoch, uint64(k), testFragment(k, epoch), replica.FrameSum(uint64(k), testFragment(k, epoch)), func(err error) { done <- err }); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// offloadedElsewhere writes a sealed segment, opens a handle b on the log
// with o's tuning, and then offloads the segment through another handle, as
// an earlier owner would: b's segment list still points at the replicas,
// which have dropped it. b cannot offload through its replicas itself.
func offloadedElsewhere(t *testing.T, o Options) *objlog.Log {
	t.Helper()
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	a := e.open(Options{Replicas: c.replicas(quorum.Default)})
	epoch := e.Writer(a)
	objlogtest.AppendN(t, a, epoch, "a", 50)
	c.hold.Store(true) // a leaves the sealed segment to the others
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	o.Replicas = c.replicas(quorum.Default)
	o.Replicas.Node = func(id string) (replica.Node, error) {
		n, err := c.node(id)
		return noOffload{n}, err
	}
	b := e.open(o)
	t.Cleanup(func() { b.Close() })
	other := e.open(Options{Replicas: c.replicas(quorum.Default)})
	defer other.Close()
	c.hold.Store(false)
	if n, err := other.Offload(context.Background()); err != nil || n != 1 {
		t.Fatalf("Offload: %d segments, %v", n, err)
	}
	return b
}

// A reader of a handle whose segment list is stale finds the segment in
// the bucket.
func TestQuorumReadAfterOffloadElsewhere(t *testing.T) {
	b := offloadedElsewhere(t, Options{CacheBytes: 1})
	objlogtest.WantSeq(t, objlogtest.ReadAll(t, b, 0, 50), "a", 50)
}

// A handle whose segment list is stale does not try the segment again and
// fail on it at every pass.
func TestQuorumOffloadAfterOffloadElsewhere(t *testing.T) {
	b := offloadedElsewhere(t, Options{})
	if n, err := b.Offload(context.Background()); err != nil || n != 0 {
		t.Fatalf("Offload of the handle whose segment list is stale: %d segments, %v; want none to do", n, err)
	}
}

// noOffload is a replica that a log handle cannot offload through.
type noOffload struct{ replica.Node }

func (noOffload) Offload(context.Context, replica.SegmentID, []replica.Object) error {
	return errors.New("test: this handle does not offload")
}

// TestQuorumDeadNodeStillListed writes on three nodes while one of them is
// dead but still listed live, as for the node TTL after a crash: the
// segment runs at the ack quorum of the other two instead of rolling over
// and over onto the dead node.
func TestQuorumDeadNodeStillListed(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	c.stale = true
	c.nodes["n1"].kill()
	l := e.open(Options{Replicas: c.replicas(quorum.Default)})
	epoch := e.Writer(l)
	for r := range 5 {
		objlogtest.AppendN(t, l, epoch, fmt.Sprintf("r%d", r), 10)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := e.Segments(); len(segs) != 1 {
		t.Fatalf("%d segments for 50 appends with a dead node listed live, want 1", len(segs))
	}
}

// TestQuorumHangingNodeLeftOut starts a segment while opening a stream to
// one of its replicas hangs, as a connection through a partition that drops
// packets does: after LagTimeout the segment runs at the ack quorum of the
// others instead of holding the appends.
func TestQuorumHangingNodeLeftOut(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	hang := make(chan struct{})
	c.nodes["n1"].hang = hang
	r := c.replicas(quorum.Default)
	r.LagTimeout = 20 * time.Millisecond
	l := e.open(Options{Replicas: r})
	defer l.Close()
	defer close(hang) // before Close, should a stream still wait
	epoch := e.Writer(l)
	p, err := l.Append(epoch, objlogtest.Entry("a"), engine.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatalf("append with a replica whose stream hangs: %v", err)
	}
	if _, ens := e.openEnsemble(); !slices.Contains(ens, "n1") {
		t.Fatalf("the segment's ensemble is %v; the test meant n1 to be in it", ens)
	}
}

// TestQuorumStalledReplicasFail pauses two replicas of three: no replica
// lags the others, yet the appends fail after LagTimeout instead of
// waiting for ever. When the two come back, a new writer recovers the log
// with every acknowledged entry.
func TestQuorumStalledReplicasFail(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	r := c.replicas(quorum.Default)
	r.LagTimeout = 20 * time.Millisecond
	l := e.open(Options{Replicas: r})
	defer l.Close()
	epoch := e.Writer(l)
	objlogtest.AppendN(t, l, epoch, "a", 10)
	_, ens := e.openEnsemble()
	c.nodes[ens[0]].pause()
	c.nodes[ens[1]].pause()
	p, err := l.Append(epoch, objlogtest.Entry("stalled"), engine.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append to two stalled replicas of three: %v, want it failed", err)
	}

	// Until a new writer recovers it, the log refuses appends, saying why.
	if _, err := l.Append(epoch, objlogtest.Entry("refused"), engine.AppendOptions{}); err == nil || !strings.Contains(err.Error(), "fewer than the ack quorum") {
		t.Fatalf("append to the failed log: %v, want the ensemble's failure", err)
	}

	// The two come back, and a new writer recovers the log on the same
	// three nodes (there are no others): every acknowledged entry is kept.
	c.nodes[ens[0]].resume()
	c.nodes[ens[1]].resume()
	epoch = e.Writer(l)
	p, err = l.Append(epoch, objlogtest.Entry("back"), engine.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("append by the new writer: %v", err)
	}
	offs := objlogtest.AppendN(t, l, epoch, "b", 10)
	got := objlogtest.ReadAll(t, l, 0, offs[9]+1)
	want := []string{"a-0", "a-1", "a-2", "a-3", "a-4", "a-5", "a-6", "a-7", "a-8", "a-9"}
	// The failed append may have reached a replica that the roll's recovery
	// read: its outcome was unknown, so it may be in the log, once.
	if first == 11 && got[10] == "stalled" {
		want = append(want, "stalled")
	}
	want = append(want, "back", "b-0", "b-1", "b-2", "b-3", "b-4", "b-5", "b-6", "b-7", "b-8", "b-9")
	if !slices.Equal(got, want) {
		t.Fatalf("after two replicas stalled and came back, the log holds\n%q\nwant\n%q", got, want)
	}
}

// TestQuorumReaderPastUnrecoveredEnd opens a log whose owner died with its
// open segment acknowledged further than the surviving replicas show
// together: the dead owner's replica and n1 hold 5 fragments, n2 only 2.
// The log taken without fencing ends at 20, yet entries up to 50 were
// acknowledged, and a reader that read them from the dead owner comes back
// at 30 (a reader moving with the log, or a subscription's cursor). It
// opens and waits there, rather than fail with ErrOutOfRange, and reads on
// once a writer recovers the segment.
func TestQuorumReaderPastUnrecoveredEnd(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	old := e.leftOpen(c.ids, 2)
	c.addFragments(t, replica.SegmentID{Log: 7, Seq: 1}, old, map[string]int{"n0": 5, "n1": 5, "n2": 2})
	c.nodes["n0"].kill()

	l := e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1})
	defer l.Close()
	if st := l.Stats(); st.End != 20 {
		t.Fatalf("the log taken without fencing ends at %d, want 20 (what n1 and n2 both hold)", st.End)
	}
	r, err := l.NewReader(30, false)
	if err != nil {
		t.Fatalf("a reader at 30, acknowledged by the dead owner: %v", err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = r.Next(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a reader past the end the log knows: %v, want it to wait", err)
	}
	if _, err := l.NewReader(20, false); err != nil {
		t.Fatalf("a reader at the end: %v", err)
	}

	e.Writer(l) // recovers the segment: n1 and n2 answer, n1 holds 5
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for want := 30; want < 50; want++ {
		got, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("read after recovery: %v", err)
		}
		if got.Offset != uint64(want) || string(got.Payload) != fmt.Sprintf("f-%d", want) {
			t.Fatalf("read offset %d %q, want %d f-%d", got.Offset, got.Payload, want, want)
		}
	}
}

// TestQuorumCloseDuringFence closes a log while a writer's Fence recovers
// its open segment, as a node does when it gives the log up to another
// mid-recovery: the Fence fails with ErrClosed, and nothing panics.
func TestQuorumCloseDuringFence(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	old := e.leftOpen(c.ids, 2)
	c.addFragments(t, replica.SegmentID{Log: 7, Seq: 1}, old, map[string]int{"n0": 3, "n1": 3, "n2": 3})
	l := e.open(Options{Replicas: c.replicas(quorum.Default)})
	gate := make(chan struct{})
	for _, n := range c.nodes {
		n.fencing = gate
	}
	epoch, err := e.Store.BumpEpoch(context.Background(), "l")
	if err != nil {
		t.Fatal(err)
	}
	fenced := make(chan error, 1)
	go func() { fenced <- l.Fence(context.Background(), epoch, nil) }()
	// The Fence is under way once it fences the replicas.
	for c.nodes["n0"].waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if err := <-fenced; !errors.Is(err, rpcerr.ErrClosed) {
		t.Fatalf("a Fence that the log's Close overtook: %v, want rpcerr.ErrClosed", err)
	}
}
