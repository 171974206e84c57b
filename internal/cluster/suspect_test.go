package cluster

import (
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// longTTL is a lease that cannot lapse during a test: what the tests see
// go, eviction made go.
const longTTL = time.Minute

func TestEvicted(t *testing.T) {
	for _, c := range []struct {
		suspecters, others int
		want               bool
	}{
		{0, 0, false}, // no one else to say so
		{0, 1, false},
		{1, 1, true}, // two members: the survivor decides
		{1, 2, false},
		{2, 2, true},
		{1, 3, false}, // one partitioned node of four evicts nobody
		{2, 3, true},
		{2, 4, false},
		{3, 4, true},
		{3, 5, true},
	} {
		if got := Evicted(c.suspecters, c.others); got != c.want {
			t.Errorf("Evicted(%d, %d) = %v, want %v", c.suspecters, c.others, got, c.want)
		}
	}
}

// lease returns m's lease as n's view has it, waiting for the view to
// show m.
func lease(t *testing.T, n *Node, m *Node) clientv3.LeaseID {
	t.Helper()
	waitFor(t, n, "member "+m.ID(), func() bool { _, ok := n.Lease(m.ID()); return ok })
	l, _ := n.Lease(m.ID())
	if l != m.lease {
		t.Fatalf("%s: view has lease %x for %s, which has %x", n.ID(), l, m.ID(), m.lease)
	}
	return l
}

// TestSuspectMajority: a member is evicted once a majority of the others
// suspect it, on the lease it has: its keys vanish at once, long before
// its lease could lapse, and the evicted node, alive, finds itself lost.
// A suspicion withdrawn, one of an old lease, and one by a node that is
// not Valid do not count.
func TestSuspectMajority(t *testing.T) {
	ep := startEtcd(t)
	a := join(t, ep, "a", longTTL)
	b := join(t, ep, "b", longTTL)
	c := join(t, ep, "c", longTTL)
	d := join(t, ep, "d", longTTL)
	if err := d.Acquire(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	dl := lease(t, a, d)
	lease(t, b, d)
	lease(t, c, d)

	// A suspicion of a lease d does not hold is not recorded.
	if ev, err := a.Suspect(t.Context(), "d", dl+1); ev || err != nil {
		t.Fatalf("suspect d on another lease: %v, %v", ev, err)
	}
	// One of three: d stays.
	if ev, err := a.Suspect(t.Context(), "d", dl); ev || err != nil {
		t.Fatalf("a suspects d: evicted %v, %v; want false, nil", ev, err)
	}
	// Counted again, it is not written again.
	before, err := a.cli.Get(t.Context(), a.suspectKey("d", "a"))
	if err != nil || len(before.Kvs) != 1 {
		t.Fatalf("a's suspicion of d: %v, %v", before, err)
	}
	if ev, err := a.Suspect(t.Context(), "d", dl); ev || err != nil {
		t.Fatalf("a suspects d again: evicted %v, %v; want false, nil", ev, err)
	}
	after, err := a.cli.Get(t.Context(), a.suspectKey("d", "a"))
	if err != nil || len(after.Kvs) != 1 || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Fatalf("a's suspicion of d, counted again, was written again: %v, %v", after, err)
	}
	// a takes it back: b's is one of three again.
	if err := a.Unsuspect(t.Context(), "d"); err != nil {
		t.Fatal(err)
	}
	if ev, err := b.Suspect(t.Context(), "d", dl); ev || err != nil {
		t.Fatalf("b suspects d after a withdrew: evicted %v, %v; want false, nil", ev, err)
	}
	if !d.Valid() || len(a.Members()) != 4 {
		t.Fatalf("d evicted by one suspicion of three: valid %v, members %v", d.Valid(), a.Members())
	}
	// A node that is not Valid suspects nobody.
	e := join(t, ep, "e", longTTL)
	lease(t, e, d)
	e.Close(t.Context())
	if _, err := e.Suspect(t.Context(), "d", dl); !errors.Is(err, ErrLost) {
		t.Fatalf("suspicion by a closed node: %v, want ErrLost", err)
	}
	// Two of three: d goes, with its ownership.
	if ev, err := c.Suspect(t.Context(), "d", dl); !ev || err != nil {
		t.Fatalf("c suspects d after b: evicted %v, %v; want true, nil", ev, err)
	}
	for _, n := range []*Node{a, b, c} {
		waitFor(t, n, "d evicted", func() bool {
			_, owned := n.Owner(7)
			return slices.Equal(ids(n.Members()), []string{"a", "b", "c"}) && !owned
		})
	}
	select {
	case <-d.Lost():
	case <-time.After(waitTimeout):
		t.Fatal("d, evicted, is not lost")
	}
	if d.Valid() || len(d.Owned()) != 0 {
		t.Errorf("d, evicted: valid %v, owns %v", d.Valid(), d.Owned())
	}
	if err := a.Acquire(t.Context(), 7); err != nil {
		t.Errorf("acquire d's log after the eviction: %v", err)
	}
	// The suspicions of d are withdrawn by their nodes (Detect does it when
	// d leaves the view); a suspicion is on its node's lease either way.
	for _, n := range []*Node{b, c} {
		if err := n.Unsuspect(t.Context(), "d"); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := a.cli.Get(t.Context(), a.suspectPrefix("d"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Errorf("suspicions of d left: %v, %v", resp, err)
	}
}

// TestSuspectTwoMembers: of two members, the one that suspects the other
// evicts it alone.
func TestSuspectTwoMembers(t *testing.T) {
	ep := startEtcd(t)
	a := join(t, ep, "a", longTTL)
	b := join(t, ep, "b", longTTL)
	if ev, err := a.Suspect(t.Context(), "b", lease(t, a, b)); !ev || err != nil {
		t.Fatalf("a suspects b: evicted %v, %v; want true, nil", ev, err)
	}
	select {
	case <-b.Lost():
	case <-time.After(waitTimeout):
		t.Fatal("b, evicted, is not lost")
	}
}

// TestSuspectLeaving: a member that said it is leaving (Leave) stops
// answering on purpose, and is not evicted however many suspect it; it
// stays a member until its Close.
func TestSuspectLeaving(t *testing.T) {
	ep := startEtcd(t)
	a := join(t, ep, "a", longTTL)
	b := join(t, ep, "b", longTTL)
	c := join(t, ep, "c", longTTL)
	cl := lease(t, a, c)
	lease(t, b, c)
	if err := c.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*Node{a, b} {
		if ev, err := n.Suspect(t.Context(), "c", cl); ev || err != nil {
			t.Fatalf("%s suspects c, leaving: evicted %v, %v; want false, nil", n.ID(), ev, err)
		}
	}
	if !c.Valid() {
		t.Fatal("c, leaving, is not Valid")
	}
	if m, ok := a.Member("c"); !ok || m != c.Self() {
		t.Fatalf("c, leaving: a's view has %v, %v", m, ok)
	}
}
