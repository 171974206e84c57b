package server

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ternwal/tern/internal/certs"
	"github.com/ternwal/tern/internal/certs/certstest"
	"github.com/ternwal/tern/internal/cluster"
)

// A member that does not answer is passed over (unreachable); one that
// answers in another tongue (plaintext to a TLS node) is a refusal.
func TestProbeMember(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, "cluster CA")
	caFile := filepath.Join(dir, "ca.pem")
	ca.WriteFile(t, caFile)
	leaf := ca.Issue(t, certstest.LeafOptions{CommonName: "tern-node-n1", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true})
	leaf.WriteFiles(t, filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"))
	st, err := certs.Load(certs.Files{Cert: filepath.Join(dir, "n1.pem"), Key: filepath.Join(dir, "n1-key.pem"), ClientCA: caFile})
	if err != nil {
		t.Fatal(err)
	}

	// Nothing listens: unreachable.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	if err := probeMember(t.Context(), cluster.Member{ID: "n2", Addr: closed}, st); !errors.Is(err, errUnreachable) {
		t.Errorf("no listener: %v, want unreachable", err)
	}

	// A listener that accepts and says nothing: unreachable, after the
	// probe's timeout.
	hung := fakeMember(t, nil, func(c net.Conn) {
		defer c.Close()
		io.Copy(io.Discard, c) // until the probe gives up
	})
	if err := probeMember(t.Context(), cluster.Member{ID: "n3", Addr: hung}, st); !errors.Is(err, errUnreachable) {
		t.Errorf("a hung member: %v, want unreachable", err)
	}

	// A member on its way out: it accepts connections and closes them at
	// once. Passed over, with TLS and without.
	dying := fakeMember(t, nil, func(c net.Conn) { c.Close() })
	for _, st := range []*certs.Store{st, nil} {
		if err := probeMember(t.Context(), cluster.Member{ID: "n5", Addr: dying}, st); !errors.Is(err, errUnreachable) {
			t.Errorf("a dying member, TLS %v: %v, want unreachable", st != nil, err)
		}
	}

	// A TLS server, reached without TLS: refused, and said so.
	tlsAddr := fakeMember(t, &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate(t)}}, handshakeThenRead)
	err = probeMember(t.Context(), cluster.Member{ID: "n6", Addr: tlsAddr}, nil)
	if err == nil || errors.Is(err, errUnreachable) || !strings.Contains(err.Error(), "serves TLS and this node does not") {
		t.Errorf("a TLS member probed without TLS: %v, want a refusal that says so", err)
	}

	// A TLS member of the same CA that refuses this node's certificate:
	// with TLS 1.3 the handshake ends before the member checks it, and the
	// refusal comes as an alert on the call. Refused, not passed over.
	other := certstest.NewCA(t, "another CA")
	picky := fakeMember(t, &tls.Config{
		Certificates: []tls.Certificate{leaf.TLSCertificate(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    other.Pool(),
		NextProtos:   []string{"h2"}, // as gRPC requires
	}, handshakeThenRead)
	if err := probeMember(t.Context(), cluster.Member{ID: "n7", Addr: picky}, st); err == nil || errors.Is(err, errUnreachable) {
		t.Errorf("a member that refuses this node's certificate: %v, want a refusal", err)
	}

	// A plaintext server, reached with TLS: refused.
	plain := start(t)
	addr := plain.conn.Target()
	if err := probeMember(t.Context(), cluster.Member{ID: "n4", Addr: addr}, st); err == nil || errors.Is(err, errUnreachable) {
		t.Errorf("a plaintext member probed with TLS: %v, want a refusal", err)

	}
}

// fakeMember serves each connection to a loopback port with serve, over TLS
// with conf when it is not nil, until the test ends, and returns the
// port's address.
func fakeMember(t *testing.T, conf *tls.Config, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if conf != nil {
		l = tls.NewListener(l, conf)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return l.Addr().String()
}

// handshakeThenRead completes a TLS handshake (sending an alert if it
// refuses the client) and waits for the client's first byte.
func handshakeThenRead(c net.Conn) {
	defer c.Close()
	if c.(*tls.Conn).Handshake() == nil {
		c.Read(make([]byte, 1))
	}
}
