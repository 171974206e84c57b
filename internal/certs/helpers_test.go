package certs_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/certs"
	"github.com/ternwal/tern/internal/certs/certstest"
)

// files returns the paths of a Store's files in a new directory; ClientCA
// is empty unless mutual.
func files(t *testing.T, mutual bool) certs.Files {
	dir := t.TempDir()
	f := certs.Files{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	if mutual {
		f.ClientCA = filepath.Join(dir, "ca.pem")
	}
	return f
}

// nodeLeaf issues a certificate for localhost and 127.0.0.1, for servers
// and clients alike, as a cluster's nodes have.
func nodeLeaf(t *testing.T, ca *certstest.CA, cn string) *certstest.Leaf {
	return ca.Issue(t, certstest.LeafOptions{
		CommonName: cn,
		DNS:        []string{"localhost"},
		IPs:        []net.IP{net.IPv4(127, 0, 0, 1)},
		Server:     true,
		Client:     true,
	})
}

// store writes leaf (and ca, when f is mutual) to f's files and loads them.
func store(t *testing.T, f certs.Files, leaf *certstest.Leaf, ca *certstest.CA) *certs.Store {
	leaf.WriteFiles(t, f.Cert, f.Key)
	if f.ClientCA != "" {
		ca.WriteFile(t, f.ClientCA)
	}
	s, err := certs.Load(f)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

// server is a TLS echo server on 127.0.0.1.
type server struct {
	addr string
	// handshakes receives the outcome of each accepted connection's
	// handshake, as the server saw it.
	handshakes chan handshake
}

type handshake struct {
	state tls.ConnectionState
	err   error
}

func serve(t *testing.T, cfg *tls.Config) *server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{addr: ln.Addr().String(), handshakes: make(chan handshake, 64)}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			c := tls.Server(raw, cfg)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				err := c.Handshake()
				select {
				case srv.handshakes <- handshake{c.ConnectionState(), err}:
				default:
				}
				if err != nil {
					return
				}
				buf := make([]byte, 64)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			})
		}
	})
	return srv
}

// next returns the server's view of its next handshake.
func (s *server) next(t *testing.T) handshake {
	t.Helper()
	select {
	case h := <-s.handshakes:
		return h
	case <-time.After(30 * time.Second):
		t.Fatal("the server saw no handshake")
		return handshake{}
	}
}

// dial connects to addr with cfg and checks that data goes both ways; the
// connection is closed at the end of the test. Under TLS 1.3 a server that
// refuses a client certificate says so after the client's handshake: the
// echo is what shows it.
func dial(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	if err := echo(c, "ping"); err != nil {
		return nil, err
	}
	return c, nil
}

// echo writes msg to c and reads it back.
func echo(c *tls.Conn, msg string) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	for n := 0; n < len(buf); {
		m, err := c.Read(buf[n:])
		if err != nil {
			return err
		}
		n += m
	}
	if !bytes.Equal(buf, []byte(msg)) {
		return errors.New("echo: got " + string(buf))
	}
	return nil
}

// mustFail checks that err is an error whose text holds each of want.
func mustFail(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// trusting returns a plain client configuration that trusts ca, for name.
func trusting(ca *certstest.CA, name string) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool(), ServerName: name, MinVersion: tls.VersionTLS12}
}
