package meta_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/meta/metatest"
)

func TestEtcd(t *testing.T) {
	srv := startEtcd(t, t.TempDir())
	metatest.Run(t, func(t *testing.T) meta.Store {
		return openEtcd(t, srv.Endpoints(), meta.EtcdOptions{Root: "/" + t.Name() + "/"})
	})
}

// startEtcd starts an embedded etcd in dir and stops it when the test ends,
// if the test has not stopped it.
func startEtcd(t *testing.T, dir string) *meta.EmbeddedEtcd {
	t.Helper()
	srv, err := meta.StartEtcd(t.Context(), dir, nil)
	if err != nil {
		t.Fatalf("StartEtcd: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// openEtcd opens a store on endpoints with opts; the caller closes it.
func openEtcd(t *testing.T, endpoints []string, opts meta.EtcdOptions) *meta.Etcd {
	t.Helper()
	opts.Endpoints = endpoints
	s, err := meta.OpenEtcd(t.Context(), opts)
	if err != nil {
		t.Fatalf("OpenEtcd: %v", err)
	}
	return s
}

// The keys are those the comment at the top of etcd.go describes.
func TestEtcdKeys(t *testing.T) {
	ctx := t.Context()
	srv := startEtcd(t, t.TempDir())
	s := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{Root: "/r"}) // "/" appended
	defer s.Close()
	cli := rawClient(t, srv.Endpoints())

	if _, err := s.CreateLog(ctx, meta.Log{Name: "a/b"}); err != nil {
		t.Fatalf("CreateLog: %v", err)
	}
	if _, err := s.CreateSub(ctx, "a/b", meta.Sub{Name: "s/t", Cursor: 7}); err != nil {
		t.Fatalf("CreateSub: %v", err)
	}
	c, err := s.ClaimWriter(ctx, "a/b", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter: %v", err)
	}
	kvs := dump(t, cli, "/r/")
	want := []string{"/r/ids", "/r/logs/1/subs/s/t", "/r/logs/1/writer", "/r/names/a/b"}
	if got := keys(kvs); !slices.Equal(got, want) {
		t.Fatalf("keys = %q, want %q", got, want)
	}
	if v := string(kvs[0].Value); v != "1" {
		t.Errorf("ids = %q, want 1", v)
	}
	if v := string(kvs[1].Value); !strings.HasPrefix(v, `{"v":1,`) || !strings.Contains(v, `"cursor":7`) {
		t.Errorf("subscription record = %s", v)
	}
	if v, lease := string(kvs[2].Value), kvs[2].Lease; v != "1" || lease == 0 {
		t.Errorf("writer = %q on lease %d, want 1 on a lease", v, lease)
	}
	if v := string(kvs[3].Value); !strings.HasPrefix(v, `{"v":1,"id":1,`) || !strings.Contains(v, `"epoch":1`) {
		t.Errorf("log record = %s", v)
	}

	// Segment keys sort by Seq; segtail names the one created last.
	for _, seq := range []uint64{9, 10} {
		seg := meta.Segment{Seq: seq, Epoch: 1, Base: seq}
		if err := s.CreateSegment(ctx, "a/b", seg); err != nil {
			t.Fatalf("CreateSegment(%d): %v", seq, err)
		}
		seg.Sealed, seg.End = true, seq
		if _, err := s.SealSegment(ctx, "a/b", seg); err != nil {
			t.Fatalf("SealSegment(%d): %v", seq, err)
		}
	}
	kvs = dump(t, cli, "/r/logs/1/seg")
	want = []string{"/r/logs/1/segments/00000000000000000009", "/r/logs/1/segments/00000000000000000010", "/r/logs/1/segtail"}
	if got := keys(kvs); !slices.Equal(got, want) {
		t.Fatalf("segment keys = %q, want %q", got, want)
	}
	if v := string(kvs[1].Value); !strings.HasPrefix(v, `{"v":1,"epoch":1,"base":10,`) || !strings.Contains(v, `"sealed":true`) {
		t.Errorf("segment record = %s", v)
	}
	if v := string(kvs[2].Value); v != "10" {
		t.Errorf("segtail = %q, want 10", v)
	}

	if err := c.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := keys(dump(t, cli, "/r/")); slices.Contains(got, "/r/logs/1/writer") {
		t.Errorf("after Release, keys = %q, want no writer", got)
	}
	if err := s.DeleteLog(ctx, "a/b"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	if got := keys(dump(t, cli, "/r/")); !slices.Equal(got, []string{"/r/ids"}) {
		t.Errorf("after DeleteLog, keys = %q, want [/r/ids]", got)
	}
}

// rawClient is a plain etcd client, to look at the keys behind the store.
func rawClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func dump(t *testing.T, cli *clientv3.Client, prefix string) []*kvPair {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("Get(%q): %v", prefix, err)
	}
	var kvs []*kvPair
	for _, kv := range resp.Kvs {
		kvs = append(kvs, &kvPair{Key: string(kv.Key), Value: kv.Value, Lease: kv.Lease})
	}
	return kvs
}

type kvPair struct {
	Key   string
	Value []byte
	Lease int64
}

func keys(kvs []*kvPair) []string {
	var ks []string
	for _, kv := range kvs {
		ks = append(ks, kv.Key)
	}
	return ks
}

// Two stores on one etcd are two processes sharing the metadata: a claim
// through one loses the other's.
func TestEtcdTwoStores(t *testing.T) {
	ctx := t.Context()
	srv := startEtcd(t, t.TempDir())
	opts := meta.EtcdOptions{Root: "/shared/"}
	s1 := openEtcd(t, srv.Endpoints(), opts)
	defer s1.Close()
	s2 := openEtcd(t, srv.Endpoints(), opts)
	defer s2.Close()

	if _, err := s1.CreateLog(ctx, meta.Log{Name: "x"}); err != nil {
		t.Fatalf("CreateLog: %v", err)
	}
	if _, err := s2.CreateLog(ctx, meta.Log{Name: "x"}); !errors.Is(err, meta.ErrExist) {
		t.Fatalf("CreateLog through the second store: err = %v, want ErrExist", err)
	}
	c1, err := s1.ClaimWriter(ctx, "x", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter: %v", err)
	}
	c2, err := s2.ClaimWriter(ctx, "x", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter through the second store: %v", err)
	}
	if c2.Epoch() != c1.Epoch()+1 {
		t.Errorf("epochs %d, %d, want consecutive", c1.Epoch(), c2.Epoch())
	}
	waitLost(t, c1, "first store's claim after the second's")
	if c1.Valid() || !c2.Valid() {
		t.Errorf("Valid = %v, %v, want false, true", c1.Valid(), c2.Valid())
	}

	// The second store closing takes its claim, not the first store's
	// newer one.
	c3, err := s1.ClaimWriter(ctx, "x", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter: %v", err)
	}
	waitLost(t, c2, "second store's claim after the first's")
	if err := s2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !c3.Valid() {
		t.Error("claim not Valid after another store closed")
	}
	if l, err := s1.Log(ctx, "x"); err != nil || l.Epoch != 3 {
		t.Errorf("Log = %+v, %v, want Epoch 3", l, err)
	}
}

// A claim whose lease cannot be renewed is lost, and once etcd is back a
// new claim takes a new lease.
func TestEtcdLeaseLoss(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	srv := startEtcd(t, dir)
	var logs syncBuffer
	s := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{
		LeaseTTL: 2 * time.Second,
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
	})
	defer s.Close()
	if _, err := s.CreateLog(ctx, meta.Log{Name: "x"}); err != nil {
		t.Fatalf("CreateLog: %v", err)
	}
	c, err := s.ClaimWriter(ctx, "x", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter: %v", err)
	}
	if !c.Valid() {
		t.Fatal("new claim not Valid")
	}

	srv.Close()
	select {
	case <-c.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost not closed 30s after etcd stopped")
	}
	if c.Valid() {
		t.Error("claim Valid after its lease was lost")
	}
	if !strings.Contains(logs.String(), "lease lost") {
		t.Errorf("log has no lease lost:\n%s", logs.String())
	}

	// etcd comes back on the same ports, and the store reconnects.
	srv = startEtcd(t, dir)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c2, err := s.ClaimWriter(ctx, "x", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter after etcd restarted: %v", err)
	}
	if c2.Epoch() != 2 || !c2.Valid() {
		t.Errorf("claim after etcd restarted: Epoch %d, Valid %v, want 2, true", c2.Epoch(), c2.Valid())
	}
	if c.Valid() {
		t.Error("lost claim Valid again")
	}
}

// A lease revoked behind the store's back loses its claims, whether the
// renewals notice or the next ClaimWriter does; that ClaimWriter takes a new
// lease.
func TestEtcdLeaseRevoked(t *testing.T) {
	ctx := t.Context()
	srv := startEtcd(t, t.TempDir())
	s := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{Root: "/r/", LeaseTTL: 3 * time.Second})
	defer s.Close()
	cli := rawClient(t, srv.Endpoints())
	for _, name := range []string{"x", "y"} {
		if _, err := s.CreateLog(ctx, meta.Log{Name: name}); err != nil {
			t.Fatalf("CreateLog: %v", err)
		}
	}
	revoke := func(key string) int64 {
		t.Helper()
		lease := writerLease(t, cli, key)
		if _, err := cli.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		return lease
	}

	// The renewals find the lease gone.
	c1, err := s.ClaimWriter(ctx, "x", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter: %v", err)
	}
	revoke("/r/logs/1/writer")
	waitLost(t, c1, "claim on a revoked lease")
	if c1.Valid() {
		t.Error("claim on a revoked lease Valid")
	}

	// ClaimWriter finds it gone first.
	c2, err := s.ClaimWriter(ctx, "x", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter: %v", err)
	}
	lease := revoke("/r/logs/1/writer")
	c3, err := s.ClaimWriter(ctx, "y", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter right after the lease was revoked: %v", err)
	}
	if l := writerLease(t, cli, "/r/logs/2/writer"); l == lease {
		t.Errorf("new claim on the revoked lease %x", l)
	}
	waitLost(t, c2, "claim on a revoked lease")
	if !c3.Valid() {
		t.Error("claim on the new lease not Valid")
	}
}

