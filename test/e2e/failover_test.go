package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ternwal/tern"
)

// failoverTTL is the nodes' lease in the fail-over tests: long enough that
// a log that moves before it could have lapsed moved because the others
// evicted its dead owner, not because its lease expired.
const failoverTTL = "10s"

// failoverModes are the modes whose logs move between nodes.
var failoverModes = []tern.Mode{tern.ModeQuorum, tern.ModeObject}

// TestFailoverKillOwner kills -9 the node that serves a log, quorum and
// object, in a cluster of four whose leases last 10 s: another node serves
// the log, and a new writer's append is acknowledged after every entry
// written before the kill, before the dead node's lease could have lapsed.
func TestFailoverKillOwner(t *testing.T) {
	for _, mode := range failoverModes {
		t.Run(string(mode), func(t *testing.T) {
			c, start := startShared(t)
			for i := range 4 {
				id := fmt.Sprintf("n%d", i)
				c.nodes[id] = start(t.TempDir(), freeAddr(t), "--node-id", id, "--node-ttl", failoverTTL)
			}
			ctx := t.Context()
			l, err := openClient(t, c.nodes["n0"].addr).CreateLog(ctx, "f", tern.LogOptions{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			w, err := l.OpenWriter(ctx)
			if err != nil {
				t.Fatal(err)
			}
			const n = 50
			for i := range n {
				if _, err := w.Append(ctx, tern.Entry{Payload: fmt.Appendf(nil, "e-%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			dead := c.owner(t)
			seed := "n0"
			if seed == dead {
				seed = "n1"
			}
			cl := openClient(t, c.nodes[seed].addr)
			// The writer stays open on the owner: its open segment is
			// recovered by the next owner.
			measured, left := c.leaseLeft(t, dead)
			killed := time.Now()
			c.nodes[dead].kill9()
			owner := c.ownerOtherThan(t, dead)
			took := time.Since(killed)

			log, err := cl.OpenLog(ctx, "f")
			if err != nil {
				t.Fatal(err)
			}
			off, tries := appendRetrying(t, log, "after")
			acked := time.Since(killed)
			t.Logf("%s killed: %s served the log %v after, a new writer's append was acknowledged %v after (%d tries); the lease had %v left",
				dead, owner, took.Round(time.Millisecond), acked.Round(time.Millisecond), tries, left)
			if time.Since(measured) >= left {
				t.Fatalf("the append was acknowledged %v after the kill, and the dead node's lease had %v left: it may have lapsed, so this says nothing of eviction", acked, left)
			}
			if off != n {
				t.Fatalf("append after the takeover at offset %d, want %d", off, n)
			}
			for i, e := range readAll(t, log, 0, n) {
				if want := fmt.Sprintf("e-%d", i); string(e.Payload) != want {
					t.Fatalf("offset %d holds %q, want %q", e.Offset, e.Payload, want)
				}
			}
		})
	}
}

// leaseLeft returns how long the lease of node id has left at most, as
// etcd has it, and when that was measured: the lease cannot lapse before.
func (c *testCluster) leaseLeft(t *testing.T, id string) (time.Time, time.Duration) {
	t.Helper()
	measured := time.Now()
	resp, err := c.etcd.Get(t.Context(), "/tern/nodes/"+id)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("node %s's key: %v, %v", id, resp, err)
	}
	ttl, err := c.etcd.TimeToLive(t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	return measured, time.Duration(ttl.TTL) * time.Second // whole seconds, rounded down
}

// appendRetrying appends one entry with a new writer of l, opening it
// again while the log moves, and returns its offset and the tries.
func appendRetrying(t *testing.T, l *tern.Log, payload string) (tern.Offset, int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for tries := 1; ; tries++ {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		w, err := l.OpenWriter(ctx)
		var off tern.Offset
		if err == nil {
			off, err = w.Append(ctx, tern.Entry{Payload: []byte(payload)})
			w.Close()
		}
		cancel()
		if err == nil {
			return off, tries
		}
		if time.Now().After(deadline) {
			t.Fatalf("no append acknowledged within %v: %v", waitTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isolatedCluster is a testCluster whose nodes the others and the clients
// reach through a proxy each, and which reach etcd through proxies of
// their own: a node can be cut off from both while it lives on.
type isolatedCluster struct {
	*testCluster
	proxies map[string]*toxiproxy.Proxy   // in front of each node
	etcd    map[string][]*toxiproxy.Proxy // each node's way to etcd
}

func startIsolatedCluster(t *testing.T, n int) *isolatedCluster {
	t.Helper()
	shared, start := startShared(t)
	ts := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	c := &isolatedCluster{testCluster: shared, proxies: map[string]*toxiproxy.Proxy{}, etcd: map[string][]*toxiproxy.Proxy{}}
	newProxy := func(name, upstream string) *toxiproxy.Proxy {
		p := toxiproxy.NewProxy(ts, name, "127.0.0.1:0", upstream)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		return p
	}
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		var through []string
		for j, ep := range shared.etcdMembers.Endpoints() {
			p := newProxy(fmt.Sprintf("%s-etcd-m%d", id, j), ep)
			c.etcd[id] = append(c.etcd[id], p)
			through = append(through, p.Listen)
		}
		p := newProxy(id, freeAddr(t))
		c.proxies[id] = p
		c.nodes[id] = start(t.TempDir(), p.Upstream, "--node-id", id, "--advertise", p.Listen,
			"--node-ttl", failoverTTL, "--etcd", strings.Join(through, ","))
	}
	return c
}

// isolate cuts node id off from the other nodes, which find its address
// refusing connections (as if it had died), and from etcd, which it no
// longer reaches to learn that it was evicted; it lives on, and whoever
// reaches its own address still talks to it.
func (c *isolatedCluster) isolate(t *testing.T, id string) {
	t.Helper()
	c.proxies[id].Stop()
	for _, p := range c.etcd[id] {
		blackhole(t, p)
	}
}

// TestFailoverIsolatedOwner is the safety test of fail-over. The node that
// serves a log, with a client of its own appending through it, is cut off
// from the other nodes and from etcd, alive: the others evict it, and a new
// writer opens on the node that takes the log over. No append that the
// isolated node's client sent after the new writer opened is acknowledged,
// and every entry acknowledged to either client is in the log at its
// offset, once: the old owner, fenced, acknowledged nothing that the new
// owner does not have.
func TestFailoverIsolatedOwner(t *testing.T) {
	for _, mode := range failoverModes {
		t.Run(string(mode), func(t *testing.T) {
			c := startIsolatedCluster(t, 4)
			ctx := t.Context()
			l, err := openClient(t, c.proxies["n0"].Listen).CreateLog(ctx, "s", tern.LogOptions{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			appendRetrying(t, l, "first") // places the log on a node
			old := c.owner(t)
			// The old owner's client reaches it directly: it is cut off
			// with it.
			oldLog, err := openClient(t, c.nodes[old].addr).OpenLog(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			var opened atomic.Bool
			a := startSafetyAppender(oldLog, &opened)
			a.acked.waitMore(t, 100, "through the owner before it is cut off")

			a.acked.mu.Lock()
			before := len(a.acked.entries)
			a.acked.mu.Unlock()
			c.isolate(t, old)
			owner := c.ownerOtherThan(t, old)
			seed := "n0"
			for seed == old || seed == owner {
				seed = "n" + strconv.Itoa(int(seed[1]-'0')+1)
			}
			newLog, err := openClient(t, c.proxies[seed].Listen).OpenLog(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			w := openWriterRetrying(t, newLog)
			opened.Store(true)
			t.Logf("%s cut off; %s serves the log, and a new writer is open on it", old, owner)
			b := map[tern.Offset]string{}
			for i := range 20 {
				p := "b-" + strconv.Itoa(i)
				off, err := w.Append(ctx, tern.Entry{Payload: []byte(p)})
				if err != nil {
					t.Fatalf("append through the new owner: %v", err)
				}
				b[off] = p
			}
			// The old owner's client goes on trying for a while.
			a.waitTriesAfterOpen(t, 5)
			aEntries, late := a.stop()
			if len(late) > 0 {
				t.Fatalf("%d appends sent to the cut-off owner after the new writer opened were acknowledged, at offsets %v", len(late), late)
			}
			for off, p := range aEntries {
				if bp, dup := b[off]; dup {
					t.Fatalf("offset %d acknowledged to both clients: %q through the old owner, %q through the new", off, p, bp)
				}
				b[off] = p
			}
			end := checkAcked(t, newLog, b)
			t.Logf("%d entries acknowledged through the old owner (%d after it was cut off), 20 through the new; %d read; the old owner's client then saw: %v",
				len(aEntries), len(aEntries)-before, end, a.lateErr)
		})
	}
}

// openWriterRetrying opens a writer of l, trying again while the log
// moves.
func openWriterRetrying(t *testing.T, l *tern.Log) *tern.Writer {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		w, err := l.OpenWriter(ctx)
		cancel()
		if err == nil {
			t.Cleanup(func() { w.Close() })
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("no writer within %v: %v", waitTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// safetyAppender appends to a log one entry at a time, with a writer it
// opens again after each failure, and tells apart the appends sent after
// opened was set.
type safetyAppender struct {
	acked   *acked
	mu      sync.Mutex
	late    []tern.Offset // acknowledged, though sent after opened
	tries   int           // sent after opened
	lateErr error         // the first error of those
	done    chan struct{}
	ended   chan struct{}
}

func startSafetyAppender(l *tern.Log, opened *atomic.Bool) *safetyAppender {
	a := &safetyAppender{acked: &acked{entries: map[tern.Offset]string{}, changed: make(chan struct{})},
		done: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(a.ended)
		var w *tern.Writer
		defer func() {
			if w != nil {
				w.Close()
			}
		}()
		for i := 0; ; i++ {
			select {
			case <-a.done:
				return
			default:
			}
			after := opened.Load()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var err error
			if w == nil {
				w, err = l.OpenWriter(ctx)
			}
			var off tern.Offset
			p := "a-" + strconv.Itoa(i)
			if err == nil {
				off, err = w.Append(ctx, tern.Entry{Payload: []byte(p)})
				if err != nil {
					w.Close()
					w = nil
				}
			}
			cancel()
			a.mu.Lock()
			if after {
				a.tries++
				if err == nil {
					a.late = append(a.late, off)
				} else if a.lateErr == nil {
					a.lateErr = err
				}
			}
			a.mu.Unlock()
			if err == nil {
				a.acked.add(off, p)
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	return a
}

// waitTriesAfterOpen waits until n appends were sent after the new writer
// opened.
func (a *safetyAppender) waitTriesAfterOpen(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		a.mu.Lock()
		tries := a.tries
		a.mu.Unlock()
		if tries >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d appends sent through the old owner after the new writer opened, want %d", tries, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the appends and returns what was acknowledged, and the
// offsets acknowledged though sent after the new writer opened.
func (a *safetyAppender) stop() (map[tern.Offset]string, []tern.Offset) {
	close(a.done)
	<-a.ended
	a.acked.mu.Lock()
	defer a.acked.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acked.entries, a.late
}

// TestFailoverStopOwner stops the node that serves a quorum log with
// SIGTERM, while a reader follows the log there: it says it is leaving
// before it stops answering the others, so they do not evict it while it
// ends its streams and closes its logs; it exits cleanly, and another node
// serves the log after every entry.
func TestFailoverStopOwner(t *testing.T) {
	c, start := startShared(t)
	for i := range 4 {
		id := fmt.Sprintf("n%d", i)
		c.nodes[id] = start(t.TempDir(), freeAddr(t), "--node-id", id, "--node-ttl", failoverTTL)
	}
	ctx := t.Context()
	l, err := openClient(t, c.nodes["n0"].addr).CreateLog(ctx, "f", tern.LogOptions{Mode: tern.ModeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if off, _ := appendRetrying(t, l, fmt.Sprintf("e-%d", i)); off != tern.Offset(i) {
			t.Fatalf("append %d at offset %d", i, off)
		}
	}
	old := c.owner(t)
	// A reader following the tail on the owner holds its shutdown for
	// the streams' grace period, 2 s, while it no longer accepts
	// connections.
	follow, err := openClient(t, c.nodes[old].addr).OpenLog(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	r, err := follow.OpenReader(ctx, n-1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.NextBatch(ctx, 1); err != nil { // the stream is open
		t.Fatal(err)
	}
	go r.NextBatch(ctx, 1) // waits for an entry; ends with the stream
	c.nodes[old].stop()    // exit code 0, or the test fails
	owner := c.ownerOtherThan(t, old)
	// It gave its lease up itself ("closed"): the others did not revoke it.
	for _, line := range strings.Split(c.nodes[old].stderr.String(), "\n") {
		if strings.Contains(line, `msg="cluster: lease lost"`) && !strings.Contains(line, `reason=closed`) {
			t.Errorf("%s, stopped with SIGTERM, was evicted as dead: %s", old, line)
		}
	}
	seed := "n0"
	if seed == old {
		seed = "n1"
	}
	log, err := openClient(t, c.nodes[seed].addr).OpenLog(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if off, _ := appendRetrying(t, log, "after"); off != n {
		t.Fatalf("append after %s stopped at offset %d, want %d; %s serves the log", old, off, n, owner)
	}
}
