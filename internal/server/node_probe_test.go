package server

import (
	"errors"
	"net"
	"path/filepath"
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
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	if err := probeMember(t.Context(), cluster.Member{ID: "n3", Addr: hung.Addr().String()}, st); !errors.Is(err, errUnreachable) {
		t.Errorf("a hung member: %v, want unreachable", err)
	}

	// A plaintext server, reached with TLS: refused.
	plain := start(t)
	addr := plain.conn.Target()
	if err := probeMember(t.Context(), cluster.Member{ID: "n4", Addr: addr}, st); err == nil || errors.Is(err, errUnreachable) {
		t.Errorf("a plaintext member probed with TLS: %v, want a refusal", err)
	}
}
