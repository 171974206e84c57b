//go:build test

package milvus

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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

// etcdChildEnv, set in the environment of this test binary run again, makes
// it an etcd member instead of running the tests: "dir client-host:port
// peer-host:port". The member is a process of its own, as in test/e2e: an
// etcd inside the test process, slowed by the tests' own work (and the race
// detector), answered the nodes' lease renewals late enough, on a loaded
// machine, for nodes with a 2 s lease to lose it and exit.
const etcdChildEnv = "TERN_MILVUS_ETCD_CHILD"

func init() {
	if spec := os.Getenv(etcdChildEnv); spec != "" {
		os.Exit(etcdChild(strings.Fields(spec)))
	}
}

// etcdChild runs one etcd member until it is killed (Pdeathsig: with the
// test binary at the latest), and prints "ready" once it serves.
func etcdChild(args []string) int {
	if len(args) != 3 {
		fmt.Println("error: want dir client peer")
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "m0", args[0]
	clientURL, peerURL := url.URL{Scheme: "http", Host: args[1]}, url.URL{Scheme: "http", Host: args[2]}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = "m0=" + peerURL.String()
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("error:", <-e.Err())
	return 1
}

// startEtcd starts a single-member etcd, a child process, on free loopback
// ports with its data in a temporary directory, until the test ends. It
// returns the client endpoint (host:port) and a client of it.
func startEtcd(t *testing.T) (string, *clientv3.Client) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		client, peer := stableAddr(t), stableAddr(t)
		out := new(syncBuffer)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), etcdChildEnv+"="+strings.Join([]string{t.TempDir(), client, peer}, " "))
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-done
		})
		if !etcdReady(t, out, done, attempt < 3) {
			continue // a port was taken: other ports
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return client, cli
	}
}

// etcdReady waits until the etcd child says "ready". With retry, a child
// that exited because a port was taken returns false; anything else that
// keeps it from being ready fails the test.
func etcdReady(t *testing.T, out *syncBuffer, done chan struct{}, retry bool) bool {
	t.Helper()
	deadline := time.After(serveReadyTimeout)
	for !strings.Contains(out.tail(1<<10), "ready") {
		select {
		case <-done:
			if strings.Contains(out.tail(1<<10), "ready") {
				return true
			}
			if retry && strings.Contains(out.tail(4<<10), "address already in use") {
				return false
			}
			t.Fatalf("etcd exited before it was ready: %s", out.tail(4<<10))
		case <-deadline:
			t.Fatalf("etcd was not ready within %v: %s", serveReadyTimeout, out.tail(4<<10))
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
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
