package main

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/ternpb"
	"github.com/ternwal/tern/internal/certs/certstest"
	"github.com/ternwal/tern/internal/server"
)

// guardedServer is a server of a data directory behind TLS (when it has a
// config) and a token, as tern serve --tls-cert --auth will be: a call
// without the token is UNAUTHENTICATED, and one about the log "secret"
// PERMISSION_DENIED. It records who called.
type guardedServer struct {
	addr  string
	token string // "": any call is let in

	mu       sync.Mutex
	seen     []string // the authorization metadata of each call
	subjects []string // the client certificate's common name, when there is one
}

// startGuarded serves a fresh data directory on a port of 127.0.0.1, over
// TLS with cfg (plaintext if nil), until the test ends.
func startGuarded(t *testing.T, cfg *tls.Config, token string) *guardedServer {
	t.Helper()
	c, err := tern.Open(t.Context(), tern.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &guardedServer{addr: lis.Addr().String(), token: token}
	opts := append(grpcopts.Server(), grpc.UnaryInterceptor(s.unary), grpc.StreamInterceptor(s.stream))
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	srv := server.New(c, server.Options{})
	g := grpc.NewServer(opts...)
	srv.Register(g)
	go g.Serve(lis)
	t.Cleanup(func() {
		srv.Close()
		g.Stop()
		c.Close()
	})
	return s
}

func (s *guardedServer) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := strings.Join(md.Get("authorization"), ",")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, auth)
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			s.subjects = append(s.subjects, ti.State.PeerCertificates[0].Subject.CommonName)
		}
	}
	if s.token != "" && auth != "Bearer "+s.token {
		return status.Error(codes.Unauthenticated, "auth: no principal has this token")
	}
	return nil
}

func (s *guardedServer) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if d, ok := req.(*ternpb.DescribeLogRequest); ok && d.GetName() == "secret" {
		return nil, status.Error(codes.PermissionDenied, `permission denied: "ops" may not read "secret"`)
	}
	return h(ctx, req)
}

func (s *guardedServer) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.check(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

func (s *guardedServer) calls() (seen, subjects []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...), append([]string(nil), s.subjects...)
}

// ternAt runs a command line with the environment env (and no other).
func ternAt(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb strings.Builder
	a := &app{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}
	code := a.run(t.Context(), args)
	return result{code, out.String(), errb.String()}
}

// wantExit checks r's exit code, and that its stderr has each of wants.
func wantExit(t *testing.T, r result, code int, args []string, wants ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("tern %q: exit %d, want %d\nstdout: %s\nstderr: %s", args, r.code, code, r.stdout, r.stderr)
		return
	}
	for _, w := range wants {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("tern %q: stderr lacks %q:\n%s", args, w, r.stderr)
		}
	}
}

