package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/auth"
	"github.com/ternwal/tern/internal/certs"
	"github.com/ternwal/tern/internal/certs/certstest"
)

// tlsFiles writes a CA, a server certificate for 127.0.0.1 and a client
// certificate with the given common name into dir.
type tlsFiles struct {
	ca                        *certstest.CA
	caFile, certFile, keyFile string
	clientCert, clientKey     string
	serverLeaf, clientLeaf    *certstest.Leaf
}

func writeTLSFiles(t *testing.T, dir, client string) tlsFiles {
	t.Helper()
	f := tlsFiles{ca: certstest.NewCA(t, "tern test CA"),
		caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server-key.pem"),
		clientCert: filepath.Join(dir, "client.pem"), clientKey: filepath.Join(dir, "client-key.pem")}
	f.ca.WriteFile(t, f.caFile)
	f.serverLeaf = f.ca.Issue(t, certstest.LeafOptions{CommonName: "tern-server", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNS: []string{"localhost"}, Server: true, Client: true})
	f.serverLeaf.WriteFiles(t, f.certFile, f.keyFile)
	f.clientLeaf = f.ca.Issue(t, certstest.LeafOptions{CommonName: client, Client: true})
	f.clientLeaf.WriteFiles(t, f.clientCert, f.clientKey)
	return f
}

func (f tlsFiles) clientTLS(t *testing.T, withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: f.ca.Pool(), ServerName: "127.0.0.1"}
	if withCert {
		c.Certificates = []tls.Certificate{f.clientLeaf.TLSCertificate(t)}
	}
	return c
}

