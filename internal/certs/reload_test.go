package certs_test

import (
	"context"
	"crypto/tls"
	"math/big"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/certs/certstest"
)

// servedSerial dials addr and returns the serial of the certificate the
// server presents.
func servedSerial(t *testing.T, addr string, cfg *tls.Config) (*big.Int, error) {
	t.Helper()
	c, err := dial(t, addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

func TestReloadServesNewCertificate(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	f := files(t, false)
	oldLeaf := nodeLeaf(t, ca, "old")
	s := store(t, f, oldLeaf, nil)
	srv := serve(t, s.ServerConfig())

	before, err := dial(t, srv.addr, trusting(ca, "localhost"))
	if err != nil {
		t.Fatal(err)
	}

	newLeaf := nodeLeaf(t, ca, "new")
	newLeaf.WriteFiles(t, f.Cert, f.Key)
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := s.Certificate().Subject.CommonName; got != "new" {
		t.Errorf("Certificate() is %q after the reload, want new", got)
	}

	got, err := servedSerial(t, srv.addr, trusting(ca, "localhost"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Cmp(newLeaf.Cert.SerialNumber) != 0 {
		t.Errorf("a new connection sees serial %s, want the new certificate's %s", got, newLeaf.Cert.SerialNumber)
	}

	// The connection opened before goes on, with the certificate it had.
	for i := range 3 {
		if err := echo(before, strings.Repeat("x", i+1)); err != nil {
			t.Fatalf("the connection opened before the reload: %v", err)
		}
	}
	if got := before.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(oldLeaf.Cert.SerialNumber) != 0 {
		t.Errorf("the old connection's certificate changed to %s", got)
	}
}

func TestReloadFailureKeepsServing(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	f := files(t, true)
	leaf := nodeLeaf(t, ca, "server")
	s := store(t, f, leaf, ca)
	srv := serve(t, s.ServerConfig())
	client := trusting(ca, "localhost")
	client.Certificates = []tls.Certificate{nodeLeaf(t, ca, "client").TLSCertificate(t)}

	for _, tc := range []struct {
		name string
		path string
		data []byte
		want string
	}{
		{"garbage certificate", f.Cert, []byte("garbage"), "no PEM certificate"},
		{"garbage key", f.Key, []byte("garbage"), "no PEM private key"},
		{"garbage client CA", f.ClientCA, []byte("garbage"), "no PEM certificate"},
		{"key of another certificate", f.Key, nodeLeaf(t, ca, "other").KeyPEM, "does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			write(t, tc.path, tc.data)
			mustFail(t, s.Reload(), tc.want, tc.path)

			got, err := servedSerial(t, srv.addr, client)
			if err != nil {
				t.Fatalf("after a failed reload: %v", err)
			}
			if got.Cmp(leaf.Cert.SerialNumber) != 0 {
				t.Errorf("after a failed reload the server presents %s, want the old %s", got, leaf.Cert.SerialNumber)
			}
			srv.next(t)
			write(t, tc.path, good)
			if err := s.Reload(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A reloaded client CA applies to the next handshake, on the server and in
// ClientConfig, without new configurations.
func TestReloadClientCA(t *testing.T) {
	oldCA := certstest.NewCA(t, "old-ca")
	newCA := certstest.NewCA(t, "new-ca")
	fa, fb := files(t, true), files(t, true)
	nodeA := store(t, fa, nodeLeaf(t, oldCA, "node-a"), oldCA)
	nodeB := store(t, fb, nodeLeaf(t, oldCA, "node-b"), oldCA)
	srv := serve(t, nodeA.ServerConfig())
	clientB := nodeB.ClientConfig("localhost")
	if _, err := dial(t, srv.addr, clientB); err != nil {
		t.Fatal(err)
	}
	srv.next(t)

	// node-a moves to the new CA: node-b, of the old one, is refused both
	// ways.
	nodeLeaf(t, newCA, "node-a").WriteFiles(t, fa.Cert, fa.Key)
	newCA.WriteFile(t, fa.ClientCA)
	if err := nodeA.Reload(); err != nil {
		t.Fatal(err)
	}
	_, err := dial(t, srv.addr, clientB)
	mustFail(t, err, "unknown authority")
	srv.next(t)

	// node-b moves too, and the configuration it made before works again.
	nodeLeaf(t, newCA, "node-b").WriteFiles(t, fb.Cert, fb.Key)
	newCA.WriteFile(t, fb.ClientCA)
	if err := nodeB.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, srv.addr, clientB); err != nil {
		t.Fatalf("both nodes on the new CA: %v", err)
	}
	h := srv.next(t)
	if h.err != nil {
		t.Fatal(h.err)
	}
	if got := h.state.PeerCertificates[0].Issuer.CommonName; got != "new-ca" {
		t.Errorf("node-b's certificate is issued by %q, want new-ca", got)
	}
}

// A client that resumes a TLS session after the server's client CA changed
// must be verified against the new CA, not let in on the old session.
func TestReloadClientCARefusesResumption(t *testing.T) {
	oldCA := certstest.NewCA(t, "old-ca")
	newCA := certstest.NewCA(t, "new-ca")
	f := files(t, true)
	s := store(t, f, nodeLeaf(t, oldCA, "server"), oldCA)
	srv := serve(t, s.ServerConfig())
	client := trusting(oldCA, "localhost")
	client.Certificates = []tls.Certificate{nodeLeaf(t, oldCA, "client").TLSCertificate(t)}
	client.ClientSessionCache = tls.NewLRUClientSessionCache(4)

	if _, err := dial(t, srv.addr, client); err != nil {
		t.Fatal(err)
	}
	srv.next(t)
	c, err := dial(t, srv.addr, client)
	if err != nil {
		t.Fatal(err)
	}
	srv.next(t)
	if !c.ConnectionState().DidResume {
		t.Fatal("the second connection did not resume its session: the test shows nothing")
	}

	newCA.WriteFile(t, f.ClientCA)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, srv.addr, client); err == nil {
		t.Fatal("a client of the old CA resumed its session after the client CA changed")
	}
	if h := srv.next(t); h.err == nil {
		t.Fatal("the server let in a client of the old CA")
	}
}

func TestWatch(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	f := files(t, false)
	s := store(t, f, nodeLeaf(t, ca, "first"), nil)
	srv := serve(t, s.ServerConfig())

	var (
		mu      sync.Mutex
		reports []error
	)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Watch(ctx, 10*time.Millisecond, func(err error) {
			mu.Lock()
			reports = append(reports, err)
			mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })

	// waitFor polls until cond holds, with a deadline that only a broken
	// watcher misses.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("the watcher did not %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	second := nodeLeaf(t, ca, "second")
	second.WriteFiles(t, f.Cert, f.Key)
	waitFor("serve the new certificate", func() bool {
		got, err := servedSerial(t, srv.addr, trusting(ca, "localhost"))
		if err != nil {
			t.Fatal(err)
		}
		srv.next(t)
		return got.Cmp(second.Cert.SerialNumber) == 0
	})
	waitFor("report the reload", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reports) > 0 && reports[len(reports)-1] == nil
	})

	// A bad file is reported, and the certificate served stays.
	mu.Lock()
	reports = nil
	mu.Unlock()
	write(t, f.Cert, []byte("garbage"))
	var bad error
	waitFor("report the bad file", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, err := range reports {
			if err != nil {
				bad = err
				return true
			}
		}
		return false
	})
	mustFail(t, bad, "certs: ", f.Cert, "no PEM certificate")
	got, err := servedSerial(t, srv.addr, trusting(ca, "localhost"))
	if err != nil {
		t.Fatal(err)
	}
	srv.next(t)
	if got.Cmp(second.Cert.SerialNumber) != 0 {
		t.Errorf("after a bad file the server presents %s, want %s", got, second.Cert.SerialNumber)
	}

	// Fixed, it is served again.
	third := nodeLeaf(t, ca, "third")
	third.WriteFiles(t, f.Cert, f.Key)
	waitFor("serve the certificate of the fixed file", func() bool {
		return s.Certificate().SerialNumber.Cmp(third.Cert.SerialNumber) == 0
	})

	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not return when its context ended")
	}
}