func TestTLSAndTokenRoundTrip(t *testing.T) {
	ca := certstest.NewCA(t, "tern test CA")
	dir := t.TempDir()
	caFile := writeCA(t, ca, dir, "ca.pem")
	s := startGuarded(t, &tls.Config{Certificates: []tls.Certificate{serverCert(t, ca, "server")}}, "s3cret")

	// Flags, then the environment alone.
	args := []string{"--server", s.addr, "--tls-ca", caFile, "--token", "s3cret", "log", "create", "l"}
	wantExit(t, ternAt(t, nil, "", args...), 0, args)
	env := map[string]string{"TERN_SERVER": s.addr, "TERN_TLS_CA": caFile, "TERN_TOKEN": "s3cret"}
	wantExit(t, ternAt(t, env, "a\nb\n", "append", "l"), 0, []string{"append", "l"})
	if r := ternAt(t, env, "", "read", "l"); r.code != 0 || r.stdout != "a\nb\n" {
		t.Errorf("tern read l over TLS: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if seen, _ := s.calls(); len(seen) == 0 || seen[len(seen)-1] != "Bearer s3cret" {
		t.Errorf("the server saw the authorization %q, want \"Bearer s3cret\"", seen)
	}
	// A flag beats its variable.
	wrongEnv := map[string]string{"TERN_SERVER": s.addr, "TERN_TLS_CA": filepath.Join(dir, "nope.pem"), "TERN_TOKEN": "wrong"}
	args = []string{"--tls-ca", caFile, "--token", "s3cret", "log", "describe", "l"}
	wantExit(t, ternAt(t, wrongEnv, "", args...), 0, args)

	// The refusals, one line each.
	args = []string{"--tls-ca", caFile, "log", "describe", "l"}
	r := ternAt(t, wrongEnv, "", args...)
	wantExit(t, r, 1, args, "tern: not authenticated: ", "(the CLI takes $TERN_TOKEN or --token, or a client certificate with --tls-cert and --tls-key)", "no principal has this token")
	if strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("tern %q: the error is not one line:\n%s", args, r.stderr)
	}
	args = []string{"log", "describe", "secret"}
	r = ternAt(t, env, "", args...)
	wantExit(t, r, 1, args, "tern: permission denied: \"ops\" may not read \"secret\"\n")

	other := certstest.NewCA(t, "another CA")
	for _, tc := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"--server", s.addr}, []string{"closed the connection before answering: it may require TLS", "--tls-ca"}},
		{[]string{"--server", s.addr, "--tls-ca", writeCA(t, other, dir, "other.pem")}, []string{"signed by an unknown authority (issuer CN=tern test CA)"}},
		{[]string{"--server", s.addr, "--tls-ca", caFile, "--tls-server-name", "tern.example"}, []string{`not valid for the name "tern.example"`}},
		// https:// is TLS with the system's CAs, which do not know the test's.
		{[]string{"--server", "https://" + s.addr}, []string{"the server at " + s.addr + " is signed by an unknown authority"}},
	} {
		args := append(tc.args, "--token", "s3cret", "log", "list")
		r := ternAt(t, nil, "", args...)
		wantExit(t, r, 1, args, tc.wants...)
		if strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "check --server") {
			t.Errorf("tern %q: want one line that says what TLS got wrong:\n%s", args, r.stderr)
		}
	}
}

func TestTLSClientCertificate(t *testing.T) {
	ca := certstest.NewCA(t, "tern test CA")
	dir := t.TempDir()
	caFile := writeCA(t, ca, dir, "ca.pem")
	certFile, keyFile := clientFiles(t, ca, dir, "indexer")
	s := startGuarded(t, &tls.Config{
		Certificates: []tls.Certificate{serverCert(t, ca, "server")},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
	}, "")

	args := []string{"--server", s.addr, "--tls-ca", caFile, "--tls-cert", certFile, "--tls-key", keyFile, "log", "list"}
	wantExit(t, ternAt(t, nil, "", args...), 0, args)
	env := map[string]string{"TERN_SERVER": s.addr, "TERN_TLS_CA": caFile, "TERN_TLS_CERT": certFile, "TERN_TLS_KEY": keyFile}
	wantExit(t, ternAt(t, env, "", "log", "list"), 0, []string{"log", "list"})
	if _, subjects := s.calls(); len(subjects) != 4 || subjects[0] != "indexer" {
		t.Errorf("the server saw the client certificates %q, want indexer's on each call", subjects)
	}
	args = []string{"--server", s.addr, "--tls-ca", caFile, "log", "list"}
	wantExit(t, ternAt(t, nil, "", args...), 1, args, "refused the TLS connection", "--tls-cert and --tls-key")
}

func TestTLSClientToPlaintextServer(t *testing.T) {
	ca := certstest.NewCA(t, "tern test CA")
	s := startGuarded(t, nil, "")
	args := []string{"--server", s.addr, "--tls-ca", writeCA(t, ca, t.TempDir(), "ca.pem"), "log", "list"}
	wantExit(t, ternAt(t, nil, "", args...), 1, args, "tern: the server at "+s.addr+" does not speak TLS: drop TLS (Options.TLS, tern --tls-ca) or check the address\n")
	// And a token reaches a server on loopback in plaintext, without a warning.
	args = []string{"--server", s.addr, "--token", "s3cret", "log", "list"}
	if r := ternAt(t, nil, "", args...); r.code != 0 || r.stderr != "" {
		t.Errorf("tern %q: exit %d, stderr %q", args, r.code, r.stderr)
	}
}

