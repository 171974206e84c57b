package certs_test

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/ternwal/tern/internal/certs/certstest"
)

func TestServerGoodCertificate(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	leaf := nodeLeaf(t, ca, "server")
	s := store(t, files(t, false), leaf, nil)
	srv := serve(t, s.ServerConfig())

	for _, name := range []string{"localhost", "127.0.0.1"} {
		cfg := trusting(ca, name)
		cfg.NextProtos = []string{"h2"}
		c, err := dial(t, srv.addr, cfg)
		if err != nil {
			t.Fatalf("dial %s: %v", name, err)
		}
		st := c.ConnectionState()
		if got := st.PeerCertificates[0].SerialNumber; got.Cmp(leaf.Cert.SerialNumber) != 0 {
			t.Errorf("%s: served serial %s, want %s", name, got, leaf.Cert.SerialNumber)
		}
		if st.NegotiatedProtocol != "h2" {
			t.Errorf("%s: ALPN %q, want h2", name, st.NegotiatedProtocol)
		}
		if h := srv.next(t); h.err != nil {
			t.Errorf("%s: server handshake: %v", name, h.err)
		}
	}

	// A client that offers no ALPN (the replica stream's) still connects.
	c, err := dial(t, srv.addr, trusting(ca, "localhost"))
	if err != nil {
		t.Fatalf("dial without ALPN: %v", err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "" {
		t.Errorf("ALPN %q without an offer", p)
	}
}

func TestServerRefusedByClient(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	other := certstest.NewCA(t, "other")
	s := store(t, files(t, false), nodeLeaf(t, ca, "server"), nil)
	srv := serve(t, s.ServerConfig())

	_, err := dial(t, srv.addr, trusting(other, "localhost"))
	mustFail(t, err, "unknown authority")

	_, err = dial(t, srv.addr, trusting(ca, "elsewhere.example"))
	mustFail(t, err, "not elsewhere.example")

	_, err = dial(t, srv.addr, trusting(ca, "127.0.0.2"))
	mustFail(t, err, "127.0.0.2")
}

func TestMutual(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	other := certstest.NewCA(t, "other")
	s := store(t, files(t, true), nodeLeaf(t, ca, "server"), ca)
	srv := serve(t, s.ServerConfig())

	client := func(leaf *certstest.Leaf) *tls.Config {
		cfg := trusting(ca, "localhost")
		if leaf != nil {
			// Sent whatever CAs the server names, as an intruder would.
			c := leaf.TLSCertificate(t)
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
		}
		return cfg
	}

	t.Run("no certificate", func(t *testing.T) {
		_, err := dial(t, srv.addr, client(nil))
		mustFail(t, err, "certificate required")
		mustFail(t, srv.next(t).err, "didn't provide a certificate")
	})
	t.Run("another CA", func(t *testing.T) {
		leaf := other.Issue(t, certstest.LeafOptions{CommonName: "intruder", Client: true})
		_, err := dial(t, srv.addr, client(leaf))
		mustFail(t, err, "unknown certificate authority")
		mustFail(t, srv.next(t).err, "unknown authority")
	})
	t.Run("server certificate only", func(t *testing.T) {
		leaf := ca.Issue(t, certstest.LeafOptions{CommonName: "server-only", Server: true})
		_, err := dial(t, srv.addr, client(leaf))
		mustFail(t, err, "bad certificate")
		mustFail(t, srv.next(t).err, "incompatible key usage")
	})
	t.Run("good", func(t *testing.T) {
		leaf := ca.Issue(t, certstest.LeafOptions{CommonName: "indexer", Client: true})
		if _, err := dial(t, srv.addr, client(leaf)); err != nil {
			t.Fatal(err)
		}
		h := srv.next(t)
		if h.err != nil {
			t.Fatal(h.err)
		}
		if got := h.state.PeerCertificates[0].Subject.String(); got != "CN=indexer" {
			t.Errorf("the server sees subject %q, want CN=indexer", got)
		}
		if len(h.state.VerifiedChains) == 0 {
			t.Error("the server has no verified chain")
		}
	})
}

// With ClientAuth lowered to VerifyClientCertIfGiven, a client without a
// certificate gets in, one with a certificate of another CA does not, and
// a good one is verified.
func TestMutualOptional(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	other := certstest.NewCA(t, "other")
	s := store(t, files(t, true), nodeLeaf(t, ca, "server"), ca)
	cfg := s.ServerConfig()
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	srv := serve(t, cfg)
	client := func(leaf *certstest.Leaf) *tls.Config {
		c := trusting(ca, "localhost")
		if leaf != nil {
			// Sent whatever CAs the server names, as an intruder would.
			cert := leaf.TLSCertificate(t)
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		}
		return c
	}

	if _, err := dial(t, srv.addr, client(nil)); err != nil {
		t.Fatalf("no certificate: %v", err)
	}
	if h := srv.next(t); h.err != nil || len(h.state.PeerCertificates) != 0 {
		t.Fatalf("no certificate: the server saw %v, %d certificates", h.err, len(h.state.PeerCertificates))
	}
	_, err := dial(t, srv.addr, client(other.Issue(t, certstest.LeafOptions{CommonName: "intruder", Client: true})))
	mustFail(t, err, "unknown certificate authority")
	mustFail(t, srv.next(t).err, "unknown authority")
	if _, err := dial(t, srv.addr, client(ca.Issue(t, certstest.LeafOptions{CommonName: "indexer", Client: true}))); err != nil {
		t.Fatal(err)
	}
	if h := srv.next(t); h.err != nil || len(h.state.VerifiedChains) == 0 {
		t.Fatalf("a good certificate: %v, verified chains %d", h.err, len(h.state.VerifiedChains))
	}
}

// ClientConfig is how a node dials another: both present their
// certificates, both verify the other's against the cluster's CA.
func TestClientConfig(t *testing.T) {
	ca := certstest.NewCA(t, "cluster")
	other := certstest.NewCA(t, "other")
	nodeA := store(t, files(t, true), nodeLeaf(t, ca, "node-a"), ca)
	nodeB := store(t, files(t, true), nodeLeaf(t, ca, "node-b"), ca)
	srv := serve(t, nodeA.ServerConfig())

	for _, name := range []string{"localhost", "127.0.0.1", "localhost:7000"} {
		c, err := dial(t, srv.addr, nodeB.ClientConfig(name))
		if err != nil {
			t.Fatalf("node-b dials node-a as %s: %v", name, err)
		}
		if got := c.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "node-a" {
			t.Errorf("node-b reached %q, want node-a", got)
		}
		h := srv.next(t)
		if h.err != nil {
			t.Fatal(h.err)
		}
		if got := h.state.PeerCertificates[0].Subject.CommonName; got != "node-b" {
			t.Errorf("node-a sees %q, want node-b", got)
		}
	}

	t.Run("wrong name", func(t *testing.T) {
		_, err := dial(t, srv.addr, nodeB.ClientConfig("node-c.example"))
		mustFail(t, err, "certs: the server's certificate", "node-c.example")
		srv.next(t)
		_, err = dial(t, srv.addr, nodeB.ClientConfig("127.0.0.2"))
		mustFail(t, err, "certs: the server's certificate", "127.0.0.2")
		srv.next(t)
		_, err = dial(t, srv.addr, nodeB.ClientConfig(""))
		mustFail(t, err, "no server name")
		srv.next(t)
		// Dialed by host name, the name sent as SNI is the one verified.
		_, port, _ := net.SplitHostPort(srv.addr)
		if _, err := dial(t, net.JoinHostPort("localhost", port), nodeB.ClientConfig("")); err != nil {
			t.Errorf("dialing localhost with no server name given: %v", err)
		}
		srv.next(t)
	})
	t.Run("server of another CA", func(t *testing.T) {
		// The impostor accepts node-b, but its own certificate is not the
		// cluster's.
		impostor := store(t, files(t, true), nodeLeaf(t, other, "impostor"), ca)
		srv := serve(t, impostor.ServerConfig())
		_, err := dial(t, srv.addr, nodeB.ClientConfig("localhost"))
		mustFail(t, err, "certs: the server's certificate", "CN=impostor", "unknown authority")
	})
	t.Run("server certificate for clients only", func(t *testing.T) {
		leaf := ca.Issue(t, certstest.LeafOptions{CommonName: "client-only", DNS: []string{"localhost"}, Client: true})
		s := store(t, files(t, true), leaf, ca)
		srv := serve(t, s.ServerConfig())
		_, err := dial(t, srv.addr, nodeB.ClientConfig("localhost"))
		mustFail(t, err, "certs: the server's certificate", "key usage")
	})
	t.Run("client of another CA", func(t *testing.T) {
		intruder := store(t, files(t, true), nodeLeaf(t, other, "intruder"), ca)
		_, err := dial(t, srv.addr, intruder.ClientConfig("localhost"))
		mustFail(t, err, "unknown certificate authority")
		mustFail(t, srv.next(t).err, "unknown authority")
	})
}

func TestVerifyClient(t *testing.T) {
	ca := certstest.NewCA(t, "cluster")
	other := certstest.NewCA(t, "other")
	s := store(t, files(t, true), nodeLeaf(t, ca, "node-a"), ca)
	if err := s.VerifyClient(s.Certificate()); err != nil {
		t.Errorf("own certificate: %v", err)
	}
	mustFail(t, s.VerifyClient(nodeLeaf(t, other, "intruder").Cert), "certs: ", "CN=intruder", "unknown authority")
	mustFail(t, s.VerifyClient(ca.Issue(t, certstest.LeafOptions{CommonName: "web", Server: true}).Cert), "key usage")
	mustFail(t, s.VerifyClient(nil), "no client certificate")

	plain := store(t, files(t, false), nodeLeaf(t, ca, "node-a"), nil)
	mustFail(t, plain.VerifyClient(plain.Certificate()), "no client CA", "--tls-client-ca")
}

func TestVersions(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	s := store(t, files(t, false), nodeLeaf(t, ca, "server"), nil)
	srv := serve(t, s.ServerConfig())

	c, err := dial(t, srv.addr, trusting(ca, "localhost"))
	if err != nil {
		t.Fatal(err)
	}
	if v := c.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("Go peers negotiated %s, want TLS 1.3", tls.VersionName(v))
	}
	srv.next(t)

	cfg := trusting(ca, "localhost")
	cfg.MaxVersion = tls.VersionTLS12
	c, err = dial(t, srv.addr, cfg)
	if err != nil {
		t.Fatalf("a TLS 1.2 client: %v", err)
	}
	if v := c.ConnectionState().Version; v != tls.VersionTLS12 {
		t.Errorf("a TLS 1.2 client negotiated %s", tls.VersionName(v))
	}
	srv.next(t)

	cfg = trusting(ca, "localhost")
	cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	_, err = dial(t, srv.addr, cfg)
	mustFail(t, err, "protocol version")
	mustFail(t, srv.next(t).err, "unsupported versions")
}

// Fields the caller sets on ServerConfig's Config apply to each handshake.
func TestServerConfigCallerFields(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	s := store(t, files(t, true), nodeLeaf(t, ca, "server"), ca)
	cfg := s.ServerConfig()
	cfg.MinVersion = tls.VersionTLS13
	var seen []string
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		seen = append(seen, cs.PeerCertificates[0].Subject.CommonName)
		return nil
	}
	srv := serve(t, cfg)

	client := trusting(ca, "localhost")
	client.Certificates = []tls.Certificate{nodeLeaf(t, ca, "client").TLSCertificate(t)}
	if _, err := dial(t, srv.addr, client); err != nil {
		t.Fatal(err)
	}
	srv.next(t)
	if len(seen) != 1 || seen[0] != "client" {
		t.Errorf("the caller's VerifyConnection saw %q, want [client]", seen)
	}

	client.MaxVersion = tls.VersionTLS12
	_, err := dial(t, srv.addr, client)
	mustFail(t, err, "protocol version")
	srv.next(t)
}
