package blob_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/miniotest"
)

// A PUT whose body a byte changed on its way over plain HTTP is refused by
// the store, and nothing is stored: the payload's SHA-256 is signed with
// the request. The same PUT then goes through unchanged.
func TestS3PutChangedOnTheWay(t *testing.T) {
	s := miniotest.Start(t)
	p := startFlipProxy(t, s.Endpoint)
	o := s3Options(s, "changed")
	o.Endpoint = p.addr
	b := openS3(t, o)
	defer b.Close()

	// 0xFF is in no HTTP header, so the proxy changes the body's first byte.
	data := bytes.Repeat([]byte{0xFF}, 4096)
	p.armed.Store(true)
	err := b.PutIfAbsent(t.Context(), "k", data)
	if err == nil {
		t.Fatal("a PUT whose body changed on its way succeeded")
	}
	if p.armed.Load() {
		t.Fatal("the proxy changed nothing: the test did not run")
	}
	t.Logf("the store refused the changed PUT: %v", err)
	if _, err := b.Stat(t.Context(), "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("after the refused PUT, Stat = %v, want ErrNotFound", err)
	}
	if err := b.PutIfAbsent(t.Context(), "k", data); err != nil {
		t.Fatalf("the same PUT unchanged: %v", err)
	}
	if got, err := b.Get(t.Context(), "k"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %d bytes, %v; want the %d bytes put", len(got), err, len(data))
	}
}

// flipProxy forwards TCP connections to a server; while armed, it changes
// the first 0xFF byte a client sends, once.
type flipProxy struct {
	addr  string
	armed atomic.Bool
}

func startFlipProxy(t *testing.T, target string) *flipProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flipProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
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
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Go(func() { io.Copy(c, u); c.Close() })
			wg.Go(func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if i := bytes.IndexByte(buf[:n], 0xFF); i >= 0 && p.armed.CompareAndSwap(true, false) {
							buf[i] = 0xFE
						}
						if _, err := u.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						u.Close()
						return
					}
				}
			})
		}
	})
	return p
}