// A server refuses to listen beyond loopback without TLS and an auth
// file, unless --insecure says so; then it warns and exports it.
func TestExposure(t *testing.T) {
	for _, c := range []struct {
		listen, http string
		insecure     bool
		want         string // in the error; "" to start
	}{
		{"0.0.0.0:0", "127.0.0.1:0", false, "--listen 0.0.0.0:0 beyond loopback without TLS or an auth file"},
		{"127.0.0.1:0", ":0", false, "--http :0 beyond loopback"},
		{"[::]:0", "127.0.0.1:0", false, "--insecure"},
		{"localhost:0", "[::1]:0", false, ""},
		{"0.0.0.0:0", "127.0.0.1:0", true, ""},
	} {
		var logs logBuffer
		s, err := Start(t.Context(), Config{Data: t.TempDir(), Listen: c.listen, HTTP: c.http, EtcdRoot: "/tern/", Insecure: c.insecure,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if c.want != "" {
			if err == nil {
				s.Close()
				t.Fatalf("listen %s, http %s: started, want a refusal", c.listen, c.http)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--auth") {
				t.Errorf("listen %s, http %s: %v, want %q and what to do", c.listen, c.http, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("listen %s, http %s: %v", c.listen, c.http, err)
		}
		metrics := httpBody(t, nil, "http://"+DialAddr(s.HTTPAddr())+"/metrics", "", 200)
		want := "tern_server_insecure 0"
		if c.insecure {
			want = "tern_server_insecure 1"
			if !strings.Contains(logs.String(), "INSECURE") {
				t.Errorf("--insecure beyond loopback: no warning in the log:\n%s", logs.String())
			}
		}
		if !strings.Contains(metrics, want) {
			t.Errorf("listen %s: metrics lack %q", c.listen, want)
		}
		s.Close()
	}
}

// httpBody GETs url with client (nil: a plain one) and the bearer token,
// checks the status and returns the body.
func httpBody(t *testing.T, client *http.Client, url, token string, want int) string {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d %s, want %d", url, resp.StatusCode, b, want)
	}
	return string(b)
}

// A whole server with TLS, mTLS and an auth file: a client with the CA and
// a token works, pprof is off unless asked and then only for admins, the
// health checks need no credentials, a listener beyond loopback is
// accepted, and Reload takes a new auth file.
func TestStartSecured(t *testing.T) {
	dir := t.TempDir()
	f := writeTLSFiles(t, dir, "indexer")
	authFile := filepath.Join(dir, "auth.yaml")
	writeAuth := func(indexerAllow string) {
		t.Helper()
		pol := fmt.Sprintf(`principals:
  - name: ops
    token_hash: %q
    grants: [{prefix: "", allow: [read, append, subscribe, admin]}]
  - name: reader
    token_hash: %q
    grants: [{prefix: "", allow: [read]}]
  - name: indexer
    subject: "CN=indexer"
    grants: [{prefix: "t/", allow: [%s]}]
`, hash(t, token("ops")), hash(t, token("reader")), indexerAllow)
		if err := os.WriteFile(authFile, []byte(pol), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeAuth("read")
	s, err := Start(t.Context(), Config{Data: t.TempDir(), Listen: "0.0.0.0:0", HTTP: "127.0.0.1:0", EtcdRoot: "/tern/",
		TLS: certs.Files{Cert: f.certFile, Key: f.keyFile, ClientCA: f.caFile}, AuthFile: authFile, Pprof: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := DialAddr(s.Addr())
	ctx := t.Context()

	// A token over TLS, without a client certificate.
	c, err := tern.Open(ctx, tern.Options{Server: addr, TLS: f.clientTLS(t, false), Token: token("ops")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateLog(ctx, "t/1", tern.LogOptions{}); err != nil {
		t.Fatal(err)
	}
	// A client certificate, mapped to indexer: it may read t/, not create.
	byCert, err := tern.Open(ctx, tern.Options{Server: addr, TLS: f.clientTLS(t, true)})
	if err != nil {
		t.Fatal(err)
	}
	defer byCert.Close()
	if _, err := byCert.ListLogs(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := byCert.CreateLog(ctx, "t/2", tern.LogOptions{}); !errors.Is(err, tern.ErrPermissionDenied) {
		t.Fatalf("indexer creates a log: %v, want permission denied", err)
	}
	// Neither: unauthenticated.
	anon, err := tern.Open(ctx, tern.Options{Server: addr, TLS: f.clientTLS(t, false)})
	if err == nil {
		_, err = anon.ListLogs(ctx, "")
		anon.Close()
	}
	if !errors.Is(err, tern.ErrUnauthenticated) {
		t.Fatalf("no token, no certificate: %v, want unauthenticated", err)
	}

	// The auth file reloaded: indexer may now administer t/.
	writeAuth("read, admin")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := byCert.CreateLog(ctx, "t/2", tern.LogOptions{}); err != nil {
		t.Fatalf("after the reload: %v", err)
	}
	// A broken file is refused, and the one before stays.
	os.WriteFile(authFile, []byte("principals:\n  - name: x\n    grants: [{prefix: \"\", allow: [wirte]}]\n"), 0o600)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "line ") {
		t.Fatalf("reload of a broken auth file: %v, want the line of the error", err)
	}
	if _, err := byCert.CreateLog(ctx, "t/3", tern.LogOptions{}); err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}

	// HTTP: TLS, health without credentials, metrics and pprof with.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: f.clientTLS(t, false)}}
	base := "https://" + DialAddr(s.HTTPAddr())
	httpBody(t, hc, base+"/healthz", "", 200)
	httpBody(t, hc, base+"/readyz", "", 200)
	httpBody(t, hc, base+"/metrics", "", 401)
	if m := httpBody(t, hc, base+"/metrics", token("reader"), 200); !strings.Contains(m, "tern_audit_events_total") {
		t.Errorf("metrics lack tern_audit_events_total")
	}
	httpBody(t, hc, base+"/debug/pprof/cmdline", "", 401)
	httpBody(t, hc, base+"/debug/pprof/cmdline", token("reader"), 403)
	httpBody(t, hc, base+"/debug/pprof/cmdline", token("ops"), 200)
	if resp, err := http.Get("http://" + DialAddr(s.HTTPAddr()) + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("the HTTP listener answered a plaintext request with 200: it serves TLS")
		}
	}
}

func hash(t *testing.T, tok string) string {
	t.Helper()
	h, err := auth.HashToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// pprof is off by default.
func TestPprofOff(t *testing.T) {
	s, err := Start(t.Context(), Config{Data: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", EtcdRoot: "/tern/"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := httpBody(t, nil, "http://"+DialAddr(s.HTTPAddr())+"/debug/pprof/cmdline", "", 404)
	if !strings.Contains(body, "--pprof") {
		t.Errorf("pprof off: %q, want the flag that turns it on", body)
	}
}

// Under mTLS without an auth file the certificate is the only credential:
// /metrics needs one over HTTPS, as gRPC calls do; health checks do not.
func TestMutualHTTP(t *testing.T) {
	f := writeTLSFiles(t, t.TempDir(), "client")
	s, err := Start(t.Context(), Config{Data: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", EtcdRoot: "/tern/",
		TLS: certs.Files{Cert: f.certFile, Key: f.keyFile, ClientCA: f.caFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := "https://" + DialAddr(s.HTTPAddr())
	without := &http.Client{Transport: &http.Transport{TLSClientConfig: f.clientTLS(t, false)}}
	with := &http.Client{Transport: &http.Transport{TLSClientConfig: f.clientTLS(t, true)}}
	httpBody(t, without, base+"/readyz", "", 200)
	httpBody(t, without, base+"/metrics", "", 401)
	httpBody(t, with, base+"/metrics", "", 200)
}
