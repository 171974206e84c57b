package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool // holds cert alone
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue signs a certificate for a server and a client named cn, valid for
// an hour, that holds the names in hosts (DNS names or IPs); edit, if not
// nil, changes it before it is signed.
func (ca *testCA) issue(t *testing.T, cn string, hosts []string, edit func(*x509.Certificate)) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tokenNode is a node that answers DescribeLog as a Tern server with --auth
// would: it refuses a call without its token, and it records the
// authorization metadata of every call and the identity of the client's
// certificate.
type tokenNode struct {
	ternpb.UnimplementedTernServer
	token    string // "": any call is let in
	redirect string // when set, DescribeLog of a log sends the client to this address

	mu       sync.Mutex
	seen     []string // the authorization metadata of each call
	subjects []string // the client certificate's common name on each call
}

func (n *tokenNode) DescribeLog(ctx context.Context, req *ternpb.DescribeLogRequest) (*ternpb.LogInfo, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := strings.Join(md.Get("authorization"), ",")
	n.mu.Lock()
	n.seen = append(n.seen, auth)
	if ti, ok := peerTLS(ctx); ok && len(ti.State.PeerCertificates) > 0 {
		n.subjects = append(n.subjects, ti.State.PeerCertificates[0].Subject.CommonName)
	}
	n.mu.Unlock()
	switch {
	case n.token != "" && auth != "Bearer "+n.token:
		return nil, status.Error(codes.Unauthenticated, "auth: no principal has this token")
	case req.GetName() == "":
		return nil, status.Error(codes.InvalidArgument, "invalid name")
	case req.GetName() == "secret":
		return nil, status.Error(codes.PermissionDenied, `auth: "ops" may not read "secret"`)
	case n.redirect != "":
		return nil, rpcerr.Status(&rpcerr.NotOwnerError{Log: req.GetName(), Owner: n.redirect}).Err()
	}
	return &ternpb.LogInfo{Name: req.GetName(), Options: LogOptions{}.Proto()}, nil
}

func (n *tokenNode) calls() (seen, subjects []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.seen...), append([]string(nil), n.subjects...)
}

// serveNode serves n on a port of 127.0.0.1, over TLS with cfg or in
// plaintext if cfg is nil, until the test ends, and returns its address.
func serveNode(t *testing.T, n ternpb.TernServer, cfg *tls.Config) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	g := grpc.NewServer(opts...)
	ternpb.RegisterTernServer(g, n)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// openFails opens a client with opts, which must fail with an error that
// matches want and reads with each of wants, on one line.
func openFails(t *testing.T, opts Options, want error, wants ...string) {
	t.Helper()
	c, err := Open(t.Context(), opts)
	if err == nil {
		c.Close()
		t.Fatalf("Open(%s) worked, want %v", opts.Server, want)
	}
	if !errors.Is(err, want) {
		t.Errorf("Open(%s): %v, which does not match %v", opts.Server, err, want)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open(%s): %q lacks %q", opts.Server, err, w)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("Open(%s): the error is more than one line: %q", opts.Server, err)
	}
}