func writerLease(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	kvs := dump(t, cli, key)
	if len(kvs) != 1 || kvs[0].Key != key {
		t.Fatalf("%s: %+v, want one key", key, kvs)
	}
	return kvs[0].Lease
}

// syncBuffer is a bytes.Buffer for a logger on several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Holding a claim, or checking it, costs no metadata request: only lease
// renewals, which are not counted, keep it valid.
func TestEtcdIdleRequests(t *testing.T) {
	ctx := t.Context()
	srv := startEtcd(t, t.TempDir())
	const ttl = 2 * time.Second
	s := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{LeaseTTL: ttl})
	defer s.Close()
	if n := s.Requests(); n != 0 {
		t.Errorf("Requests after OpenEtcd = %d, want 0", n)
	}
	if _, err := s.CreateLog(ctx, meta.Log{Name: "x"}); err != nil {
		t.Fatalf("CreateLog: %v", err)
	}
	c, err := s.ClaimWriter(ctx, "x", meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter: %v", err)
	}
	before := s.Requests()
	if before == 0 {
		t.Fatal("Requests = 0 after CreateLog and ClaimWriter")
	}
	// Past the TTL, so that the claim is valid only if renewals happened.
	end := time.Now().Add(ttl + ttl/2)
	for time.Now().Before(end) {
		if !c.Valid() {
			t.Fatal("claim not Valid while idle")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if after := s.Requests(); after != before {
		t.Errorf("Requests went from %d to %d while idle", before, after)
	}
	if _, err := s.Log(ctx, "x"); err != nil {
		t.Fatalf("Log: %v", err)
	}
	if after := s.Requests(); after != before+1 {
		t.Errorf("Log took %d requests, want 1", after-before)
	}
}

// A restart on the same directory keeps the data and the endpoints (the
// fallback on ports: TestEmbeddedEtcdLongPath).
func TestEtcdRestart(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	srv := startEtcd(t, dir)
	first := srv.Endpoints()
	s := openEtcd(t, first, meta.EtcdOptions{})
	l, err := s.CreateLog(ctx, meta.Log{Name: "x", Options: []byte("o")})
	if err != nil {
		t.Fatalf("CreateLog: %v", err)
	}
	if l.Epoch, err = s.BumpEpoch(ctx, "x"); err != nil {
		t.Fatalf("BumpEpoch: %v", err)
	}
	sub, err := s.CreateSub(ctx, "x", meta.Sub{Name: "s", Cursor: 3})
	if err != nil {
		t.Fatalf("CreateSub: %v", err)
	}
	s.Close()
	srv.Close()

	check := func(endpoints []string) {
		t.Helper()
		s := openEtcd(t, endpoints, meta.EtcdOptions{})
		defer s.Close()
		got, err := s.Log(ctx, "x")
		if err != nil {
			t.Fatalf("after restart, Log: %v", err)
		}
		if !metatest.Equal(got, l) {
			t.Errorf("after restart, Log = %+v, want %+v", got, l)
		}
		if got, err := s.Sub(ctx, "x", "s"); err != nil || !metatest.SubEqual(got, sub) {
			t.Errorf("after restart, Sub = %+v, %v, want %+v", got, err, sub)
		}
	}

	srv = startEtcd(t, dir)
	if got := srv.Endpoints(); !slices.Equal(got, first) {
		t.Errorf("after restart, Endpoints = %q, want %q", got, first)
	}
	check(srv.Endpoints())
}

func TestOpenEtcdUnreachable(t *testing.T) {
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	s, err := meta.OpenEtcd(t.Context(), meta.EtcdOptions{Endpoints: []string{addr}, DialTimeout: 500 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatal("OpenEtcd of a dead endpoint succeeded")
	}
	if want := "meta: cannot reach etcd at " + addr + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("OpenEtcd: err = %q, want it to start with %q", err, want)
	}
	if !errors.Is(err, rpcerr.ErrUnavailable) {
		t.Errorf("OpenEtcd: err = %v, want rpcerr.ErrUnavailable", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := meta.OpenEtcd(ctx, meta.EtcdOptions{Endpoints: []string{addr}}); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenEtcd with a canceled context: err = %v, want context.Canceled", err)
	}
	if _, err := meta.OpenEtcd(t.Context(), meta.EtcdOptions{}); err == nil {
		t.Error("OpenEtcd without endpoints succeeded")
	}
}

func waitLost(t *testing.T, c meta.Claim, what string) {
	t.Helper()
	select {
	case <-c.Lost():
	case <-time.After(metatest.LostTimeout):
		t.Fatalf("%s: Lost not closed after %v", what, metatest.LostTimeout)
	}
}
