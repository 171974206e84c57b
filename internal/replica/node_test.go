package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/vfs"
)

// nodeEnv is a Store reached as a Node: in process, or over the network.
type nodeEnv struct {
	store  *Store
	bucket *blob.Mem
	node   Node
	other  Node   // a second client of the same store: another connection
	stop   func() // stops the server; nil for Local
}

var nodeKinds = []struct {
	name string
	env  func(t *testing.T, opts ...func(*Options)) *nodeEnv
}{
	{"Local", localEnv},
	{"Conn", connEnv},
}

func forEachNode(t *testing.T, test func(t *testing.T, env *nodeEnv)) {
	for _, k := range nodeKinds {
		t.Run(k.name, func(t *testing.T) { test(t, k.env(t)) })
	}
}

func localEnv(t *testing.T, opts ...func(*Options)) *nodeEnv {
	bucket := blob.NewMem()
	s := open(t, vfs.NewMem(), append([]func(*Options){func(o *Options) { o.Bucket = bucket }}, opts...)...)
	return &nodeEnv{store: s, bucket: bucket, node: NewLocal(s), other: NewLocal(s)}
}

func connEnv(t *testing.T, opts ...func(*Options)) *nodeEnv {
	return connEnvKeepalive(t, defaultKeepalive, opts...)
}

// connEnvKeepalive is connEnv with ka as the keepalive of the add
// connections, at both ends.
func connEnvKeepalive(t *testing.T, ka addKeepalive, opts ...func(*Options)) *nodeEnv {
	env := localEnv(t, opts...)
	g := grpc.NewServer(ServerOptions()...)
	srv := NewServer(env.store)
	srv.ka = ka
	srv.Register(g)
	addr := serveGRPC(t, g, srv)
	dial := func() Node {
		c, err := Dial(addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.ka = ka
		t.Cleanup(func() { c.Close() })
		return c
	}
	env.node, env.other = dial(), dial()
	env.stop = func() {
		g.Stop()
		srv.Close()
	}
	return env
}

// serveGRPC serves g, and srv's add streams unless srv is nil, on a
// loopback port until the test ends, and returns its address.
func serveGRPC(tb testing.TB, g *grpc.Server, srv *Server) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	if srv != nil {
		lis = srv.Listen(lis)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		g.Serve(lis)
	}()
	tb.Cleanup(func() {
		g.Stop()
		if srv != nil {
			srv.Close()
		}
		<-served
	})
	return lis.Addr().String()
}

// watch follows a stream's callbacks.
type watch struct {
	t      *testing.T
	counts chan uint64
	errs   chan error
	last   uint64
}

func newWatch(t *testing.T, max int) *watch {
	return &watch{t: t, counts: make(chan uint64, max), errs: make(chan error, 1)}
}

func (w *watch) onDurable(count uint64) { w.counts <- count }
func (w *watch) onErr(err error)        { w.errs <- err }

// stream opens a stream watched by a new watch.
func stream(t *testing.T, node Node, seg SegmentID, epoch uint64, max int) (Sender, *watch) {
	t.Helper()
	w := newWatch(t, max)
	sender, err := node.Stream(t.Context(), seg, epoch, w.onDurable, w.onErr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sender.Close() })
	return sender, w
}

// waitCount waits until the stream reports count, checking that counts
// only grow.
func (w *watch) waitCount(count uint64) {
	w.t.Helper()
	for w.last < count {
		select {
		case c := <-w.counts:
			if c <= w.last {
				w.t.Fatalf("onDurable(%d) after onDurable(%d)", c, w.last)
			}
			w.last = c
		case err := <-w.errs:
			w.t.Fatalf("stream failed at count %d, waiting for %d: %v", w.last, count, err)
		}
	}
	if w.last != count {
		w.t.Fatalf("onDurable(%d), waiting for %d", w.last, count)
	}
}

// waitErr waits for the stream to fail.
func (w *watch) waitErr() error {
	w.t.Helper()
	for {
		select {
		case c := <-w.counts:
			w.last = c
		case err := <-w.errs:
			if err == nil {
				w.t.Fatal("onErr(nil)")
			}
			return err
		}
	}
}

func sendAll(t *testing.T, s Sender, from uint64, frags [][]byte) {
	t.Helper()
	for i, f := range frags {
		if err := send(s, from+uint64(i), f); err != nil {
			t.Fatalf("Send %d: %v", from+uint64(i), err)
		}
	}
}

