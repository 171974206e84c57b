package replica

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/api/ternpb"
)

// cannedReplica answers List and Read with the responses it is given.
type cannedReplica struct {
	ternpb.UnimplementedReplicaServer
	mu   sync.Mutex
	list *ternpb.ReplicaListResponse
	read *ternpb.ReplicaReadResponse
}

func (c *cannedReplica) List(context.Context, *ternpb.ReplicaListRequest) (*ternpb.ReplicaListResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.list, nil
}

func (c *cannedReplica) Read(context.Context, *ternpb.ReplicaReadRequest) (*ternpb.ReplicaReadResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read, nil
}

// FuzzConn gives a Conn arbitrary answers to List and Read, as a faulty or
// hostile replica could, through a real gRPC connection to a server started
// once per fuzzing process. What the Conn returns must keep the Node
// contract its callers rely on, or be an error: List gives fragment sizes
// from 0 to MaxFragmentBytes (a reader allocates a fragment's size), and
// Read fills p as io.ReaderAt does.
func FuzzConn(f *testing.F) {
	canned := &cannedReplica{}
	g := grpc.NewServer(ServerOptions()...)
	ternpb.RegisterReplicaServer(g, canned)
	conn, err := Dial(serveGRPC(f, g, nil), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })

	for _, m := range []proto.Message{
		&ternpb.ReplicaListResponse{Sizes: []int64{4, 0, 100}},
		&ternpb.ReplicaListResponse{Sizes: []int64{-1}},
		&ternpb.ReplicaListResponse{Sizes: []int64{1 << 62}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(false, b, uint16(0))
	}
	for _, m := range []proto.Message{
		&ternpb.ReplicaReadResponse{Data: []byte("abc")},
		&ternpb.ReplicaReadResponse{Data: []byte("abc"), Eof: true},
		&ternpb.ReplicaReadResponse{Data: make([]byte, 20), Eof: true},
		&ternpb.ReplicaReadResponse{},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(true, b, uint16(3))
		f.Add(true, b, uint16(10))
	}
	f.Fuzz(func(t *testing.T, read bool, body []byte, length uint16) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		seg := SegmentID{Log: 1, Seq: 2}
		if !read {
			resp := new(ternpb.ReplicaListResponse)
			if proto.Unmarshal(body, resp) != nil {
				return
			}
			canned.mu.Lock()
			canned.list = resp
			canned.mu.Unlock()
			sizes, err := conn.List(ctx, seg)
			if err != nil {
				return
			}
			for n, size := range sizes {
				if size < 0 || size > MaxFragmentBytes {
					t.Fatalf("List gave fragment %d a size of %d", n, size)
				}
			}
			return
		}
		resp := new(ternpb.ReplicaReadResponse)
		if proto.Unmarshal(body, resp) != nil {
			return
		}
		canned.mu.Lock()
		canned.read = resp
		canned.mu.Unlock()
		// The canned answer repeats, so a read longer than one answer
		// asks again; a read of maxReadBytes and more would too.
		p := make([]byte, length%1024)
		n, err := conn.Read(ctx, seg, 0, 0, p)
		switch {
		case n < 0 || n > len(p):
			t.Fatalf("Read of %d bytes gave %d", len(p), n)
		case err == nil && n != len(p):
			t.Fatalf("Read of %d bytes gave %d and no error", len(p), n)
		case err != nil && !errors.Is(err, io.EOF) && ctx.Err() != nil:
			t.Fatalf("Read of %d bytes did not end: %v", len(p), err)
		}
	})
}