func TestTLSUsageErrors(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, "tern test CA")
	caFile := writeCA(t, ca, dir, "ca.pem")
	certFile, keyFile := clientFiles(t, ca, dir, "client")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	for _, tc := range []struct {
		env   map[string]string
		args  []string
		code  int
		wants []string
	}{
		{nil, []string{"--data", dir, "--token", "x", "log", "list"}, 2, []string{"tern: --token applies to a server: give --server ADDR (or $TERN_SERVER), or leave it out", `See "tern log list --help".`}},
		{nil, []string{"--data", dir, "--tls-ca", caFile, "log", "list"}, 2, []string{"--tls-ca applies to a server"}},
		{map[string]string{"TERN_SERVER": addr}, []string{"--data", dir, "--tls-server-name", "x", "log", "list"}, 2, []string{"--tls-server-name applies to a server"}},
		{nil, []string{"--server", addr, "--tls-cert", certFile, "log", "list"}, 2, []string{"--tls-cert and --tls-key go together"}},
		{map[string]string{"TERN_SERVER": addr, "TERN_TLS_KEY": keyFile}, []string{"log", "list"}, 2, []string{"--tls-cert and --tls-key go together"}},
		{nil, []string{"--server", addr, "--tls-ca", filepath.Join(dir, "nope.pem"), "log", "list"}, 2, []string{"tern: CA file " + filepath.Join(dir, "nope.pem") + " does not exist: check --tls-ca (or $TERN_TLS_CA)"}},
		{nil, []string{"--server", addr, "--tls-ca", notPEM, "log", "list"}, 2, []string{"tern: CA file " + notPEM + " holds no PEM certificate"}},
		{nil, []string{"--server", addr, "--tls-cert", certFile, "--tls-key", notPEM, "log", "list"}, 2, []string{"tern: client certificate " + certFile + " with key " + notPEM}},
		{nil, []string{"--server", addr, "--token", "two words", "log", "list"}, 1, []string{"the token (Options.Token) has a space"}},
		{nil, []string{"serve", "--tls-ca", caFile}, 2, []string{"--tls-ca is for the commands that reach a server (--server); tern serve takes"}},
	} {
		wantExit(t, ternAt(t, tc.env, "", tc.args...), tc.code, tc.args, tc.wants...)
	}
	// The variables are ignored on a data directory, as $TERN_SERVER's
	// address is under --data.
	env := map[string]string{"TERN_TOKEN": "x", "TERN_TLS_CERT": certFile}
	wantExit(t, ternAt(t, env, "", "--data", dir, "log", "create", "l"), 0, []string{"log", "create"})
}

func TestTokenInTheClearWarning(t *testing.T) {
	for _, tc := range []struct {
		opts tern.Options
		warn bool
	}{
		{tern.Options{Server: "10.0.0.5:7070", Token: "x"}, true},
		{tern.Options{Server: "tern.example:7070", Token: "x"}, true},
		{tern.Options{Server: "127.0.0.1:7070", Token: "x"}, false},
		{tern.Options{Server: "[::1]:7070", Token: "x"}, false},
		{tern.Options{Server: "localhost:7070", Token: "x"}, false},
		{tern.Options{Server: "10.0.0.5:7070", Token: "x", TLS: &tls.Config{}}, false},
		{tern.Options{Server: "10.0.0.5:7070"}, false},
	} {
		if w := plaintextTokenWarning(tc.opts); (w != "") != tc.warn {
			t.Errorf("%s with TLS %v, token %q: warning %q, want one: %v", tc.opts.Server, tc.opts.TLS != nil, tc.opts.Token, w, tc.warn)
		}
	}
}

// serverCert is a server certificate of ca for 127.0.0.1.
func serverCert(t *testing.T, ca *certstest.CA, cn string) tls.Certificate {
	return ca.Issue(t, certstest.LeafOptions{CommonName: cn, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}).TLSCertificate(t)
}

// writeCA writes ca's certificate into dir/name and returns its path.
func writeCA(t *testing.T, ca *certstest.CA, dir, name string) string {
	path := filepath.Join(dir, name)
	ca.WriteFile(t, path)
	return path
}

// clientFiles writes a client certificate of ca with the common name cn,
// and its key, into dir.
func clientFiles(t *testing.T, ca *certstest.CA, dir, cn string) (certFile, keyFile string) {
	certFile, keyFile = filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
	ca.Issue(t, certstest.LeafOptions{CommonName: cn, Client: true}).WriteFiles(t, certFile, keyFile)
	return certFile, keyFile
}
