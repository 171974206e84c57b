package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/auth"
	"github.com/ternwal/tern/internal/certs/certstest"
	"github.com/ternwal/tern/internal/replica"
)

// secureCluster is three tern serve nodes that authenticate each other by
// mTLS with certificates of one CA, on one etcd (a process) and a shared
// dir:// object store, with an auth file that names the nodes (node: true)
// and the clients' principals.
type secureCluster struct {
	dir      string // the certificates, keys and the auth file
	ca       *certstest.CA
	caFile   string
	authFile string
	tokens   map[string]string // principal → token
	etcd     *clientv3.Client
	etcdAddr string
	storage  string
	nodes    map[string]*server
}

// The principals of the auth file besides the nodes: ops may do
// everything, reader only read under a/, writer only append under a/,
// subber read and subscribe under a/; app is a client certificate's
// identity with every permission, and no node.
var clusterPrincipals = []struct{ name, grants string }{
	{"ops", `[{prefix: "", allow: [read, append, subscribe, admin]}]`},
	{"reader", `[{prefix: "a/", allow: [read]}]`},
	{"writer", `[{prefix: "a/", allow: [append]}]`},
	{"subber", `[{prefix: "a/", allow: [read, subscribe]}]`},
}

func startSecureCluster(t *testing.T) *secureCluster {
	t.Helper()
	sc := &secureCluster{dir: t.TempDir(), ca: certstest.NewCA(t, "tern cluster CA"), tokens: map[string]string{}, nodes: map[string]*server{}}
	sc.caFile = filepath.Join(sc.dir, "ca.pem")
	sc.ca.WriteFile(t, sc.caFile)

	var b strings.Builder
	b.WriteString("principals:\n")
	for _, id := range []string{"n0", "n1", "n2"} {
		fmt.Fprintf(&b, "  - name: node-%s\n    subject: \"CN=tern-node-%s\"\n    node: true\n", id, id)
	}
	for _, p := range clusterPrincipals {
		tok, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		h, err := auth.HashToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		sc.tokens[p.name] = tok
		fmt.Fprintf(&b, "  - name: %s\n    token_hash: %q\n    grants: %s\n", p.name, h, p.grants)
	}
	b.WriteString("  - name: app\n    subject: \"CN=app-client\"\n    grants: [{prefix: \"\", allow: [read, append, subscribe, admin]}]\n")
	sc.authFile = filepath.Join(sc.dir, "auth.yaml")
	if err := os.WriteFile(sc.authFile, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	e := startEtcdCluster(t, 1)
	sc.etcdAddr = e.Endpoints()[0]
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	sc.etcd = cli
	sc.storage = "dir://" + t.TempDir()

	for _, id := range []string{"n0", "n1", "n2"} {
		sc.nodes[id] = sc.startNode(t, id, sc.nodeLeaf(t, sc.ca, "tern-node-"+id), sc.caFile)
	}
	return sc
}

// nodeLeaf is a node's certificate for 127.0.0.1, for its server and its
// client side.
func (sc *secureCluster) nodeLeaf(t *testing.T, ca *certstest.CA, cn string) *certstest.Leaf {
	return ca.Issue(t, certstest.LeafOptions{CommonName: cn, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true})
}

// nodeArgs are the flags of tern serve for node id with leaf's files and
// clientCA as --tls-client-ca.
func (sc *secureCluster) nodeArgs(t *testing.T, id string, leaf *certstest.Leaf, clientCA string) []string {
	cert, key := filepath.Join(sc.dir, id+".pem"), filepath.Join(sc.dir, id+"-key.pem")
	leaf.WriteFiles(t, cert, key)
	return append(sc.clusterArgs(id), "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCA)
}

// clusterArgs are the flags of a node of the cluster besides TLS.
func (sc *secureCluster) clusterArgs(id string) []string {
	return []string{"--node-id", id, "--node-ttl", nodeTTL, "--etcd", sc.etcdAddr, "--storage", sc.storage, "--auth", sc.authFile}
}

func (sc *secureCluster) startNode(t *testing.T, id string, leaf *certstest.Leaf, clientCA string) *server {
	t.Helper()
	return startServerTLS(t, t.TempDir(), "", &tls.Config{RootCAs: sc.ca.Pool()}, nil, sc.nodeArgs(t, id, leaf, clientCA)...)
}

// client opens a client of the node id with the cluster's CA and the
// principal's token ("" for none), and cert as its client certificate if
// not nil.
func (sc *secureCluster) client(t *testing.T, id, principal string, cert *certstest.Leaf) *tern.Client {
	t.Helper()
	conf := sc.clientTLS()
	if cert != nil {
		conf.Certificates = []tls.Certificate{cert.TLSCertificate(t)}
	}
	c, err := tern.Open(deadline(t), tern.Options{Server: sc.nodes[id].addr, TLS: conf, Token: sc.tokens[principal]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ownerOf returns the ID of the node that serves the log with the given
// ID, waiting until one does and it is not one of not.
func (sc *secureCluster) ownerOf(t *testing.T, logID uint64, not ...string) string {
	t.Helper()
	limit := time.Now().Add(waitTimeout)
	for {
		resp, err := sc.etcd.Get(t.Context(), "/tern/owners/"+strconv.FormatUint(logID, 10))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 && !slices.Contains(not, string(resp.Kvs[0].Value)) {
			return string(resp.Kvs[0].Value)
		}
		if time.Now().After(limit) {
			t.Fatalf("no node but %v served log %d within %v", not, logID, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// other returns a node of the cluster that is none of not.
func (sc *secureCluster) other(not ...string) string {
	for _, id := range []string{"n0", "n1", "n2"} {
		if !slices.Contains(not, id) {
			return id
		}
	}
	return ""
}

// segment is a segment record of a log in etcd.
type segment struct {
	seq      uint64
	Sealed   bool     `json:"sealed"`
	Ensemble []string `json:"ensemble"`
}

// segments returns the segment records of the log with the given ID.
func (sc *secureCluster) segments(t *testing.T, logID uint64) []segment {
	t.Helper()
	prefix := fmt.Sprintf("/tern/logs/%d/segments/", logID)
	resp, err := sc.etcd.Get(t.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var segs []segment
	for _, kv := range resp.Kvs {
		var s segment
		if err := json.Unmarshal(kv.Value, &s); err != nil {
			t.Fatalf("segment record %s: %v", kv.Key, err)
		}
		if s.seq, err = strconv.ParseUint(strings.TrimPrefix(string(kv.Key), prefix), 10, 64); err != nil {
			t.Fatalf("segment key %s: %v", kv.Key, err)
		}
		segs = append(segs, s)
	}
	return segs
}

// Errors a node logs when it refuses a peer's TLS or certificate, and when
// a call is refused its credentials.
var (
	tlsErrors    = []string{"tls: ", "x509: ", "not a node", "node's certificate"}
	refusalLines = []string{"PermissionDenied", "permission denied", "Unauthenticated"}
)

// checkLogs fails the test if a node logged one of bad.
func checkLogs(t *testing.T, nodes map[string]*server, bad ...string) {
	t.Helper()
	for id, s := range nodes {
		out := s.stderr.String()
		for _, b := range bad {
			if i := strings.Index(out, b); i >= 0 {
				t.Errorf("node %s logged %q:\n%s", id, b, out[max(i-300, 0):min(i+300, len(out))])
			}
		}
	}
}

// clientTLS is a client's TLS configuration: it verifies the nodes with
// the cluster's CA.
func (sc *secureCluster) clientTLS() *tls.Config { return &tls.Config{RootCAs: sc.ca.Pool()} }

// handshakeFailures reads tern_tls_handshake_failures_total of a node's
// /metrics, as ops.
func (sc *secureCluster) handshakeFailures(t *testing.T, s *server) float64 {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: sc.ca.Pool()}}}
	req, err := http.NewRequestWithContext(t.Context(), "GET", "https://"+s.httpAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sc.tokens["ops"])
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics as ops: %s\n%s", resp.Status, body)
	}
	var sum float64
	for line := range strings.SplitSeq(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "tern_tls_handshake_failures_total"); ok {
			f := strings.Fields(rest)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// A quorum log in a cluster whose nodes authenticate each other by mTLS:
// created, appended to and read through a node that does not serve it,
// with a token over TLS (the client follows the redirect to the owner with
// both); after kill -9 of the owner, every acknowledged entry is read back
// through the new owner, which recovered the open segment from the other
// replicas over mTLS; restarted, the old owner rejoins and appends go on.
// No node refused another's certificate.
func TestClusterTLSQuorum(t *testing.T) {
	sc := startSecureCluster(t)
	ctx := deadline(t)
	first := sc.client(t, "n0", "ops", nil)
	created, err := first.CreateLog(ctx, "q", tern.LogOptions{Mode: tern.ModeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	info, err := created.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := created.OpenWriter(ctx); err != nil { // someone takes the log
		t.Fatal(err)
	}
	owner := sc.ownerOf(t, info.ID)
	seed := sc.other(owner)
	l, err := sc.client(t, seed, "ops", nil).OpenLog(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	acked := map[tern.Offset]string{}
	appendN(t, l, "before", 200, acked)
	// The other two nodes hold the segment: the owner sent it to them
	// over mTLS, which is all they accept.
	nodeConf := sc.clientTLS()
	nodeConf.Certificates = []tls.Certificate{sc.nodeLeaf(t, sc.ca, "tern-node-n2").TLSCertificate(t)}
	for _, s := range sc.segments(t, info.ID) {
		if len(s.Ensemble) != 3 {
			t.Fatalf("segment %d has the ensemble %v, want the 3 nodes", s.seq, s.Ensemble)
		}
		for _, id := range s.Ensemble {
			if id == owner {
				continue
			}
			conn, err := replica.Dial(sc.nodes[id].addr, nodeConf)
			if err != nil {
				t.Fatal(err)
			}
			sizes, err := conn.List(ctx, replica.SegmentID{Log: info.ID, Seq: s.seq})
			conn.Close()
			if err != nil || len(sizes) == 0 {
				t.Errorf("segment %d on %s: %d fragments, %v; want the owner's", s.seq, id, len(sizes), err)
			}
		}
	}

	// Reading fails over to the new owner, which recovers the open
	// segment from the two other replicas.
	sc.nodes[owner].kill9()
	newOwner := sc.ownerOf(t, info.ID, owner)
	waitServed(t, l)
	end := checkAcked(t, l, acked)
	t.Logf("owner %s killed; %s took the log and served the %d acknowledged entries of [0, %d)", owner, newOwner, len(acked), end)

	// Three replicas again: appends go on.
	sc.nodes[owner].restart()
	appendN(t, l, "after", 50, acked)
	checkAcked(t, l, acked)
	checkLogs(t, sc.nodes, append(tlsErrors, refusalLines...)...)
	for id, s := range sc.nodes {
		if n := sc.handshakeFailures(t, s); n != 0 {
			t.Errorf("node %s counted %v failed TLS handshakes, want none", id, n)
		}
	}
}

// appendN appends n entries tag-<i> and adds them to acked by offset. A
// writer that fails (the log moved) is replaced; its appends that failed
// were not acknowledged, and their payloads are not used again, so that a
// duplicate would show.
func appendN(t *testing.T, l *tern.Log, tag string, n int, acked map[tern.Offset]string) {
	t.Helper()
	limit := time.Now().Add(waitTimeout)
	var w *tern.Writer
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	for i, done := 0, 0; done < n; i++ {
		if time.Now().After(limit) {
			t.Fatalf("appended %d of %d entries within %v", done, n, waitTimeout)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		if w == nil {
			var err error
			if w, err = l.OpenWriter(ctx); err != nil {
				cancel()
				checkNotRefused(t, "open a writer", err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		p := fmt.Sprintf("%s-%d", tag, i)
		off, err := w.Append(ctx, tern.Entry{Payload: []byte(p)})
		cancel()
		if err != nil {
			checkNotRefused(t, "append "+p, err)
			w.Close()
			w = nil
			continue
		}
		acked[off] = p
		done++
	}
}

// checkNotRefused fails the test if err is a refusal of the caller's
// credentials or of TLS, which retrying cannot cure; it logs other errors.
func checkNotRefused(t *testing.T, what string, err error) {
	t.Helper()
	if errors.Is(err, tern.ErrPermissionDenied) || errors.Is(err, tern.ErrUnauthenticated) || errors.Is(err, tern.ErrTLS) {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s: %v (retrying)", what, err)
}

// waitServed waits until a call about l succeeds: a node serves it again
// after its owner died, and the client found it.
func waitServed(t *testing.T, l *tern.Log) {
	t.Helper()
	limit := time.Now().Add(waitTimeout)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := l.Info(ctx)
		cancel()
		if err == nil {
			return
		}
		checkNotRefused(t, "describe the log", err)
		if time.Now().After(limit) {
			t.Fatalf("no node served the log within %v: %v", waitTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runServe runs tern serve with args until it exits, and returns its exit
// code and what it logged.
func runServe(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	all := append([]string{"serve", "--data", t.TempDir(), "--listen", freeAddr(t), "--http", freeAddr(t)}, args...)
	out, err := exec.CommandContext(ctx, ternBin, all...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), string(out)
	default:
		t.Fatalf("tern %s: %v\n%s", strings.Join(all, " "), err, out)
		return 0, ""
	}
}

// A node whose certificate the others would refuse does not start, and
// does not register in etcd: one of another CA (checked against the
// cluster's CA of --tls-client-ca), and one of the cluster's CA whose
// subject is not a node principal of the auth file.
func TestClusterSecurityJoin(t *testing.T) {
	sc := startSecureCluster(t)
	other := certstest.NewCA(t, "another CA")
	for _, tc := range []struct {
		name string
		leaf *certstest.Leaf
		want []string
	}{
		{"certificate of another CA", sc.nodeLeaf(t, other, "tern-node-n4"), []string{"this node's certificate (CN=tern-node-n4)", "--tls-client-ca"}},
		{"not a node principal", sc.nodeLeaf(t, sc.ca, "intruder"), []string{"this node's certificate (CN=intruder)", "not a node principal of the auth file", "node: true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedToJoin(t, sc.nodeArgs(t, "n4", tc.leaf, sc.caFile), tc.want...)
		})
	}
	sc.checkOnlyNodes(t)
}

// refusedToJoin runs tern serve with args, a node's, and checks that it
// exits 1 saying each of wants.
func refusedToJoin(t *testing.T, args []string, wants ...string) {
	t.Helper()
	code, out := runServe(t, args...)
	if code != 1 {
		t.Fatalf("tern serve exited with %d, want 1; it logged:\n%s", code, out)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("tern serve logged:\n%s\nwant it to say %q", out, w)
		}
	}
}

// checkOnlyNodes checks that the nodes registered in etcd are sc's three.
func (sc *secureCluster) checkOnlyNodes(t *testing.T) {
	t.Helper()
	resp, err := sc.etcd.Get(t.Context(), "/tern/nodes/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, kv := range resp.Kvs {
		ids = append(ids, strings.TrimPrefix(string(kv.Key), "/tern/nodes/"))
	}
	if !slices.Equal(ids, []string{"n0", "n1", "n2"}) {
		t.Errorf("the nodes in etcd are %v, want n0, n1 and n2 only", ids)
	}
}
