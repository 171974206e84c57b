package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ternwal/tern/internal/meta"
)

// waitTimeout bounds every wait on etcd; far above what any takes.
const waitTimeout = 20 * time.Second

// startEtcd runs an embedded etcd for the test and returns its endpoints.
func startEtcd(t *testing.T) []string {
	t.Helper()
	e, err := meta.StartEtcd(t.Context(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e.Endpoints()
}

// newClient returns a client of its own, as another process would have.
func newClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// join joins node id with a client of its own, and closes it at the end of
// the test.
func join(t *testing.T, endpoints []string, id string, ttl time.Duration) *Node {
	t.Helper()
	n, err := Join(t.Context(), Options{
		Client: newClient(t, endpoints),
		ID:     id,
		Addr:   "127.0.0.1:" + fmt.Sprint(7000+len(id)),
		TTL:    ttl,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Bounded: the test may have stopped etcd first.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return n
}

// waitFor waits on n's Changed until cond holds.
func waitFor(t *testing.T, n *Node, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		ch := n.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: timed out waiting for %s", n.ID(), what)
		}
	}
}

func ids(ms []Member) []string {
	var s []string
	for _, m := range ms {
		s = append(s, m.ID)
	}
	return s
}

func TestMembership(t *testing.T) {
	ep := startEtcd(t)
	a := join(t, ep, "a", 0)
	b := join(t, ep, "b", 0)
	c := join(t, ep, "c", 0)
	nodes := []*Node{a, b, c}
	for _, n := range nodes {
		waitFor(t, n, "a, b and c", func() bool { return slices.Equal(ids(n.Members()), []string{"a", "b", "c"}) })
		if m, ok := n.Member("b"); !ok || m != b.Self() {
			t.Errorf("%s: Member(b) = %v, %v; want %v", n.ID(), m, ok, b.Self())
		}
		if !n.Valid() {
			t.Errorf("%s: not Valid after Join", n.ID())
		}
	}

	// A second process with b's ID is refused while b lives.
	_, err := Join(t.Context(), Options{Client: newClient(t, ep), ID: "b", Addr: "127.0.0.1:9"})
	if !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("Join with a live node's ID: %v, want ErrDuplicateID", err)
	}

	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Lost():
	default:
		t.Error("b: Lost not closed by Close")
	}
	if b.Valid() {
		t.Error("b: Valid after Close")
	}
	for _, n := range []*Node{a, c} {
		waitFor(t, n, "b to leave", func() bool { return slices.Equal(ids(n.Members()), []string{"a", "c"}) })
	}

	// Once b has left, its ID is free again.
	b2 := join(t, ep, "b", 0)
	waitFor(t, a, "b to come back", func() bool { _, ok := a.Member("b"); return ok })
	if b2.Self() != (Member{ID: "b", Addr: "127.0.0.1:7001"}) { // join's address for an ID of 1 byte
		t.Errorf("b2: Self = %v", b2.Self())
	}
}

