package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/miniotest"
)

// nodeTTL is the nodes' lease in the cluster tests: a dead owner's logs
// move after it.
const nodeTTL = "2s"

// testCluster is four tern serve nodes on an etcd of three members (each a
// process) and one MinIO.
type testCluster struct {
	nodes map[string]*server
	etcd  *clientv3.Client

	etcdMembers *etcdCluster
	etcdProxies []*toxiproxy.Proxy // the nodes reach each etcd member through one
	minio       *miniotest.Server
	s3          *s3Faults // in front of minio: the nodes' object store
}

func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	c, start := startShared(t)
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		c.nodes[id] = start(t.TempDir(), freeAddr(t), "--node-id", id)
	}
	return c
}

// startShared starts what the nodes of a cluster share, an etcd of three
// members and a MinIO, and returns the cluster without nodes, and how to
// start a node with its data directory, gRPC address and more flags.
func startShared(t *testing.T) (*testCluster, func(data, addr string, args ...string) *server) {
	t.Helper()
	c := &testCluster{nodes: map[string]*server{}}
	e := startEtcdCluster(t, 3)
	c.etcdMembers = e
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	// The nodes reach etcd through proxies that can black-hole it, as if
	// it were paused; the test's clients reach it directly.
	ts := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	var through []string
	for i, ep := range e.Endpoints() {
		p := toxiproxy.NewProxy(ts, fmt.Sprintf("etcd-m%d", i), "127.0.0.1:0", ep)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		c.etcdProxies = append(c.etcdProxies, p)
		through = append(through, p.Listen)
	}
	m := miniotest.Start(t)
	s3 := startS3Faults(t, m.Endpoint)
	env := []string{"AWS_ACCESS_KEY_ID=" + m.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.SecretKey}
	start := func(data, addr string, args ...string) *server {
		return startServerAt(t, data, addr, env, append([]string{"--node-ttl", nodeTTL,
			"--etcd", strings.Join(through, ","), "--storage", "s3://" + m.Bucket + "/cluster?endpoint=" + s3.Endpoint + "&tls=false"}, args...)...)
	}
	c.etcd, c.minio, c.s3 = cli, m, s3
	return c, start
}

// stopEtcd kills every member of the cluster's etcd with -9, keeping their
// data and ports.
func (c *testCluster) stopEtcd() { c.etcdMembers.killAll() }

// startEtcd starts the cluster's etcd again after stopEtcd.
func (c *testCluster) startEtcd(t *testing.T) {
	t.Helper()
	if !c.etcdMembers.startAll() {
		t.Fatal("an etcd member's port was taken while it was down")
	}
}

// owner returns the ID of the node that serves the only log, waiting while
// it moves (a node that joins may take it over).
func (c *testCluster) owner(t *testing.T) string {
	t.Helper()
	return c.ownerOtherThan(t, "")
}

