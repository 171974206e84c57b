package monitoring

import (
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	clientv3 "go.etcd.io/etcd/client/v3"

	dto "github.com/prometheus/client_model/go"

	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/certs/certstest"
	"github.com/ternwal/tern/internal/miniotest"
)

// fromPrometheus are the series Prometheus makes itself rather than scrapes:
// no server can export them.
var fromPrometheus = []string{"up"}

// TestMetricsExported starts a standalone server (TLS, an object store)
// and a cluster of three nodes (an etcd, the same object store), drives
// appends, reads, a subscription, an object log and a quorum log through
// them, kills a node under a quorum log, and checks that every metric a
// dashboard panel or an alerting rule queries is exported: the server
// dashboard's by the standalone server, the cluster dashboard's by the
// nodes, the rules' by one or the other.
func TestMetricsExported(t *testing.T) {
	dashboards := loadDashboards(t)
	rules := loadRules(t)
	minio := miniotest.Start(t)
	env := []string{"AWS_ACCESS_KEY_ID=" + minio.AccessKey, "AWS_SECRET_ACCESS_KEY=" + minio.SecretKey}
	storage := func(prefix string) string {
		return "s3://" + minio.Bucket + "/" + prefix + "?endpoint=" + minio.Endpoint + "&tls=false"
	}

	standalone := standaloneMetrics(t, env, storage("standalone"))
	cluster := clusterMetrics(t, env, storage("cluster"))

	check := func(what string, exprs []string, mfs map[string]*dto.MetricFamily) {
		t.Helper()
		names := map[string]bool{}
		for _, e := range exprs {
			pe, err := parseExpr(e)
			if err != nil {
				t.Fatalf("%s: %s: %v", what, e, err)
			}
			metricNames(pe, names)
		}
		if len(names) == 0 {
			t.Fatalf("%s: no metric names found", what)
		}
		t.Logf("%s queries %d metrics: %v", what, len(names), slices.Sorted(maps.Keys(names)))
		for _, n := range slices.Sorted(maps.Keys(names)) {
			if !exported(mfs, n) && !slices.Contains(fromPrometheus, n) {
				t.Errorf("%s queries %s, which the servers do not export", what, n)
			}
		}
	}
	check("deploy/grafana/tern-server.json", panelExprs(dashboards["tern-server.json"]), standalone)
	check("deploy/grafana/tern-cluster.json", panelExprs(dashboards["tern-cluster.json"]), cluster)
	var ruleExprs []string
	for _, r := range rules {
		ruleExprs = append(ruleExprs, r.Expr)
	}
	both := map[string]*dto.MetricFamily{}
	merge(both, standalone)
	merge(both, cluster)
	check("deploy/prometheus/alerts.yml", ruleExprs, both)
}