func TestJoinOptions(t *testing.T) {
	ep := startEtcd(t)
	cli := newClient(t, ep)
	for _, opts := range []Options{
		{ID: "a", Addr: "127.0.0.1:1"},
		{Client: cli, Addr: "127.0.0.1:1"},
		{Client: cli, ID: "a/b", Addr: "127.0.0.1:1"},
		{Client: cli, ID: "a", Addr: "no port"},
	} {
		if _, err := Join(t.Context(), opts); err == nil {
			t.Errorf("Join(%+v) succeeded", opts)
		}
	}
	// Roots separate clusters; a root gets its '/'.
	x, err := Join(t.Context(), Options{Client: cli, Root: "/x", ID: "a", Addr: "127.0.0.1:1", TTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(t.Context())
	if x.TTL() != 2*time.Second {
		t.Errorf("TTL() = %v, want 1.5s rounded up to 2s", x.TTL())
	}
	y := join(t, ep, "a", 0) // under /tern/
	resp, err := cli.Get(t.Context(), "/x/nodes/a")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != `{"addr":"127.0.0.1:1"}` {
		t.Errorf("/x/nodes/a = %v, %v", resp.Kvs, err)
	}
	if got := ids(y.Members()); !slices.Equal(got, []string{"a"}) {
		t.Errorf("members under /tern/: %v", got)
	}
}

func TestOwnership(t *testing.T) {
	ep := startEtcd(t)
	a := join(t, ep, "a", 0)
	b := join(t, ep, "b", 0)
	waitFor(t, a, "b", func() bool { _, ok := a.Member("b"); return ok })

	if err := a.Acquire(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(t.Context(), 7); err != nil {
		t.Fatalf("Acquire of an owned log again: %v", err)
	}
	err := b.Acquire(t.Context(), 7)
	var oe *OwnedError
	if !errors.Is(err, ErrOwned) || !errors.As(err, &oe) || oe.Owner != a.Self() || oe.LogID != 7 {
		t.Fatalf("conflicting Acquire: %v, want an OwnedError naming %v", err, a.Self())
	}

	waitFor(t, a, "a to own 7", func() bool { return slices.Equal(a.Owned(), []uint64{7}) })
	waitFor(t, b, "b to see a own 7", func() bool { m, ok := b.Owner(7); return ok && m == a.Self() })
	if got := b.Owned(); len(got) != 0 {
		t.Errorf("b owns %v", got)
	}
	if _, ok := b.Owner(8); ok {
		t.Errorf("b sees an owner of 8, which no node acquired")
	}

	// Releasing someone else's log does nothing.
	if err := b.Release(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(t.Context(), 7); !errors.Is(err, ErrOwned) {
		t.Fatalf("b's Release took a's log: b's Acquire then gives %v", err)
	}
	if err := a.Release(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, "7 released", func() bool { _, ok := b.Owner(7); return !ok })
	if err := b.Acquire(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, "b to own 7", func() bool { m, ok := a.Owner(7); return ok && m == b.Self() })
	waitFor(t, a, "a to own nothing", func() bool { return len(a.Owned()) == 0 })

	// Leaving takes the ownerships along.
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(t.Context(), 9); !errors.Is(err, ErrLost) {
		t.Errorf("Acquire after Close: %v, want ErrLost", err)
	}
	waitFor(t, a, "7 to be free", func() bool { _, ok := a.Owner(7); return !ok })
	if err := a.Acquire(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
}

func TestAbandon(t *testing.T) {
	ep := startEtcd(t)
	a := join(t, ep, "a", 0)
	c := join(t, ep, "c", time.Second)
	if err := c.Acquire(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, "c to own 3", func() bool { m, ok := a.Owner(3); return ok && m.ID == "c" })

	c.abandon()
	select {
	case <-c.Lost():
	case <-time.After(waitTimeout):
		t.Fatal("c: Lost not closed after its lease's TTL")
	}
	if c.Valid() {
		t.Error("c: Valid once Lost")
	}
	if got := c.Owned(); len(got) != 0 {
		t.Errorf("c: Owned() = %v after losing its lease", got)
	}
	if _, ok := c.Owner(3); ok {
		t.Error("c: still reports itself as the owner of 3")
	}

	waitFor(t, a, "c to expire", func() bool {
		_, member := a.Member("c")
		_, owned := a.Owner(3)
		return !member && !owned
	})
	if err := a.Acquire(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
}

// A node whose key is deleted from under it is lost, and its lease is
// revoked, so that its logs are free at once.
func TestNodeKeyDeleted(t *testing.T) {
	ep := startEtcd(t)
	a := join(t, ep, "a", 0)
	b := join(t, ep, "b", time.Minute) // only a revoke frees its log within the wait
	if err := b.Acquire(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, ep).Delete(t.Context(), "/tern/nodes/b"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Lost():
	case <-time.After(waitTimeout):
		t.Fatal("b: Lost not closed after its key was deleted")
	}
	waitFor(t, a, "b's log to be free", func() bool { _, ok := a.Owner(1); return !ok })
}

// A watch that breaks on a compacted revision reads the keys again: the view
// catches up with what it missed.
func TestWatchCompacted(t *testing.T) {
	ep := startEtcd(t)
	a := join(t, ep, "a", 0)
	a.abandon() // freeze a's view; its lease lives on for its TTL
	cli := newClient(t, ep)
	resp, err := cli.Get(t.Context(), "/tern/")
	if err != nil {
		t.Fatal(err)
	}
	missed := resp.Header.Revision + 1

	b := join(t, ep, "b", 0)
	if err := b.Acquire(t.Context(), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(t.Context(), "/tern/nodesx", "not a node"); err != nil {
		t.Fatal(err)
	}
	resp, err = cli.Get(t.Context(), "/tern/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(t.Context(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	a.wg.Add(1)
	go a.watch(ctx, missed)
	defer a.wg.Wait()
	defer cancel()
	waitFor(t, a, "b and its log", func() bool {
		m, ok := a.Owner(5)
		return slices.Equal(ids(a.Members()), []string{"a", "b"}) && ok && m == b.Self()
	})
}

// The view and the lease survive a restart of etcd shorter than the TTL.
func TestEtcdRestart(t *testing.T) {
	dir := t.TempDir()
	srv, err := meta.StartEtcd(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ep := srv.Endpoints()
	// etcd takes seconds to stop with clients connected, and the clients
	// seconds more to come back: a TTL well above that.
	const ttl = 30 * time.Second
	a := join(t, ep, "a", ttl)
	b := join(t, ep, "b", ttl)
	srv.Close()
	srv, err = meta.StartEtcd(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if !slices.Equal(srv.Endpoints(), ep) {
		t.Fatalf("etcd came back on %v, not %v", srv.Endpoints(), ep)
	}

	deadline := time.Now().Add(waitTimeout)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := b.Acquire(ctx, 5)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire after etcd restarted: %v", err)
		}
	}
	waitFor(t, a, "b to own 5", func() bool { m, ok := a.Owner(5); return ok && m == b.Self() })
	if !a.Valid() || !b.Valid() {
		t.Errorf("Valid after a short restart: a %v, b %v", a.Valid(), b.Valid())
	}
	for _, n := range []*Node{a, b} {
		if err := n.Close(t.Context()); err != nil {
			t.Error(err)
		}
	}
}

// The keys are those the package doc describes, on the node's lease.
func TestKeys(t *testing.T) {
	ep := startEtcd(t)
	a := join(t, ep, "a", 0)
	if err := a.Acquire(t.Context(), 12); err != nil {
		t.Fatal(err)
	}
	resp, err := newClient(t, ep).Get(t.Context(), "/tern/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range resp.Kvs {
		got = append(got, fmt.Sprintf("%s=%s lease:%v", kv.Key, kv.Value, clientv3.LeaseID(kv.Lease) == a.lease))
	}
	want := []string{`/tern/nodes/a={"addr":"127.0.0.1:7001"} lease:true`, "/tern/owners/12=a lease:true"}
	if !slices.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
}
