package replica

import (
	"context"
	"fmt"
	"os"
	"testing"

	"google.golang.org/grpc"

	"github.com/ternwal/tern/internal/vfs"
)

// BenchmarkStream streams fragments to a Store, in process (Local) and
// over loopback (Conn to a Server): what a replica's path costs besides
// the disk, per fragment, with 64 KiB fragments 16 in flight (a
// quorum-put's) and 1 KiB ones one at a time (a quorum-1k's). The journals
// are in memory, in /dev/shm where there is one (MemFS copies a file on
// every write, which would dwarf the rest).
func BenchmarkStream(b *testing.B) {
	for _, kind := range []string{"local", "conn"} {
		for _, c := range []struct{ size, inFlight int }{{64 << 10, 16}, {1 << 10, 1}} {
			b.Run(fmt.Sprintf("%s/%dB-x%d", kind, c.size, c.inFlight), func(b *testing.B) {
				benchStream(b, kind, c.size, c.inFlight)
			})
		}
	}
}

func benchStream(b *testing.B, kind string, size, inFlight int) {
	dir := b.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "replica-bench-*"); err == nil {
		dir = shm
		b.Cleanup(func() { os.RemoveAll(shm) })
	}
	s, err := Open(Options{FS: vfs.OS, Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var node Node = NewLocal(s)
	if kind == "conn" {
		g := grpc.NewServer(ServerOptions()...)
		srv := NewServer(s)
		srv.Register(g)
		c, err := Dial(serveGRPC(b, g, srv), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		node = c
	}
	data := frag(0, size)
	// A segment per perSegment fragments, dropped once durable, so that
	// memory holds at most one.
	const perSegment = 1024
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for seq, left := uint64(0), b.N; left > 0; seq++ {
		count := uint64(min(left, perSegment))
		left -= int(count)
		id := SegmentID{Log: 1, Seq: seq}
		durable, errs := make(chan uint64, perSegment+1), make(chan error, 1)
		st, err := node.Stream(context.Background(), id, 1, func(n uint64) { durable <- n }, func(err error) { errs <- err })
		if err != nil {
			b.Fatal(err)
		}
		var sent, done uint64
		wait := func() {
			select {
			case done = <-durable:
			case err := <-errs:
				b.Fatal(err)
			}
		}
		for ; sent < count; sent++ {
			for sent-done >= uint64(inFlight) {
				wait()
			}
			if err := st.Send(sent, data, FrameSum(sent, data)); err != nil {
				b.Fatal(err)
			}
		}
		for done < count {
			wait()
		}
		st.Close()
		if err := s.Drop(id); err != nil {
			b.Fatal(err)
		}
	}
}