func TestTLSAndToken(t *testing.T) {
	ca := newTestCA(t, "tern test CA")
	node := &tokenNode{token: "s3cret"}
	addr := serveNode(t, node, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server", []string{"127.0.0.1"}, nil)}})

	c, err := Open(t.Context(), Options{Server: addr, TLS: &tls.Config{RootCAs: ca.pool}, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.OpenLog(t.Context(), "l"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenLog(t.Context(), "secret"); !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), `may not read "secret"`) {
		t.Errorf("OpenLog of a log not granted: %v, want ErrPermissionDenied with the server's message", err)
	}
	if seen, _ := node.calls(); len(seen) != 3 || seen[0] != "Bearer s3cret" || seen[1] != "Bearer s3cret" {
		t.Errorf("the server saw the authorization %q, want \"Bearer s3cret\" on each of 3 calls", seen)
	}

	openFails(t, Options{Server: addr, TLS: &tls.Config{RootCAs: ca.pool}, Token: "wrong"}, ErrUnauthenticated, "no principal has this token", "Options.Token")
	openFails(t, Options{Server: addr, TLS: &tls.Config{RootCAs: ca.pool}}, ErrUnauthenticated)
	openFails(t, Options{Server: addr, TLS: &tls.Config{RootCAs: ca.pool}, Token: "s3cret\n"}, ErrInvalid, "trailing newline")
}

// A token goes over plaintext too: a server on loopback may check tokens
// without TLS.
func TestTokenOverPlaintext(t *testing.T) {
	node := &tokenNode{token: "s3cret"}
	addr := serveNode(t, node, nil)
	c, err := Open(t.Context(), Options{Server: addr, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// A client and a server that disagree on TLS, or on a certificate, fail in
// Open with one line that says what is wrong and what to do.
func TestTLSMismatches(t *testing.T) {
	ca := newTestCA(t, "tern test CA")
	other := newTestCA(t, "another CA")
	serve := func(cert tls.Certificate) string {
		return serveNode(t, &tokenNode{}, &tls.Config{Certificates: []tls.Certificate{cert}})
	}
	good := serve(ca.issue(t, "server", []string{"127.0.0.1"}, nil))
	plain := serveNode(t, &tokenNode{}, nil)
	trust := &tls.Config{RootCAs: ca.pool}

	openFails(t, Options{Server: good}, ErrTLS, "the server at "+good+" closed the connection before answering: it may require TLS; give the client its CA (Options.TLS, tern --tls-ca)")
	openFails(t, Options{Server: plain, TLS: trust}, ErrTLS, "the server at "+plain+" does not speak TLS: drop TLS")
	openFails(t, Options{Server: good, TLS: &tls.Config{RootCAs: other.pool}}, ErrTLS, "signed by an unknown authority (issuer CN=tern test CA)", "--tls-ca")
	if _, err := Open(t.Context(), Options{Server: good, TLS: &tls.Config{RootCAs: other.pool}}); !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("the unknown authority's error does not wrap x509's: %v", err)
	}
	wrongName := serve(ca.issue(t, "server", []string{"tern.example"}, nil))
	openFails(t, Options{Server: wrongName, TLS: trust}, ErrTLS, `not valid for the name "127.0.0.1" (it is for tern.example)`, "--tls-server-name")
	// Which the caller fixes by naming the certificate's host.
	c, err := Open(t.Context(), Options{Server: wrongName, TLS: &tls.Config{RootCAs: ca.pool, ServerName: "tern.example"}})
	if err != nil {
		t.Fatalf("Open with ServerName set to the certificate's name: %v", err)
	}
	c.Close()
	expired := serve(ca.issue(t, "server", []string{"127.0.0.1"}, func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	}))
	openFails(t, Options{Server: expired, TLS: trust}, ErrTLS, "has expired or is not valid yet", "renew it")
}

// Under mutual TLS, the client's certificate is presented on every
// connection, and a client without one is told to give one.
func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t, "tern test CA")
	node := &tokenNode{}
	addr := serveNode(t, node, &tls.Config{
		Certificates: []tls.Certificate{ca.issue(t, "server", []string{"127.0.0.1"}, nil)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.pool,
	})
	openFails(t, Options{Server: addr, TLS: &tls.Config{RootCAs: ca.pool}}, ErrTLS, "refused the TLS connection", "--tls-cert and --tls-key")
	c, err := Open(t.Context(), Options{Server: addr, TLS: &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{ca.issue(t, "indexer", nil, nil)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, subjects := node.calls(); len(subjects) != 1 || subjects[0] != "indexer" {
		t.Errorf("the server saw the client certificates %q, want indexer's", subjects)
	}
}

// A client redirected to another node of a cluster reaches it with the same
// TLS and token, checking that node's certificate against that node's own
// address.
func TestRedirectKeepsTLSAndToken(t *testing.T) {
	ca := newTestCA(t, "tern test CA")
	owner := &tokenNode{token: "s3cret"}
	// The owner's certificate holds "localhost" only, and the first node's
	// 127.0.0.1 only: a client that checked the owner against the first
	// node's name would refuse it.
	ownerAddr := serveNode(t, owner, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "owner", []string{"localhost"}, nil)}})
	_, port, _ := net.SplitHostPort(ownerAddr)
	first := &tokenNode{token: "s3cret", redirect: net.JoinHostPort("localhost", port)}
	firstAddr := serveNode(t, first, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "first", []string{"127.0.0.1"}, nil)}})

	c, err := Open(t.Context(), Options{Server: firstAddr, TLS: &tls.Config{RootCAs: ca.pool}, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.OpenLog(t.Context(), "l")
	if err != nil {
		t.Fatalf("OpenLog through a redirect: %v", err)
	}
	if _, err := l.Info(t.Context()); err != nil {
		t.Fatal(err)
	}
	if seen, _ := owner.calls(); len(seen) != 2 || seen[0] != "Bearer s3cret" || seen[1] != "Bearer s3cret" {
		t.Errorf("the owner saw the authorization %q, want \"Bearer s3cret\" on both calls", seen)
	}
}

// peerTLS is the TLS of the connection a call came on.
func peerTLS(ctx context.Context) (credentials.TLSInfo, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return credentials.TLSInfo{}, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	return ti, ok
}
