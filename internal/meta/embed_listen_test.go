package meta_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/ternwal/tern/internal/meta"
)

// socketOf returns the path of the unix socket of endpoint, and fails the
// test if endpoint is not a unix socket's.
func socketOf(t *testing.T, endpoint string) string {
	t.Helper()
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || !filepath.IsAbs(path) {
		t.Fatalf("endpoint %q is not unix:///PATH", endpoint)
	}
	return path
}

// checkPut puts a key through endpoints and reads it back.
func checkPut(t *testing.T, endpoints []string) {
	t.Helper()
	cli := rawClient(t, endpoints)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put through %q: %v", endpoints, err)
	}
	if resp, err := cli.Get(ctx, "k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get through %q: %v, %v", endpoints, resp, err)
	}
}

// The embedded etcd listens on unix sockets in its directory, which only
// this user can reach: the directory is 0700 (made so if it was not), the
// sockets 0600, and etcd's client dials the endpoints as they are.
func TestEmbeddedEtcdSockets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	srv := startEtcd(t, dir)
	eps := srv.Endpoints()
	if len(eps) != 1 {
		t.Fatalf("Endpoints = %q, want one", eps)
	}
	sock := socketOf(t, eps[0])
	if filepath.Dir(sock) != dir {
		t.Errorf("socket %s is not in the etcd directory %s", sock, dir)
	}
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("etcd directory mode %v, want 0700", perm)
	}
	socks := 0
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Type() != fs.ModeSocket {
			continue
		}
		socks++
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("socket %s has mode %v, want 0600", e.Name(), perm)
		}
	}
	if socks != 2 { // the client's and the peer's
		t.Errorf("%d sockets in %s, want 2", socks, dir)
	}
	if got, err := meta.EmbeddedEndpoints(dir); err != nil || !slices.Equal(got, eps) {
		t.Errorf("EmbeddedEndpoints = %q, %v, want %q", got, err, eps)
	}
	checkPut(t, eps)
	if _, err := os.Stat(filepath.Join(dir, "tern-etcd-ports")); err == nil {
		t.Error("an etcd on sockets left a ports file")
	}
}

// The socket answers no HTTP/JSON call of etcd's KV API: the gRPC gateway
// is off, so a POST to /v3/kv/deleterange deletes nothing.
func TestEmbeddedEtcdNoGateway(t *testing.T) {
	srv := startEtcd(t, t.TempDir())
	sock := socketOf(t, srv.Endpoints()[0])
	cli := rawClient(t, srv.Endpoints())
	if _, err := cli.Put(t.Context(), "k", "secret"); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer hc.CloseIdleConnections()
	post := func(path string) (int, string) {
		t.Helper()
		body := fmt.Sprintf(`{"key": %q}`, base64.StdEncoding.EncodeToString([]byte("k")))
		resp, err := hc.Post("http://localhost"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The socket speaks HTTP: what it answers, it answers here.
	if code, _ := post("/health"); code == 0 {
		t.Fatal("no HTTP answer on the socket")
	}
	value := base64.StdEncoding.EncodeToString([]byte("secret"))
	if code, body := post("/v3/kv/range"); code == http.StatusOK || strings.Contains(body, value) {
		t.Errorf("POST /v3/kv/range: %d %s: the gateway read the key", code, body)
	}
	if code, body := post("/v3/kv/deleterange"); code == http.StatusOK {
		t.Errorf("POST /v3/kv/deleterange: %d %s", code, body)
	}
	resp, err := cli.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "secret" {
		t.Fatalf("after POST /v3/kv/deleterange, the key is %v", resp.Kvs)
	}
}

// A start replaces the sockets a killed etcd left in its directory.
func TestEmbeddedEtcdStaleSockets(t *testing.T) {
	dir := t.TempDir()
	srv := startEtcd(t, dir)
	eps := srv.Endpoints()
	checkPut(t, eps)
	srv.Close()
	// What kill -9 leaves: socket files nothing listens on.
	for _, name := range []string{"client.sock", "peer.sock"} {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, name), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
	}
	srv = startEtcd(t, dir)
	if got := srv.Endpoints(); !slices.Equal(got, eps) {
		t.Errorf("after restart, Endpoints = %q, want %q", got, eps)
	}
	cli := rawClient(t, srv.Endpoints())
	if resp, err := cli.Get(t.Context(), "k"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("after restart, Get = %v, %v; want the key", resp, err)
	}
}

// A directory whose path is too long for a socket's gets loopback ports,
// with a warning; a restart finds the same ports, or new ones if they are
// taken.
func TestEmbeddedEtcdLongPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if n := len(filepath.Join(dir, "client.sock")); n <= 107 {
		t.Fatalf("the socket path is only %d bytes", n)
	}
	var logs bytes.Buffer
	srv, err := meta.StartEtcd(t.Context(), dir, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("StartEtcd: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	first := srv.Endpoints()
	if len(first) != 1 || !strings.HasPrefix(first[0], "127.0.0.1:") {
		t.Fatalf("Endpoints = %q, want 127.0.0.1:PORT", first)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "loopback ports") || !strings.Contains(logs.String(), "a unix socket's path is at most") {
		t.Errorf("no warning of the fallback to ports:\n%s", logs.String())
	}
	if got, err := meta.EmbeddedEndpoints(dir); err != nil || !slices.Equal(got, first) {
		t.Errorf("EmbeddedEndpoints = %q, %v, want %q", got, err, first)
	}
	checkPut(t, first)
	srv.Close()

	srv = startEtcd(t, dir)
	if got := srv.Endpoints(); !slices.Equal(got, first) {
		t.Errorf("after restart, Endpoints = %q, want %q", got, first)
	}
	checkPut(t, srv.Endpoints())
	srv.Close()

	// Someone else takes the client port.
	ln, err := net.Listen("tcp", first[0])
	if err != nil {
		t.Fatalf("listen on the old port: %v", err)
	}
	defer ln.Close()
	srv = startEtcd(t, dir)
	if got := srv.Endpoints(); slices.Equal(got, first) {
		t.Fatalf("Endpoints = %q, the taken ones", got)
	}
	checkPut(t, srv.Endpoints())
}

// A directory an older Tern's etcd used, on loopback ports, starts on
// sockets with its data, and its ports file goes.
func TestEmbeddedEtcdFromPorts(t *testing.T) {
	dir := t.TempDir()
	client, peer := freePorts(t)
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = "tern", dir, "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", client)}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peer)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	old, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	<-old.Server.ReadyNotify()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cu.Host}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli.Put(t.Context(), "k", "v")
	cli.Close()
	old.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tern-etcd-ports"), fmt.Appendf(nil, "%d %d\n", client, peer), 0o600); err != nil {
		t.Fatal(err)
	}

	srv := startEtcd(t, dir)
	socketOf(t, srv.Endpoints()[0])
	if resp, err := rawClient(t, srv.Endpoints()).Get(t.Context(), "k"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get = %v, %v; want the key of the start on ports", resp, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tern-etcd-ports")); err == nil {
		t.Error("the ports file of the start on ports is still there")
	}
}

// freePorts returns two loopback ports that were free a moment ago.
func freePorts(t *testing.T) (client, peer int) {
	t.Helper()
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // both open at once, so they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1]
}
