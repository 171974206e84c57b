package replica

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
)

// FuzzAddConn sends the input to a replica's port after the add
// connection's preface, as the open and the frames, then ends its side,
// against the Store FuzzServer uses, reset to its fixture between inputs.
// The server must not panic or hang; every frame it sends must decode; an
// error it sends must say what was wrong (match one of the package's
// errors); and the Store must then be usable.
func FuzzAddConn(f *testing.F) {
	fr := startFuzzReplica(f)
	frame := appendClientFrame
	open := func(seg SegmentID, epoch uint64) []byte { return appendOpen(nil, seg, epoch)[len(addPreface):] }
	f.Add(frame(open(fuzzOpen, fuzzEpoch), kindFragment, 3, "three"))
	f.Add(frame(frame(open(fuzzOpen, fuzzEpoch), kindPing, 0, ""), kindFragment, 2, "other bytes"))
	f.Add(frame(open(fuzzOpen, fuzzEpoch), kindFragment, 5, "gap"))
	f.Add(frame(open(fuzzSealed, fuzzEpoch), kindFragment, 2, "sealed"))
	f.Add(frame(open(fuzzOpen, 0), kindFragment, 3, "fenced"))
	f.Add(frame(open(SegmentID{Log: 9, Seq: 9}, 3), kindFragment, 0, "new")[:40])
	f.Add(frame(open(fuzzOpen, fuzzEpoch), 7, 0, "?"))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", fr.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(fuzzCallTimeout))
		if _, err := c.Write(append(addPreface[:], in...)); err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).CloseWrite()
		r := bufio.NewReader(c)
		for {
			kind, _, err := readServerFrame(r)
			if err == io.EOF {
				break
			}
			if kind == kindError {
				if _, ok := rpcerr.Reason(err); !ok {
					t.Fatalf("the replica ended the connection with %v, which says nothing of what was wrong", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("reading the replica's frames: %v", err)
			}
		}
		fr.srv.waitIdle()
		for _, info := range fr.store.Segments() {
			if info.Failed != nil {
				t.Fatalf("segment %v failed: %v", info.ID, info.Failed)
			}
		}
		if err := fr.reset(); err != nil {
			t.Fatal(err)
		}
	})
}

// waitIdle waits until s serves no add connection, and their adds are
// settled.
func (s *Server) waitIdle() {
	for {
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
