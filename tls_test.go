package tern_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/internal/certs/certstest"
	"github.com/ternwal/tern/internal/server"
)

func TestOptionsTLSAndTokenNeedAServer(t *testing.T) {
	for name, opts := range map[string]tern.Options{
		"TLS":   {Dir: t.TempDir(), TLS: &tls.Config{}},
		"Token": {Dir: t.TempDir(), Token: "s3cret"},
		"Nodes": {Dir: t.TempDir(), Nodes: []string{"127.0.0.1:7070"}},
	} {
		c, err := tern.Open(t.Context(), opts)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, tern.ErrInvalid) || !strings.Contains(err.Error(), "apply to a server") || !strings.Contains(err.Error(), name) {
			t.Errorf("Open of a data directory with %s: %v, want ErrInvalid saying they apply to a server", name, err)
		}
	}
}

// A remote client reaches a server over TLS with its token, and one that
// does not trust the server's certificate is told so.
func TestRemoteTLS(t *testing.T) {
	ca := certstest.NewCA(t, "tern test CA")
	c, err := tern.Open(t.Context(), tern.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var tokens []string
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		tokens = append(tokens, strings.Join(md.Get("authorization"), ","))
		mu.Unlock()
		return h(ctx, req)
	}
	srv := server.New(c, server.Options{})
	g := grpc.NewServer(append(grpcopts.Server(),
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serverCert(t, ca, "server")}})),
		grpc.UnaryInterceptor(record))...)
	srv.Register(g)
	go g.Serve(lis)
	defer func() {
		srv.Close()
		g.Stop()
	}()
	addr := lis.Addr().String()

	rc, err := tern.Open(t.Context(), tern.Options{Server: addr, TLS: &tls.Config{RootCAs: ca.Pool()}, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := rc.CreateLog(t.Context(), "secured", tern.LogOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(tokens) == 0 || tokens[len(tokens)-1] != "Bearer s3cret" {
		t.Errorf("the server saw the authorization %q, want \"Bearer s3cret\"", tokens)
	}
	mu.Unlock()

	other := certstest.NewCA(t, "another CA")
	if _, err := tern.Open(t.Context(), tern.Options{Server: addr, TLS: &tls.Config{RootCAs: other.Pool()}}); !errors.Is(err, tern.ErrTLS) || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("Open with a CA that did not sign the server's certificate: %v, want ErrTLS naming the unknown authority", err)
	}
}

// serverCert is a server certificate of ca for 127.0.0.1.
func serverCert(t *testing.T, ca *certstest.CA, cn string) tls.Certificate {
	return ca.Issue(t, certstest.LeafOptions{CommonName: cn, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}).TLSCertificate(t)
}
