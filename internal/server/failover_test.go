package server

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/cluster"
)

// deadFor is the network of the detectors in a test: it says which nodes
// find which others dead (their links down, their addresses refusing).
type deadFor struct {
	mu      sync.Mutex
	dead    map[[2]string]bool // {observer, member}
	changed chan struct{}
}

func (d *deadFor) set(observer, member string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead[[2]string{observer, member}] = true
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *deadFor) is(observer, member string) (bool, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dead[[2]string{observer, member}], d.changed
}

type deadLink struct {
	d                *deadFor
	observer, member string
}

func (l deadLink) WaitDown(ctx context.Context) {
	for {
		dead, changed := l.d.is(l.observer, l.member)
		if dead {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

func (l deadLink) Probe(context.Context) error {
	if dead, _ := l.d.is(l.observer, l.member); dead {
		return cluster.ErrRefused
	}
	return nil
}

func (deadLink) Close() error { return nil }

// TestCallWaitsForEviction: a call about a log, to a node that finds the
// log's owner refusing connections, waits for the owner's eviction rather
// than send the client to it. The eviction needs a second node of three
// to agree, so a call that did not wait would return before it.
func TestCallWaitsForEviction(t *testing.T) {
	tc := startCluster(t)
	nodes := map[string]*testNode{}
	d := &deadFor{dead: map[[2]string]bool{}, changed: make(chan struct{})}
	for _, id := range []string{"n0", "n1", "n2", "n3"} {
		n := tc.join(t, id)
		nodes[id] = n
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.node.Detect(ctx, cluster.DetectOptions{Dial: func(m cluster.Member) (cluster.Peer, error) {
				return deadLink{d: d, observer: id, member: m.ID}, nil
			}})
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	for _, n := range nodes {
		waitView(t, n, "four members", func() bool { return len(n.node.Members()) == 4 })
	}
	ids := nodes["n0"].createLogs(t, tern.ModeObject, "o")
	owner := assignee(ids["o"], nodes["n0"], nodes["n1"], nodes["n2"], nodes["n3"])
	waitOwners(t, nodes[owner], "the log placed", ids, func(string, uint64) string { return owner })
	var others []string
	for _, id := range []string{"n0", "n1", "n2", "n3"} {
		if id != owner {
			others = append(others, id)
		}
	}
	caller, second := nodes[others[0]], others[1]
	waitView(t, caller, "the owner in the caller's view", func() bool { m, ok := caller.node.Owner(ids["o"]); return ok && m.ID == owner })

	d.set(caller.node.ID(), owner)
	waitView(t, caller, "the owner refusing", func() bool { return caller.node.Refusing(owner) })
	routed := make(chan error, 1)
	go func() { routed <- caller.srv.route(t.Context(), "o") }()
	d.set(second, owner) // two of three: the owner is evicted
	err := <-routed
	// The second node's probes take 0.2 s: a call that did not wait
	// returned long before the eviction.
	if _, ok := caller.node.Member(owner); ok {
		t.Fatalf("the call returned (%v) while the dead owner %s was still a member", err, owner)
	}
	if err != nil && !errors.Is(err, rpcerr.ErrNotOwner) {
		t.Fatalf("route after the eviction: %v", err)
	}
}

// waitView waits on n's Changed until cond holds.
func waitView(t *testing.T, n *testNode, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	for {
		ch := n.node.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s: timed out waiting for %s", n.node.ID(), what)
		}
	}
}