func panelExprs(d *dashboard) []string {
	var out []string
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// standaloneMetrics runs a standalone server with TLS and an object
// store, drives a local log (appends, a follower, a subscription) and an
// object log through it, and returns what it exports.
func standaloneMetrics(t *testing.T, env []string, storage string) map[string]*dto.MetricFamily {
	ca := certstest.NewCA(t, "tern monitoring test CA")
	leaf := ca.Issue(t, certstest.LeafOptions{CommonName: "127.0.0.1", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	leaf.WriteFiles(t, certFile, keyFile)
	clientTLS := &tls.Config{RootCAs: ca.Pool()}
	s := startServer(t, "standalone", env, clientTLS, "--storage", storage, "--tls-cert", certFile, "--tls-key", keyFile)

	ctx := ctxFor(t, 2*time.Minute)
	c, err := client.Open(ctx, client.Options{Server: s.addr, TLS: clientTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, mode := range []client.Mode{client.ModeLocal, client.ModeObject} {
		l, err := c.CreateLog(ctx, "m-"+string(mode), client.LogOptions{Mode: mode})
		if err != nil {
			t.Fatalf("create a %s log: %v", mode, err)
		}
		if _, err := l.CreateSubscription(ctx, "s", client.SubOptions{}); err != nil {
			t.Fatal(err)
		}
		r, err := l.OpenReader(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		sub, err := l.Subscribe(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		appendN(t, l, 10)
		for range 10 {
			if _, err := r.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for range 5 {
			e, err := sub.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.Ack(e.Offset); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The readers and subscribers keep their streams open until the
	// function returns, so the lag metrics have samples.
	// The acknowledgements reach the server after Ack returns.
	s.waitFor(t, "the subscriptions' lag to be 5 (10 entries, 5 acknowledged)", func(mfs map[string]*dto.MetricFamily) bool {
		return total(mfs["tern_subscription_lag_max_entries"]) == 5
	})
	mfs := s.scrape(t)
	// The hooks behind the new metrics observe what was driven above.
	for name, least := range map[string]float64{
		"tern_fsync_duration_seconds":          1,  // the local log's group commits
		"tern_object_request_duration_seconds": 1,  // the object log's PUTs
		"tern_read_lag_entries":                2,  // the two open readers
		"tern_subscription_lag_entries":        2,  // the two open subscribers
		"tern_append_entries_total":            20, // both logs
	} {
		if got := total(mfs[name]); got < least {
			t.Errorf("the standalone server's %s is %v, want at least %v", name, got, least)
		}
	}
	return mfs
}

// total is the sum of a family's counters and gauges, or of its
// histograms' sample counts; 0 for nil.
func total(mf *dto.MetricFamily) float64 {
	var sum float64
	for _, m := range mf.GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
	}
	return sum
}

// appendN appends n entries to l through a writer of its own.
func appendN(t *testing.T, l *client.Log, n int) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range n {
		if _, err := w.Append(ctx, client.Entry{Payload: fmt.Appendf(nil, "entry %d", i)}); err != nil {
			t.Fatalf("append to %s: %v", l.Name(), err)
		}
	}
}

// clusterMetrics runs three nodes on an etcd and an object store, appends
// to a quorum log, kills a node of its ensemble that does not own it so
// that the owner drops that replica, and returns what the live nodes
// export, together.
func clusterMetrics(t *testing.T, env []string, storage string) map[string]*dto.MetricFamily {
	etcd := startEtcd(t)
	nodes := map[string]*server{}
	var addrs []string
	for i := range 3 {
		id := fmt.Sprintf("n%d", i)
		nodes[id] = startServer(t, id, env, nil, "--etcd", etcd, "--node-id", id, "--node-ttl", "2s", "--storage", storage)
		addrs = append(addrs, nodes[id].addr)
	}

	ctx := ctxFor(t, 2*time.Minute)
	c, err := client.Open(ctx, client.Options{Server: addrs[0], Nodes: addrs[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.CreateLog(ctx, "q", client.LogOptions{Mode: client.ModeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	// One writer before and after the kill: its segment's ensemble holds
	// the killed node.
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 10 {
		if _, err := w.Append(ctx, client.Entry{Payload: fmt.Appendf(nil, "entry %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, etcd, info.ID)
	for id, n := range nodes {
		if id != owner {
			n.kill()
			delete(nodes, id)
			break
		}
	}
	// The owner finds the replica gone when its stream breaks, or at this
	// append, which may fail while no new ensemble can be chosen: what
	// matters here is the metric.
	w.Append(ctxFor(t, 10*time.Second), client.Entry{Payload: []byte("after the kill")})
	nodes[owner].waitFor(t, "the owner to drop the killed replica", func(mfs map[string]*dto.MetricFamily) bool {
		return total(mfs["tern_quorum_replica_lost_total"]) > 0
	})
	if got := total(nodes[owner].scrape(t)["tern_cluster_nodes_live"]); got < 2 || got > 3 {
		t.Errorf("the owner sees %v live nodes, want 2 or 3", got)
	}

	all := map[string]*dto.MetricFamily{}
	for _, n := range nodes {
		merge(all, n.scrape(t))
	}
	return all
}

// ownerOf returns the ID of the node that serves the log with this ID,
// waiting for the cluster to place it.
func ownerOf(t *testing.T, endpoint string, logID uint64) string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := cli.Get(ctxFor(t, 5*time.Second), "/tern/owners/"+strconv.FormatUint(logID, 10))
		if err == nil && len(resp.Kvs) == 1 {
			return string(resp.Kvs[0].Value)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node owns log %d after 30s (%v)", logID, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startEtcd starts a single-member etcd in the test's process, on loopback
// ports, as the nodes' external etcd, and returns its client endpoint.
func startEtcd(t *testing.T) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "m0", t.TempDir()
	client, peer := url.URL{Scheme: "http", Host: freeAddr(t)}, url.URL{Scheme: "http", Host: freeAddr(t)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = "m0=" + peer.String()
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(startTimeout):
		t.Fatalf("etcd was not ready within %v", startTimeout)
	}
	return client.Host
}
