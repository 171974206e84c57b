//go:build test

package milvus

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/ternwal/tern/internal/miniotest"
)

// clusterNodeTTL is the nodes' lease: a dead owner that the others do not
// evict at once loses its logs at most this long after its death.
const clusterNodeTTL = "2s"

// etcdRoot is tern serve's default --etcd-root.
const etcdRoot = "/tern/"

// startEtcd starts a single-member etcd in the test process, on a free
// loopback port with its data in a temporary directory, until the test
// ends. It returns the client endpoint (host:port) and a client of it.
func startEtcd(t *testing.T) (string, *clientv3.Client) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		client, peer := freeAddr(t), freeAddr(t)
		cfg := embed.NewConfig()
		cfg.Name, cfg.Dir = "m0", t.TempDir()
		clientURL, peerURL := url.URL{Scheme: "http", Host: client}, url.URL{Scheme: "http", Host: peer}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
		cfg.InitialCluster = "m0=" + peerURL.String()
		cfg.LogLevel = "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			// A port found free may be taken before etcd binds it.
			if attempt < 3 && strings.Contains(err.Error(), "address already in use") {
				continue
			}
			t.Fatalf("start etcd: %v", err)
		}
		t.Cleanup(e.Close)
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			t.Fatalf("etcd: %v", err)
		case <-time.After(serveReadyTimeout):
			t.Fatalf("etcd was not ready within %v", serveReadyTimeout)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return client, cli
	}
}

// minioEnv is the environment that gives tern serve the credentials of m.
func minioEnv(m *miniotest.Server) []string {
	return []string{"AWS_ACCESS_KEY_ID=" + m.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.SecretKey}
}

// storageURL is the --storage of a server that keeps its objects under
// prefix in m's bucket.
func storageURL(m *miniotest.Server, prefix string) string {
	return "s3://" + m.Bucket + "/" + prefix + "?endpoint=" + m.Endpoint + "&tls=false"
}

// ternCluster is n `tern serve` nodes, n0, n1, ..., on one etcd (in the test
// process) and one MinIO, with the nodes' lease at clusterNodeTTL.
type ternCluster struct {
	nodes []*ternServer // nodes[i] is node "n<i>"
	etcd  *clientv3.Client
}

func startTernCluster(t *testing.T, n int) *ternCluster {
	t.Helper()
	endpoint, cli := startEtcd(t)
	m := miniotest.Start(t)
	c := &ternCluster{etcd: cli}
	for i := range n {
		id := "n" + strconv.Itoa(i)
		c.nodes = append(c.nodes, startTernServer(t, id, t.TempDir(), minioEnv(m),
			"--node-id", id, "--node-ttl", clusterNodeTTL, "--etcd", endpoint, "--storage", storageURL(m, "cluster")))
	}
	return c
}

// addrs are the nodes' gRPC addresses.
func (c *ternCluster) addrs() []string {
	var out []string
	for _, s := range c.nodes {
		out = append(out, s.addr)
	}
	return out
}

// node returns the node of ID id ("n<i>"), or nil.
func (c *ternCluster) node(id string) *ternServer {
	i, err := strconv.Atoi(strings.TrimPrefix(id, "n"))
	if err != nil || !strings.HasPrefix(id, "n") || i < 0 || i >= len(c.nodes) {
		return nil
	}
	return c.nodes[i]
}

// owner returns the node that serves the log named name now, from the
// metadata (<root>names/<name> gives its ID, <root>owners/<id> the node),
// or nil if no node does.
func (c *ternCluster) owner(ctx context.Context, name string) (*ternServer, error) {
	resp, err := c.etcd.Get(ctx, etcdRoot+"names/"+name)
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("no log %q in the metadata", name)
	}
	var rec struct {
		ID uint64 `json:"id"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return nil, fmt.Errorf("log %q: %w", name, err)
	}
	if resp, err = c.etcd.Get(ctx, etcdRoot+"owners/"+strconv.FormatUint(rec.ID, 10)); err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	s := c.node(string(resp.Kvs[0].Value))
	if s == nil {
		return nil, fmt.Errorf("log %q is served by %q, not a node of the test", name, resp.Kvs[0].Value)
	}
	return s, nil
}
