package replica

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
)

// shortKeepalive pings every 100ms and gives up after 1.5s of silence:
// 15 pings, so that a loaded machine does not pass for a dead peer.
var shortKeepalive = addKeepalive{every: 100 * time.Millisecond, after: 1500 * time.Millisecond}

// rawAdd connects to a replica's port as an add stream of seg at epoch,
// without Conn, and returns the connection and a reader of its frames.
func rawAdd(t *testing.T, addr string, seg SegmentID, epoch uint64) (*net.TCPConn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(appendOpen(nil, seg, epoch)); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn), bufio.NewReader(c)
}

// An idle stream stays open: the pings keep both sides from giving the
// connection up.
func TestAddConnIdle(t *testing.T) {
	env := connEnvKeepalive(t, shortKeepalive)
	s, w := stream(t, env.node, segA, 1, 2)
	sendAll(t, s, 0, frags(1, 100))
	w.waitCount(1)
	time.Sleep(3 * shortKeepalive.after)
	sendAll(t, s, 1, frags(1, 100))
	w.waitCount(2)
}

// A replica gives up an add connection on which nothing arrives, pings
// included, and tells the client why.
func TestAddConnSilentClient(t *testing.T) {
	env := connEnvKeepalive(t, shortKeepalive)
	addr := env.node.(*Conn).addr
	c, r := rawAdd(t, addr, segA, 1)
	if _, err := c.Write(appendClientFrame(nil, kindFragment, 0, "abc")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Minute)) // a bound for a broken server, not a timing
	var got error
	for got == nil {
		kind, _, err := readServerFrame(r)
		switch {
		case err != nil && kind == kindError:
			got = err
		case err != nil:
			t.Fatalf("connection ended without an error frame: %v", err)
		}
	}
	if got.Error() != errConnDead.Error() {
		t.Errorf("the replica closed a silent connection with %v, want %v", got, errConnDead)
	}
	if _, _, err := readServerFrame(r); err != io.EOF {
		t.Errorf("after the error frame: %v, want EOF", err)
	}
	// What arrived before the silence was added.
	if sizes, err := env.node.List(t.Context(), segA); err != nil || len(sizes) != 1 {
		t.Errorf("List = %v, %v; want one fragment", sizes, err)
	}
}

// A client gives up a stream whose replica sends nothing, pings included.
func TestAddConnSilentServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c) // reads all, answers nothing
	}()
	conn, err := Dial(l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.ka = shortKeepalive
	defer conn.Close()
	_, w := stream(t, conn, segA, 1, 1)
	if err := w.waitErr(); !errors.Is(err, errConnDead) {
		t.Errorf("stream to a silent replica failed with %v, want %v", err, errConnDead)
	}
}

// The port serves gRPC and add streams side by side, whatever else
// connects to it: a client that sends nothing, or a few bytes, or another
// protocol.
func TestAddConnSplit(t *testing.T) {
	env := connEnv(t)
	addr := env.node.(*Conn).addr
	for _, first := range [][]byte{nil, []byte("TERN"), []byte("TERNADD\x03 a later version"), []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(first)
		c.Close()
	}
	s, w := stream(t, env.node, segA, 1, 3)
	sendAll(t, s, 0, frags(3, 1000))
	w.waitCount(3)
	checkNodeFrags(t, env.other, segA, frags(3, 1000))
}

// Frames the server refuses end the connection with an error frame that
// says what was wrong.
func TestAddConnBadFrames(t *testing.T) {
	env := connEnv(t)
	addr := env.node.(*Conn).addr
	var oversized [clientFrameBytes]byte // a header that announces too much
	putClientFrame(&oversized, kindFragment, 0, MaxFragmentBytes+1, 0)
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"oversized", oversized[:], rpcerr.ErrInvalid},
		{"unknown kind", appendClientFrame(nil, 9, 0, ""), rpcerr.ErrInvalid},
		{"gap", appendClientFrame(nil, kindFragment, 5, "x"), rpcerr.ErrFragmentGap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, r := rawAdd(t, addr, SegmentID{Log: 7, Seq: 1}, 1)
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			kind, _, err := readServerFrame(r)
			if kind != kindError || !errors.Is(err, tc.want) {
				t.Errorf("frame answered with kind %d, %v; want an error frame of %v", kind, err, tc.want)
			}
		})
	}
}

// A server's error crosses an error frame as the sentinel it matched, with
// its message.
func TestAddConnErrorFrame(t *testing.T) {
	sentinels := []error{
		rpcerr.ErrSegmentFenced, rpcerr.ErrSegmentSealed, rpcerr.ErrFragmentGap, rpcerr.ErrFragmentMismatch,
		rpcerr.ErrReplicaFull, rpcerr.ErrSegmentNotFound, rpcerr.ErrInvalid, rpcerr.ErrReplicaClosed, rpcerr.ErrJournalCorrupt,
	}
	for _, sentinel := range sentinels {
		err := errors.New("context: " + sentinel.Error())
		err = errors.Join(err, sentinel)
		b := appendError(nil, err)
		kind, _, back := readServerFrame(bufio.NewReader(bytes.NewReader(b)))
		if kind != kindError || !errors.Is(back, sentinel) || back.Error() != err.Error() {
			t.Errorf("%v comes back as kind %d, %v", err, kind, back)
		}
	}
	other := errors.New("disk on fire")
	_, _, back := readServerFrame(bufio.NewReader(bytes.NewReader(appendError(nil, other))))
	for _, sentinel := range sentinels {
		if errors.Is(back, sentinel) {
			t.Errorf("an unknown error came back as %v", sentinel)
		}
	}
	if back.Error() != other.Error() {
		t.Errorf("an unknown error came back as %q", back)
	}
}
