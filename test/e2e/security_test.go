package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/certs/certstest"
)

// Real TLS handshakes with tern serve --tls-cert: a good certificate serves
// the CLI (--tls-ca) and the Go client (Options.TLS); an expired one stops
// the start naming the file and the expiry; a client that trusts another
// CA, or checks another name, fails with one line that says so; under mTLS
// without --auth a client needs a certificate of the CA; and a plaintext
// client of a TLS server, or the reverse, is told so in one line.
func TestTLSHandshakes(t *testing.T) {
	p := newPKI(t)
	srv := startSecure(t, p, false)
	tlsCLI := []string{"--server", srv.addr, "--tls-ca", p.caFile}

	if code, _, errs := ternEnv(t, nil, "", append(tlsCLI, "log", "create", "cli")...); code != 0 {
		t.Fatalf("tern log create over TLS: exit %d\n%s", code, errs)
	}
	if code, _, errs := ternEnv(t, nil, "one\ntwo\n", append(tlsCLI, "append", "cli")...); code != 0 {
		t.Fatalf("tern append over TLS: exit %d\n%s", code, errs)
	}
	if code, out, errs := ternEnv(t, nil, "", append(tlsCLI, "read", "cli")...); code != 0 || out != "one\ntwo\n" {
		t.Fatalf("tern read over TLS: exit %d\n%s%s", code, out, errs)
	}
	c := mustOpenAs(t, srv.addr, "", p.clientTLS())
	ctx := deadline(t)
	l, err := c.CreateLog(ctx, "go", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, w, "a", "b")
	wantRead(t, c, "go", "a", "b")

	// Expired: the start fails naming the file and when it expired.
	expired := p.ca.Issue(t, certstest.LeafOptions{CommonName: "old", DNS: []string{"localhost"}, Server: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	oldCert, oldKey := filepath.Join(p.dir, "old.pem"), filepath.Join(p.dir, "old-key.pem")
	expired.WriteFiles(t, oldCert, oldKey)
	code, out := runTern(t, "serve", "--data", t.TempDir(), "--listen", freeAddr(t), "--http", freeAddr(t), "--tls-cert", oldCert, "--tls-key", oldKey)
	if notAfter := expired.Cert.NotAfter.UTC().Format(time.RFC3339); code != 1 || !strings.Contains(out, oldCert) || !strings.Contains(out, "expired") || !strings.Contains(out, notAfter) {
		t.Errorf("tern serve with an expired certificate: exit %d, want 1 naming %s, expired and %s:\n%s", code, oldCert, notAfter, out)
	}

	// Another CA.
	other := certstest.NewCA(t, "another CA")
	otherFile := filepath.Join(p.dir, "other-ca.pem")
	other.WriteFile(t, otherFile)
	code, _, errs := ternEnv(t, nil, "", "--server", srv.addr, "--tls-ca", otherFile, "log", "list")
	wantOneLine(t, "a client trusting another CA", code, errs, "unknown authority", "--tls-ca")
	if _, err := openAs(t, srv.addr, "", &tls.Config{RootCAs: other.Pool()}); !errors.Is(err, tern.ErrTLS) || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("Open trusting another CA: %v, want ErrTLS naming the unknown authority", err)
	}
	// Another name.
	code, _, errs = ternEnv(t, nil, "", append(tlsCLI, "--tls-server-name", "other", "log", "list")...)
	wantOneLine(t, "a client checking the name other", code, errs, `"other"`, "--tls-server-name")

	// A plaintext client of the TLS server.
	code, _, errs = ternEnv(t, nil, "", "--server", srv.addr, "log", "list")
	wantOneLine(t, "a plaintext client of a TLS server", code, errs, "TLS", "--tls-ca")

	// A TLS client of a plaintext server.
	plain := startSecure(t, nil, false)
	code, _, errs = ternEnv(t, nil, "", "--server", plain.addr, "--tls-ca", p.caFile, "log", "list")
	wantOneLine(t, "a TLS client of a plaintext server", code, errs, "does not speak TLS")

	// mTLS without --auth: the certificate is the credential.
	mtls := startSecure(t, p, true)
	code, _, errs = ternEnv(t, nil, "", "--server", mtls.addr, "--tls-ca", p.caFile, "log", "create", "m")
	wantOneLine(t, "a client without a certificate under mTLS", code, errs, "certificate")
	if _, err := openAs(t, mtls.addr, "", p.clientTLS()); err == nil {
		t.Errorf("Open without a certificate under mTLS succeeded")
	}
	certFile, keyFile, cert := p.client(t, "app")
	if code, _, errs := ternEnv(t, nil, "", "--server", mtls.addr, "--tls-ca", p.caFile, "--tls-cert", certFile, "--tls-key", keyFile, "log", "create", "m"); code != 0 {
		t.Errorf("tern log create with a client certificate under mTLS: exit %d\n%s", code, errs)
	}
	mc := mustOpenAs(t, mtls.addr, "", p.clientTLS(cert))
	if _, err := mc.OpenLog(ctx, "m"); err != nil {
		t.Errorf("OpenLog with a client certificate under mTLS: %v", err)
	}
}

// The server's certificate is replaced while a reader follows the tail, a
// subscriber consumes and a writer is open: new handshakes get the new
// certificate (from the file watcher, then at once on SIGHUP), and the
// open streams go on, as new clients connect.
func TestTLSReloadWithOpenStreams(t *testing.T) {
	p := newPKI(t)
	srv := startSecure(t, p, false)
	c := mustOpenAs(t, srv.addr, "", p.clientTLS())
	ctx := deadline(t)
	l, err := c.CreateLog(ctx, "r", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateSubscription(ctx, "s", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
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
	next := tern.Offset(0)
	check := func(when string) {
		t.Helper()
		payload := "entry-" + when
		off, err := w.Append(ctx, tern.Entry{Payload: []byte(payload)})
		if err != nil || off != next {
			t.Fatalf("%s: append on the open writer: %d, %v", when, off, err)
		}
		if e, err := r.Next(ctx); err != nil || e.Offset != next || string(e.Payload) != payload {
			t.Fatalf("%s: the open reader got %d %q, %v", when, e.Offset, e.Payload, err)
		}
		if e, err := sub.Next(ctx); err != nil || e.Offset != next || string(e.Payload) != payload {
			t.Fatalf("%s: the open subscriber got %d %q, %v", when, e.Offset, e.Payload, err)
		}
		if err := sub.Ack(next); err != nil {
			t.Fatal(err)
		}
		next++
		nc := mustOpenAs(t, srv.addr, "", p.clientTLS())
		if info, err := mustOpenLog(t, nc, "r").Info(ctx); err != nil || info.End != next {
			t.Fatalf("%s: a new client: %+v, %v", when, info, err)
		}
	}
	check("A")

	b := p.serverLeaf(t)
	b.WriteFiles(t, p.certFile, p.keyFile)
	waitServing(t, srv.addr, p, b)
	check("B")

	cl := p.serverLeaf(t)
	cl.WriteFiles(t, p.certFile, p.keyFile)
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitServing(t, srv.addr, p, cl)
	check("C")
	if n := strings.Count(srv.stderr.String(), "TLS certificate reloaded"); n < 2 {
		t.Errorf("the server logged %d reloads, want 2 at least", n)
	}
}

// waitServing waits until a new TLS handshake with addr gets leaf's
// certificate.
func waitServing(t *testing.T, addr string, p *pki, leaf *certstest.Leaf) {
	t.Helper()
	eventually(t, "a handshake with serial "+leaf.Cert.SerialNumber.String(), func() bool {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: p.ca.Pool(), NextProtos: []string{"h2"}})
		if err != nil {
			t.Logf("tls.Dial %s: %v", addr, err)
			return false
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(leaf.Cert.SerialNumber) == 0
	})
}

func mustOpenLog(t *testing.T, c *tern.Client, name string) *tern.Log {
	t.Helper()
	l, err := c.OpenLog(deadline(t), name)
	if err != nil {
		t.Fatalf("open log %s: %v", name, err)
	}
	return l
}

// tern serve on 0.0.0.0 without TLS and --auth refuses to start, naming
// what would make it safe; with --insecure it starts and says so loudly
// and in a metric; with TLS and --auth it starts without a warning. pprof
// is off unless --pprof, and then only for principals with admin on "".
func TestExposureAndPprof(t *testing.T) {
	port := portOf(t, freeAddr(t))
	wild := "0.0.0.0:" + strconv.Itoa(port)
	code, out := runTern(t, "serve", "--data", t.TempDir(), "--listen", wild, "--http", freeAddr(t))
	if (code != 1 && code != 2) || !strings.Contains(out, "--insecure") || !strings.Contains(out, "--auth") || !strings.Contains(out, "--tls-cert") {
		t.Errorf("tern serve --listen %s without TLS and --auth: exit %d, want 1 or 2 naming --insecure, --auth and --tls-cert:\n%s", wild, code, out)
	}

	insecure := startSecure(t, nil, false, "--listen", wild, "--insecure")
	if !strings.Contains(insecure.stderr.String(), "INSECURE") {
		t.Errorf("tern serve --insecure did not say INSECURE")
	}
	if _, body := insecure.get("/metrics", ""); metric(body, "tern_server_insecure") != 1 {
		t.Errorf("/metrics of an insecure server lacks tern_server_insecure 1")
	}
	if code, _ := insecure.get("/debug/pprof/", ""); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without --pprof: %d, want 404", code)
	}
	insecure.stop()

	p := newPKI(t)
	authFile, tokens := writeAuthFile(t,
		principal{name: "ops", grants: [][2]string{{"", "read, append, subscribe, admin"}}},
		principal{name: "tenant", grants: [][2]string{{"a/", "read, append, subscribe, admin"}}})
	safe := startSecure(t, p, false, "--listen", "0.0.0.0:"+strconv.Itoa(portOf(t, freeAddr(t))), "--auth", authFile, "--pprof")
	if out := safe.stderr.String(); strings.Contains(out, "INSECURE") || strings.Contains(out, "level=WARN") {
		t.Errorf("tern serve on 0.0.0.0 with TLS and --auth warned:\n%s", out)
	}
	if _, body := safe.get("/metrics", tokens["ops"]); metric(body, "tern_server_insecure") != 0 {
		t.Errorf("/metrics of a safe server lacks tern_server_insecure 0")
	}
	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {tokens["tenant"], http.StatusForbidden}, {tokens["ops"], http.StatusOK}} {
		if code, body := safe.get("/debug/pprof/", c.token); code != c.want {
			t.Errorf("/debug/pprof/ with token %.8q...: %d, want %d\n%s", c.token, code, c.want, body)
		}
	}
}

