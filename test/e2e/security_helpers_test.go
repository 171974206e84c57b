package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/certs/certstest"
)

// pki is a CA and the files of a server certificate it issued, for
// localhost and 127.0.0.1, in a directory of the test.
type pki struct {
	ca                *certstest.CA
	dir               string
	caFile            string
	certFile, keyFile string
	leaf              *certstest.Leaf // in certFile and keyFile
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	p := &pki{ca: certstest.NewCA(t, "tern test CA"), dir: dir, caFile: filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server-key.pem")}
	p.ca.WriteFile(t, p.caFile)
	p.leaf = p.serverLeaf(t)
	p.leaf.WriteFiles(t, p.certFile, p.keyFile)
	return p
}

// serverLeaf issues a new server certificate (with a serial of its own),
// valid for 30 days: the server warns of one that expires within 7.
func (p *pki) serverLeaf(t *testing.T) *certstest.Leaf {
	t.Helper()
	return p.ca.Issue(t, certstest.LeafOptions{CommonName: "tern-server", DNS: []string{"localhost"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, NotAfter: time.Now().Add(30 * 24 * time.Hour)})
}

// client issues a client certificate for common name cn, writes it, and
// returns its files and the certificate for a tls.Config.
func (p *pki) client(t *testing.T, cn string) (certFile, keyFile string, cert tls.Certificate) {
	t.Helper()
	l := p.ca.Issue(t, certstest.LeafOptions{CommonName: cn, Client: true})
	certFile, keyFile = filepath.Join(p.dir, cn+".pem"), filepath.Join(p.dir, cn+"-key.pem")
	l.WriteFiles(t, certFile, keyFile)
	return certFile, keyFile, l.TLSCertificate(t)
}

// clientTLS is a client's TLS configuration trusting the CA, with certs.
func (p *pki) clientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.ca.Pool(), Certificates: certs}
}

// serveArgs are tern serve's TLS flags; mutual adds the CA as the client CA.
func (p *pki) serveArgs(mutual bool) []string {
	args := []string{"--tls-cert", p.certFile, "--tls-key", p.keyFile}
	if mutual {
		args = append(args, "--tls-client-ca", p.caFile)
	}
	return args
}

// startSecure starts tern serve with p's TLS (nil: none) and args, on a
// data directory of its own.
func startSecure(t *testing.T, p *pki, mutual bool, args ...string) *server {
	t.Helper()
	data := filepath.Join(t.TempDir(), "d")
	if p == nil {
		return startServerAt(t, data, "", nil, args...)
	}
	return startServerTLS(t, data, "", p.clientTLS(), nil, append(p.serveArgs(mutual), args...)...)
}

// newToken makes a token with tern auth new-token, and returns it and its
// hash.
func newToken(t *testing.T) (token, hash string) {
	t.Helper()
	code, out := runTern(t, "auth", "new-token")
	lines := strings.Fields(out)
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "sha256:") {
		t.Fatalf("tern auth new-token: exit %d\n%s", code, out)
	}
	return lines[0], lines[1]
}

// principal is one principal of an auth file the test writes.
type principal struct {
	name    string
	subject string      // of its client certificate, or ""
	grants  [][2]string // prefix, permissions ("read, append")
	quotas  string      // a YAML flow mapping, or ""
}

// writeAuthFile writes an auth file of ps, each with a new token, and
// returns its path and the tokens by principal name.
func writeAuthFile(t *testing.T, ps ...principal) (string, map[string]string) {
	t.Helper()
	tokens := map[string]string{}
	var b strings.Builder
	b.WriteString("principals:\n")
	for _, p := range ps {
		token, hash := newToken(t)
		tokens[p.name] = token
		fmt.Fprintf(&b, "  - name: %s\n    token_hash: %q\n", p.name, hash)
		if p.subject != "" {
			fmt.Fprintf(&b, "    subject: %q\n", p.subject)
		}
		if len(p.grants) > 0 {
			b.WriteString("    grants:\n")
		}
		for _, g := range p.grants {
			fmt.Fprintf(&b, "      - {prefix: %q, allow: [%s]}\n", g[0], g[1])
		}
		if p.quotas != "" {
			fmt.Fprintf(&b, "    quotas: %s\n", p.quotas)
		}
	}
	path := filepath.Join(t.TempDir(), "auth.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, tokens
}

// openAs opens a client of addr with token and TLS (both optional),
// closed by the test's cleanup.
func openAs(t *testing.T, addr, token string, tlsConf *tls.Config) (*tern.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	c, err := tern.Open(ctx, tern.Options{Server: addr, Token: token, TLS: tlsConf})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func mustOpenAs(t *testing.T, addr, token string, tlsConf *tls.Config) *tern.Client {
	t.Helper()
	c, err := openAs(t, addr, token, tlsConf)
	if err != nil {
		t.Fatalf("open a client of %s: %v", addr, err)
	}
	return c
}

// ternEnv runs the tern CLI with env added, and returns its exit code,
// stdout and stderr.
func ternEnv(t *testing.T, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ternBin, args...)
	cmd.Env = append(cmd.Environ(), append([]string{"TERN_SERVER=", "TERN_TOKEN=", "TERN_TLS_CA="}, env...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tern %s did not end within 30s:\n%s%s", strings.Join(args, " "), &out, &errs)
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("tern %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errs.String()
}

// wantOneLine fails unless the CLI exited 1 with one line on stderr that
// holds every one of want.
func wantOneLine(t *testing.T, what string, code int, stderr string, want ...string) {
	t.Helper()
	line := strings.TrimSuffix(stderr, "\n")
	t.Logf("%s: %s", what, line)
	ok := code == 1 && line != "" && !strings.Contains(line, "\n")
	for _, w := range want {
		ok = ok && strings.Contains(line, w)
	}
	if !ok {
		t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 1 and one line with %q", what, code, stderr, want)
	}
}

// get returns the status and body of a GET of path on the server's HTTP
// listener (over TLS when it serves TLS), with a bearer token unless "".
func (s *server) get(path, token string) (int, string) {
	s.t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	scheme := "http://"
	if s.tls != nil {
		hc.Transport = &http.Transport{TLSClientConfig: s.tls}
		scheme = "https://"
	}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, scheme+s.httpAddr+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// metric returns the value of the sample of /metrics whose line starts
// with series (a name and its labels, as exposed), or -1 without one.
func metric(body, series string) float64 {
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// listeningPorts returns the TCP ports the process pid listens on, from
// /proc: the sockets in LISTEN state of /proc/net/tcp{,6} whose inodes are
// among the process's file descriptors.
func listeningPorts(t *testing.T, pid int) map[int]bool {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			const listen = "0A"
			if len(f) < 10 || f[3] != listen || !inodes[f[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			port, err := strconv.ParseInt(hexPort, 16, 32)
			if err != nil {
				t.Fatalf("/proc/net/%s: %q", table, line)
			}
			ports[int(port)] = true
		}
	}
	return ports
}

// portOf is the port of a host:port address.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls ok every 100ms until it holds, failing the test after
// waitTimeout with what.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(waitTimeout); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, waitTimeout)
		}
	}
}