func checkNodeFrags(t *testing.T, node Node, seg SegmentID, want [][]byte) {
	t.Helper()
	ctx := t.Context()
	sizes, err := node.List(ctx, seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != len(want) {
		t.Fatalf("List: %d fragments, want %d", len(sizes), len(want))
	}
	for n, w := range want {
		p := make([]byte, len(w)+10)
		k, err := node.Read(ctx, seg, uint64(n), 0, p)
		if k != len(w) || err != io.EOF || !bytes.Equal(p[:k], w) || sizes[n] != int64(len(w)) {
			t.Fatalf("Read fragment %d = %d, %v; want %d bytes, EOF", n, k, err, len(w))
		}
	}
}

func TestNodeStream(t *testing.T) {
	forEachNode(t, func(t *testing.T, env *nodeEnv) {
		ctx := t.Context()
		want := frags(300, 2000)
		s, w := stream(t, env.node, segA, 1, len(want))
		sendAll(t, s, 0, want)
		w.waitCount(300)
		checkNodeFrags(t, env.node, segA, want)

		p := make([]byte, 100)
		if k, err := env.node.Read(ctx, segA, 3, 50, p); k != 100 || err != nil || !bytes.Equal(p, want[3][50:150]) {
			t.Errorf("Read inside a fragment = %d, %v", k, err)
		}
		if k, err := env.node.Read(ctx, segA, 3, int64(len(want[3])), p); k != 0 || err != io.EOF {
			t.Errorf("Read at the end = %d, %v; want 0, EOF", k, err)
		}
		_, err := env.node.Read(ctx, segA, 300, 0, p)
		wantErr(t, "Read beyond the count", err, rpcerr.ErrSegmentNotFound)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		// A second stream resends the last fragment and continues.
		more := frags(10, 10)
		s2, w2 := stream(t, env.node, segA, 1, 20)
		sendAll(t, s2, 299, [][]byte{want[299]})
		sendAll(t, s2, 300, more)
		w2.waitCount(310)
		checkNodeFrags(t, env.node, segA, append(want, more...))

		if err := env.node.Seal(ctx, segA, 305); err != nil {
			t.Fatal(err)
		}
		if err := send(s2, 310, []byte("late")); err != nil && !errors.Is(err, rpcerr.ErrSegmentSealed) {
			t.Fatalf("Send after Seal: %v", err)
		}
		wantErr(t, "stream after Seal", w2.waitErr(), rpcerr.ErrSegmentSealed)
		wantErr(t, "Send after the stream failed", send(s2, 311, []byte("late")), rpcerr.ErrSegmentSealed)

		keys := make([]string, 305)
		for i := range keys {
			keys[i] = fmt.Sprintf("1/1/%d", i)
		}
		if err := env.node.Offload(ctx, segA, one(keys...)); err != nil {
			t.Fatal(err)
		}
		if got, err := env.bucket.Get(ctx, keys[304]); err != nil || !bytes.Equal(got, more[4]) {
			t.Errorf("offloaded fragment 304: %v", err)
		}
		if err := env.node.Drop(ctx, segA); err != nil {
			t.Fatal(err)
		}
		_, err = env.node.List(ctx, segA)
		wantErr(t, "List after Drop", err, rpcerr.ErrSegmentNotFound)
	})
}

func TestNodeErrors(t *testing.T) {
	forEachNode(t, func(t *testing.T, env *nodeEnv) {
		ctx := t.Context()
		if _, err := env.node.Fence(ctx, segA, 5); err != nil {
			t.Fatal(err)
		}
		_, err := env.node.Fence(ctx, segA, 4)
		wantErr(t, "Fence below", err, rpcerr.ErrSegmentFenced)
		_, err = env.node.List(ctx, segB)
		wantErr(t, "List of an unknown segment", err, rpcerr.ErrSegmentNotFound)
		wantErr(t, "Seal beyond the count", env.node.Seal(ctx, segA, 1), rpcerr.ErrInvalid)

		s, w := stream(t, env.node, segA, 4, 1)
		if err := send(s, 0, []byte("x")); err != nil && !errors.Is(err, rpcerr.ErrSegmentFenced) {
			t.Fatal(err)
		}
		wantErr(t, "stream below the fence", w.waitErr(), rpcerr.ErrSegmentFenced)

		s, w = stream(t, env.node, segB, 1, 1)
		if err := send(s, 1, []byte("x")); err != nil && !errors.Is(err, rpcerr.ErrFragmentGap) {
			t.Fatal(err)
		}
		wantErr(t, "stream with a gap", w.waitErr(), rpcerr.ErrFragmentGap)

		s, w = stream(t, env.node, segB, 1, 2)
		sendAll(t, s, 0, [][]byte{[]byte("x")})
		w.waitCount(1)
		if err := send(s, 0, []byte("y")); err != nil && !errors.Is(err, rpcerr.ErrFragmentMismatch) {
			t.Fatal(err)
		}
		wantErr(t, "stream resending other bytes", w.waitErr(), rpcerr.ErrFragmentMismatch)
	})
}

func TestNodeFull(t *testing.T) {
	for _, k := range nodeKinds {
		t.Run(k.name, func(t *testing.T) {
			env := k.env(t, func(o *Options) { o.DiskBytes = headerBytes + frameBytes(600) + 100 })
			s, w := stream(t, env.node, segA, 1, 2)
			sendAll(t, s, 0, [][]byte{frag(0, 600)})
			w.waitCount(1)
			if err := send(s, 1, frag(1, 600)); err != nil && !errors.Is(err, rpcerr.ErrReplicaFull) {
				t.Fatal(err)
			}
			wantErr(t, "stream over the disk limit", w.waitErr(), rpcerr.ErrReplicaFull)
		})
	}
}

// TestNodeFencedByAnother fences a segment through another connection
// while a stream writes it.
func TestNodeFencedByAnother(t *testing.T) {
	forEachNode(t, func(t *testing.T, env *nodeEnv) {
		s, w := stream(t, env.node, segA, 1, 20)
		sendAll(t, s, 0, frags(10, 100))
		w.waitCount(10)
		if count, err := env.other.Fence(t.Context(), segA, 2); count != 10 || err != nil {
			t.Fatalf("Fence = %d, %v; want 10", count, err)
		}
		if err := send(s, 10, []byte("x")); err != nil && !errors.Is(err, rpcerr.ErrSegmentFenced) {
			t.Fatal(err)
		}
		wantErr(t, "stream after a fence", w.waitErr(), rpcerr.ErrSegmentFenced)
		wantErr(t, "Send after the stream failed", send(s, 11, []byte("y")), rpcerr.ErrSegmentFenced)
		if w.last != 10 {
			t.Errorf("stream reported %d durable", w.last)
		}
		if sizes, err := env.other.List(t.Context(), segA); len(sizes) != 10 || err != nil {
			t.Errorf("List = %d fragments, %v; want 10", len(sizes), err)
		}
	})
}

func TestNodeStreamContext(t *testing.T) {
	forEachNode(t, func(t *testing.T, env *nodeEnv) {
		ctx, cancel := context.WithCancel(t.Context())
		w := newWatch(t, 1)
		s, err := env.node.Stream(ctx, segA, 1, w.onDurable, w.onErr)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sendAll(t, s, 0, [][]byte{[]byte("x")})
		w.waitCount(1)
		cancel()
		wantErr(t, "stream after its context ended", w.waitErr(), context.Canceled)
	})
}

func TestNodeStreamClose(t *testing.T) {
	forEachNode(t, func(t *testing.T, env *nodeEnv) {
		s, w := stream(t, env.node, segA, 1, 1)
		sendAll(t, s, 0, [][]byte{[]byte("x")})
		w.waitCount(1)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := send(s, 1, []byte("y")); err == nil {
			t.Error("Send after Close succeeded")
		}
		// The segment is open to another stream.
		s2, w2 := stream(t, env.other, segA, 1, 1)
		sendAll(t, s2, 1, [][]byte{[]byte("y")})
		w2.waitCount(2)
		select {
		case err := <-w.errs:
			t.Errorf("onErr(%v) after Close", err)
		default:
		}
	})
}

func TestConnServerStopped(t *testing.T) {
	env := connEnv(t)
	s, w := stream(t, env.node, segA, 1, 5)
	sendAll(t, s, 0, frags(5, 100))
	w.waitCount(5)
	env.stop()
	var opErr *net.OpError
	if err := w.waitErr(); !errors.Is(err, errStreamEnded) && !errors.As(err, &opErr) {
		t.Errorf("stream of a stopped server failed with %v, want the end of its connection", err)
	}
	if _, err := env.node.Fence(t.Context(), segA, 2); status.Code(err) != codes.Unavailable {
		t.Errorf("Fence with the server stopped: %v, want Unavailable", err)
	}
}

func TestConnReadLarge(t *testing.T) {
	env := connEnv(t)
	big := frag(1, maxReadBytes+1000)
	s, w := stream(t, env.node, segA, 1, 1)
	sendAll(t, s, 0, [][]byte{big})
	w.waitCount(1)
	p := make([]byte, len(big)+1)
	if k, err := env.node.Read(t.Context(), segA, 0, 0, p); k != len(big) || err != io.EOF || !bytes.Equal(p[:k], big) {
		t.Errorf("Read = %d, %v; want %d bytes, EOF", k, err, len(big))
	}
	if k, err := env.node.Read(t.Context(), segA, 0, 10, p[:maxReadBytes+5]); k != maxReadBytes+5 || err != nil || !bytes.Equal(p[:k], big[10:10+k]) {
		t.Errorf("Read inside = %d, %v", k, err)
	}
}

func TestFlow(t *testing.T) {
	f := flow{limit: 100, freed: make(chan struct{}, 1)}
	ctx := t.Context()
	if err := f.acquire(ctx, 500); err != nil { // one add whatever its size
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	wantErr(t, "acquire over the limit", f.acquire(done, 1), context.Canceled)
	got := make(chan error)
	go func() { got <- f.acquire(ctx, 60) }()
	f.release(500)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := f.acquire(ctx, 40); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "acquire over the limit", f.acquire(done, 1), context.Canceled)
}