// tern serve refuses an auth file it cannot use at start, naming the file,
// the line and the reason; and a file that does not exist.
func TestAuthFileRefusedAtStart(t *testing.T) {
	_, hash := newToken(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	text := "principals:\n  - name: ops\n    token_hash: \"" + hash + "\"\n    grants:\n      - {prefix: \"\", allow: [read, wirte]}\n"
	if err := os.WriteFile(bad, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runTern(t, "serve", "--data", t.TempDir(), "--listen", freeAddr(t), "--http", freeAddr(t), "--auth", bad)
	if code != 1 || !strings.Contains(out, bad) || !strings.Contains(out, "line 5") || !strings.Contains(out, `"wirte" is not a permission`) {
		t.Errorf("tern serve --auth with a bad permission: exit %d, want 1 naming %s, line 5 and the permission:\n%s", code, bad, out)
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	code, out = runTern(t, "serve", "--data", t.TempDir(), "--listen", freeAddr(t), "--http", freeAddr(t), "--auth", missing)
	if code != 1 || !strings.Contains(out, missing) || !strings.Contains(out, "no such file") {
		t.Errorf("tern serve --auth with a missing file: exit %d, want 1 naming %s:\n%s", code, missing, out)
	}
}

// The embedded etcd of tern serve listens on unix sockets in its
// directory, and on no TCP port; its HTTP/JSON gateway is off, so a POST
// of deleterange on its socket deletes nothing.
func TestSecurityEmbeddedEtcdUnreachable(t *testing.T) {
	data := filepath.Join(t.TempDir(), "d")
	srv := startServer(t, data)
	c := openClient(t, srv.addr)
	if _, err := c.CreateLog(deadline(t), "kept", tern.LogOptions{}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(data, "etcd", "client.sock")
	if st, err := os.Stat(sock); err != nil || st.Mode().Type() != os.ModeSocket {
		t.Fatalf("the etcd's client socket %s: %v, %v", sock, st, err)
	}
	ports := listeningPorts(t, srv.cmd.Process.Pid)
	want := map[int]bool{portOf(t, srv.addr): true, portOf(t, srv.httpAddr): true}
	if len(ports) != len(want) || !ports[portOf(t, srv.addr)] || !ports[portOf(t, srv.httpAddr)] {
		t.Errorf("tern serve listens on TCP ports %v, want only its gRPC and HTTP ones %v", ports, want)
	}

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	defer hc.CloseIdleConnections()
	// Every key: from "\x00" to the end.
	resp, err := hc.Post("http://etcd/v3/kv/deleterange", "application/json", strings.NewReader(`{"key":"AA==","range_end":"AA=="}`))
	if err == nil {
		resp.Body.Close()
		t.Logf("POST /v3/kv/deleterange on %s: %s", sock, resp.Status)
	}
	if logs, err := c.ListLogs(deadline(t), ""); err != nil || len(logs) != 1 || logs[0].Name != "kept" {
		t.Fatalf("after a POST of deleterange on the etcd's socket: %v, %v; want the log kept", logs, err)
	}
	if _, err := mustOpenLog(t, c, "kept").Info(deadline(t)); err != nil {
		t.Fatalf("the log after a POST of deleterange on the etcd's socket: %v", err)
	}
}