// ownerOtherThan returns the ID of the node that serves the only log, once
// that is another node than old.
func (c *testCluster) ownerOtherThan(t *testing.T, old string) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := c.etcd.Get(t.Context(), "/tern/owners/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) != old {
			return string(resp.Kvs[0].Value)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node but %q served the log within %v", old, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openEnsemble returns the ensemble of the only log's open segment, from
// its metadata, waiting while the log rolls to a new one.
func (c *testCluster) openEnsemble(t *testing.T) []string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := c.etcd.Get(t.Context(), "/tern/logs/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		var last []byte
		for _, kv := range resp.Kvs { // sorted by key; segment keys are zero-padded
			if strings.Contains(string(kv.Key), "/segments/") {
				last = kv.Value
			}
		}
		var seg struct {
			Sealed   bool     `json:"sealed"`
			Ensemble []string `json:"ensemble"`
		}
		if err := json.Unmarshal(last, &seg); err == nil && !seg.Sealed && len(seg.Ensemble) > 0 {
			return seg.Ensemble
		}
		if time.Now().After(deadline) {
			t.Fatalf("no open segment within %v; the last is %s", waitTimeout, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// acked is what a writer had acknowledged: payloads by offset.
type acked struct {
	mu      sync.Mutex
	entries map[tern.Offset]string
	changed chan struct{}
}

func (a *acked) add(off tern.Offset, p string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries[off] = p
	close(a.changed)
	a.changed = make(chan struct{})
}

// waitMore waits until n more entries are acknowledged.
func (a *acked) waitMore(t *testing.T, n int, what string) {
	t.Helper()
	a.mu.Lock()
	want := len(a.entries) + n
	a.mu.Unlock()
	deadline := time.After(waitTimeout)
	for {
		a.mu.Lock()
		got, changed := len(a.entries), a.changed
		a.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: %d entries acknowledged, waited for %d", what, got, want)
		}
	}
}

// TestClusterFailures runs steady appends to a quorum log on four nodes
// while it kills -9 a replica, then the owner, then pauses a node with
// SIGSTOP and resumes it: every acknowledged entry is read back at its
// offset, offsets are dense, and no entry is there twice.
func TestClusterFailures(t *testing.T) {
	c := startCluster(t, 4)
	ap := c.startAppending(t, tern.LogOptions{Mode: tern.ModeQuorum, SegmentBytes: 256 << 10}, func(id string) string { return c.nodes[id].addr })
	a, owner, seed := ap.acked, ap.owner, ap.seed
	a.waitMore(t, 300, "before the failures")

	// A replica of the open segment, neither the owner nor the seed.
	var replica string
	for _, id := range c.openEnsemble(t) {
		if id != owner && id != seed {
			replica = id
			break
		}
	}
	c.nodes[replica].kill9()
	a.waitMore(t, 300, "after kill -9 of a replica")
	c.nodes[replica].restart()

	c.nodes[owner].kill9()
	a.waitMore(t, 300, "after kill -9 of the owner")
	c.nodes[owner].restart()

	// Any node but the seed and the owner.
	var paused string
	for _, id := range []string{"n0", "n1", "n2", "n3"} {
		if id != seed && id != c.owner(t) {
			paused = id
			break
		}
	}
	if err := c.nodes[paused].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	a.waitMore(t, 300, "with a node paused")
	if err := c.nodes[paused].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	a.waitMore(t, 300, "after the paused node resumed")
	entries := ap.stop(t)
	end := checkAcked(t, ap.log, entries)
	t.Logf("%d entries acknowledged through the failures, %d read", len(entries), end)
}

// appending is a steady append to the quorum log "q" of a cluster.
type appending struct {
	log         *tern.Log
	owner, seed string // the node that serves the log, and the client's first
	acked       *acked
	stop        func(t *testing.T) map[tern.Offset]string // ends the appends, and returns what was acknowledged
}

// startAppending creates the log "q" with opts through node n0, lets a node
// take it, and appends to it one entry at a time, through a client whose
// first node is another (addr gives a node's address), until stop.
func (c *testCluster) startAppending(t *testing.T, opts tern.LogOptions, addr func(id string) string) *appending {
	t.Helper()
	ctx := t.Context()
	first := openClient(t, addr("n0"))
	if _, err := first.CreateLog(ctx, "q", opts); err != nil {
		t.Fatal(err)
	}
	l, err := first.OpenLog(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.OpenWriter(ctx); err != nil { // takes the log somewhere
		t.Fatal(err)
	}
	ap := &appending{owner: c.owner(t), seed: "n0", acked: &acked{entries: map[tern.Offset]string{}, changed: make(chan struct{})}}
	if ap.seed == ap.owner {
		ap.seed = "n1"
	}
	if ap.log, err = openClient(t, addr(ap.seed)).OpenLog(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- appendUntil(ap.log, ap.acked, stop) }()
	stopOnce := sync.OnceValue(func() error {
		close(stop)
		return <-done
	})
	t.Cleanup(func() { stopOnce() })
	ap.stop = func(t *testing.T) map[tern.Offset]string {
		t.Helper()
		if err := stopOnce(); err != nil {
			t.Fatal(err)
		}
		ap.acked.mu.Lock()
		defer ap.acked.mu.Unlock()
		return ap.acked.entries
	}
	return ap
}

// checkAcked reads l from its start to the end of what was acknowledged,
// and checks that the offsets are dense, that no payload is there twice,
// and that every acknowledged entry is at its offset. It returns the end.
func checkAcked(t *testing.T, l *tern.Log, entries map[tern.Offset]string) tern.Offset {
	t.Helper()
	var end tern.Offset
	for off := range entries {
		end = max(end, off+1)
	}
	seen := map[string]tern.Offset{}
	for _, e := range readAll(t, l, 0, end) { // dense offsets
		p := string(e.Payload)
		if at, dup := seen[p]; dup {
			t.Fatalf("%q at offsets %d and %d", p, at, e.Offset)
		}
		seen[p] = e.Offset
		if want, ok := entries[e.Offset]; ok && want != p {
			t.Fatalf("offset %d holds %q, and %q was acknowledged there", e.Offset, p, want)
		}
	}
	return end
}

// appendUntil appends entries one at a time until stop closes, opening a
// new writer whenever the one it has fails, and records what was
// acknowledged. An append that fails is not retried: its payload is never
// used again, so that a duplicate would show.
func appendUntil(l *tern.Log, a *acked, stop chan struct{}) error {
	ctx := context.Background()
	var w *tern.Writer
	failures := 0
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		if w == nil {
			var err error
			octx, cancel := context.WithTimeout(ctx, 5*time.Second)
			w, err = l.OpenWriter(octx)
			cancel()
			if err != nil {
				if failures++; failures > 300 {
					return fmt.Errorf("no writer after %d tries: %w", failures, err)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			failures = 0
		}
		p := "e-" + strconv.Itoa(i)
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		off, err := w.Append(actx, tern.Entry{Payload: []byte(p)})
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				w.Close()
			}
			w = nil
			continue
		}
		a.add(off, p)
	}
}
