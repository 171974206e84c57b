package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeNet is the network the detector tests' peers see: a node that is
// dead refuses every connection, and connections to it go down; a node
// cut off sees every other node's connections refused, as a node whose
// own network is broken would, while the others see it well.
type fakeNet struct {
	mu      sync.Mutex
	dead    map[string]bool
	cut     map[string]bool
	changed chan struct{}
}

func newFakeNet() *fakeNet {
	return &fakeNet{dead: map[string]bool{}, cut: map[string]bool{}, changed: make(chan struct{})}
}

func (f *fakeNet) set(m map[string]bool, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m[id] = true
	close(f.changed)
	f.changed = make(chan struct{})
}

// down reports whether from's connection to to is down.
func (f *fakeNet) down(from, to string) (bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead[to] || f.cut[from], f.changed
}

func (f *fakeNet) dial(from string) func(Member) (Peer, error) {
	return func(m Member) (Peer, error) { return &fakePeer{net: f, from: from, to: m.ID}, nil }
}

type fakePeer struct {
	net      *fakeNet
	from, to string
}

func (p *fakePeer) WaitDown(ctx context.Context) {
	for {
		down, changed := p.net.down(p.from, p.to)
		if down {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

func (p *fakePeer) Probe(context.Context) error {
	if down, _ := p.net.down(p.from, p.to); down {
		return ErrRefused
	}
	return nil
}

func (p *fakePeer) Close() error { return nil }

// detect runs n's detector on net until the test ends, or until the
// returned function stops it (a crash, for the detector).
func detect(t *testing.T, n *Node, net *fakeNet) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Detect(ctx, DetectOptions{Dial: net.dial(n.ID())})
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// TestDetectDead: of four nodes, one dies (its connections go down and
// its address refuses new ones) while its lease lives on: the other three
// suspect it, evict it, and its log's owner key goes long before its
// lease could have lapsed. The dead node, alive after all, finds itself
// lost.
func TestDetectDead(t *testing.T) {
	ep := startEtcd(t)
	net := newFakeNet()
	var nodes []*Node
	for _, id := range []string{"a", "b", "c", "d"} {
		n := join(t, ep, id, longTTL)
		nodes = append(nodes, n)
	}
	a, d := nodes[0], nodes[3]
	for _, n := range nodes {
		waitFor(t, n, "four members", func() bool { return len(n.Members()) == 4 })
	}
	stops := map[string]func(){}
	for _, n := range nodes {
		stops[n.ID()] = detect(t, n, net)
	}
	if err := d.Acquire(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, "d owns log 7", func() bool { m, ok := a.Owner(7); return ok && m.ID == "d" })

	stops["d"]() // d "dies": its detector stops, its lease lives on
	net.set(net.dead, "d")
	start := time.Now()
	for _, n := range nodes[:3] {
		waitFor(t, n, "d evicted", func() bool {
			_, owned := n.Owner(7)
			return slices.Equal(ids(n.Members()), []string{"a", "b", "c"}) && !owned
		})
	}
	t.Logf("d evicted %v after it died; its lease's TTL is %v", time.Since(start).Round(time.Millisecond), d.TTL())
	if time.Since(start) >= d.TTL() {
		t.Fatalf("d went after its TTL, %v: not evicted", d.TTL())
	}
	select {
	case <-d.Lost():
	case <-time.After(waitTimeout):
		t.Fatal("d, evicted, is not lost")
	}
	if err := a.Acquire(t.Context(), 7); err != nil {
		t.Fatalf("acquire d's log after the eviction: %v", err)
	}
	// The suspicions go with the suspect.
	waitSuspicions(t, a, "d", 0)
}

// TestDetectCutOff: one node of four whose own network is broken finds
// every other node refusing; its suspicions are one of three each, and
// nobody is evicted. The others, which still reach it, suspect nothing.
func TestDetectCutOff(t *testing.T) {
	ep := startEtcd(t)
	net := newFakeNet()
	var nodes []*Node
	for _, id := range []string{"a", "b", "c", "d"} {
		nodes = append(nodes, join(t, ep, id, longTTL))
	}
	for _, n := range nodes {
		waitFor(t, n, "four members", func() bool { return len(n.Members()) == 4 })
		detect(t, n, net)
	}
	net.set(net.cut, "a")
	for _, id := range []string{"b", "c", "d"} {
		waitSuspicions(t, nodes[0], id, 1)
	}
	// Each of a's suspicions was counted when it was recorded: one of three.
	for _, n := range nodes {
		if !n.Valid() || len(n.Members()) != 4 {
			t.Errorf("%s: valid %v, members %v; want all four valid", n.ID(), n.Valid(), ids(n.Members()))
		}
	}
}

// waitSuspicions waits until etcd holds want suspicions of member id.
func waitSuspicions(t *testing.T, n *Node, id string, want int64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := n.cli.Get(t.Context(), n.suspectPrefix(id), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d suspicions of %s, want %d", resp.Count, id, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scriptedPeer answers probes from a script, then as its last entry.
type scriptedPeer struct {
	answers []error
	probes  int
}

func (p *scriptedPeer) WaitDown(context.Context) {}
func (p *scriptedPeer) Close() error             { return nil }
func (p *scriptedPeer) Probe(ctx context.Context) error {
	err := p.answers[min(p.probes, len(p.answers)-1)]
	p.probes++
	if errors.Is(err, context.DeadlineExceeded) {
		<-ctx.Done() // no answer: the probe's timeout ends it
		return ctx.Err()
	}
	return err
}

// TestProbeVerdict: a member is found refused only after Probes refusals
// in a row, ProbeInterval apart; an answer, or a probe that times out,
// ends the series.
func TestProbeVerdict(t *testing.T) {
	refused := ErrRefused
	timeout := context.DeadlineExceeded
	opts := DetectOptions{}
	opts.defaults()
	for _, c := range []struct {
		name    string
		answers []error
		want    verdict
		probes  int
		took    time.Duration
	}{
		{"alive", []error{nil}, verdictAlive, 1, 0},
		{"dead", []error{refused}, verdictRefused, 3, 2 * opts.ProbeInterval},
		{"back on the third", []error{refused, refused, nil}, verdictAlive, 3, 2 * opts.ProbeInterval},
		{"no answer", []error{refused, timeout}, verdictUnknown, 2, opts.ProbeInterval + opts.ProbeTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &scriptedPeer{answers: c.answers}
				n := &Node{}
				start := time.Now()
				got := n.probe(t.Context(), p, opts, func() {})
				if got != c.want || p.probes != c.probes || time.Since(start) != c.took {
					t.Errorf("verdict %v after %d probes in %v; want %v after %d in %v", got, p.probes, time.Since(start), c.want, c.probes, c.took)
				}
			})
		})
	}
}
