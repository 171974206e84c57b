package replica

import (
	"context"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/api/ternpb"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/vfs"
)

// The fixture every input of FuzzServer finds: an open segment with three
// fragments at fuzzEpoch, and a sealed one with two.
var (
	fuzzOpen   = SegmentID{Log: 1, Seq: 1}
	fuzzSealed = SegmentID{Log: 1, Seq: 2}
)

const (
	fuzzEpoch = 1
	// fuzzCallTimeout bounds one call; every call answers at once.
	fuzzCallTimeout = 10 * time.Second
)

// fuzzReplica is a Store served over gRPC on 127.0.0.1 and a client of it,
// for a whole fuzzing run: connEnv does this for one test, which a fuzz
// target cannot use, since every input is a test of its own and connEnv's
// cleanup would stop the server after the first.
type fuzzReplica struct {
	store   *Store
	bucket  *blob.Mem
	srv     *Server
	addr    string // the server's, for add connections
	api     ternpb.ReplicaClient
	fixture []SegmentInfo // as reset leaves the store
}

func startFuzzReplica(f *testing.F) *fuzzReplica {
	f.Helper()
	bucket := blob.NewMem()
	s, err := Open(Options{FS: vfs.NewMem(), Dir: testDir, Bucket: bucket})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		if err := s.Close(); err != nil {
			f.Errorf("Store.Close: %v", err)
		}
	})
	g := grpc.NewServer(ServerOptions()...)
	srv := NewServer(s)
	srv.Register(g)
	addr := serveGRPC(f, g, srv)
	cc, err := grpc.NewClient(addr, append(grpcopts.Dial(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { cc.Close() })
	fr := &fuzzReplica{store: s, bucket: bucket, srv: srv, addr: addr, api: ternpb.NewReplicaClient(cc)}
	if err := fr.reset(); err != nil {
		f.Fatal(err)
	}
	fr.fixture = s.Segments()
	return fr
}

// reset puts the store back as the fixture, if an input changed it, and
// empties the bucket.
func (fr *fuzzReplica) reset() error {
	ctx := context.Background()
	infos, err := fr.bucket.List(ctx, "")
	if err != nil {
		return err
	}
	for _, in := range infos {
		if err := fr.bucket.Delete(ctx, in.Key); err != nil {
			return err
		}
	}
	if fr.fixture != nil && reflect.DeepEqual(fr.store.Segments(), fr.fixture) {
		return nil
	}
	for _, info := range fr.store.Segments() {
		if err := fr.store.Drop(info.ID); err != nil {
			return err
		}
	}
	for n, data := range [][]byte{[]byte("zero"), nil, frag(2, 100)} {
		if err := add(fr.store, fuzzOpen, fuzzEpoch, uint64(n), data); err != nil {
			return err
		}
		if n < 2 {
			if err := add(fr.store, fuzzSealed, fuzzEpoch, uint64(n), data); err != nil {
				return err
			}
		}
	}
	return fr.store.Seal(fuzzSealed, 2)
}

// fuzzReplicaMethod is a method of the Replica service: the request type
// the input decodes as, and the call.
type fuzzReplicaMethod struct {
	name string
	req  func() proto.Message
	call func(ctx context.Context, api ternpb.ReplicaClient, req proto.Message) error
}

func replicaUnary[Req proto.Message, Resp any](name string, call func(ternpb.ReplicaClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) fuzzReplicaMethod {
	return fuzzReplicaMethod{
		name: name,
		req:  func() proto.Message { var r Req; return r.ProtoReflect().New().Interface() },
		call: func(ctx context.Context, api ternpb.ReplicaClient, req proto.Message) error {
			_, err := call(api, ctx, req.(Req))
			return err
		},
	}
}

var fuzzReplicaMethods = []fuzzReplicaMethod{
	replicaUnary("Fence", ternpb.ReplicaClient.Fence),
	replicaUnary("List", ternpb.ReplicaClient.List),
	replicaUnary("Read", ternpb.ReplicaClient.Read),
	replicaUnary("Seal", ternpb.ReplicaClient.Seal),
	replicaUnary("Offload", ternpb.ReplicaClient.Offload),
	replicaUnary("Drop", ternpb.ReplicaClient.Drop),
}

// FuzzServer calls a method of the Replica service, chosen by method, with
// body decoded as its request (inputs that do not decode are skipped),
// through a real gRPC connection to a Store served once per fuzzing
// process, which reset puts back as the fixture between inputs (add
// streams, which are not gRPC calls, are FuzzAddConn's). The server must not
// panic; each error must be a status whose code says what was wrong with
// the request, never Unknown, Internal or DataLoss (nothing here is
// damaged); a call must not hang; and the Store must then be usable.
func FuzzServer(f *testing.F) {
	fr := startFuzzReplica(f)
	seg := func(id SegmentID) *ternpb.ReplicaSegment { return segmentProto(id) }
	seeds := map[string][]proto.Message{
		"Fence": {
			&ternpb.ReplicaFenceRequest{Segment: seg(fuzzOpen), Epoch: 2},
			&ternpb.ReplicaFenceRequest{Segment: seg(fuzzOpen)},
			&ternpb.ReplicaFenceRequest{Segment: seg(SegmentID{Log: 5, Seq: 6}), Epoch: 1},
			&ternpb.ReplicaFenceRequest{},
		},
		"List": {&ternpb.ReplicaListRequest{Segment: seg(fuzzOpen)}, &ternpb.ReplicaListRequest{Segment: seg(fuzzSealed)}},
		"Read": {
			&ternpb.ReplicaReadRequest{Segment: seg(fuzzOpen), N: 2, Offset: 10, Length: 50},
			&ternpb.ReplicaReadRequest{Segment: seg(fuzzSealed), N: 0, Length: 1 << 30},
			&ternpb.ReplicaReadRequest{Segment: seg(fuzzOpen), N: 0, Offset: -1, Length: 1},
			&ternpb.ReplicaReadRequest{Segment: seg(fuzzOpen), N: 7, Length: -1},
		},
		"Seal": {
			&ternpb.ReplicaSealRequest{Segment: seg(fuzzOpen), Count: 2},
			&ternpb.ReplicaSealRequest{Segment: seg(fuzzSealed), Count: 1},
			&ternpb.ReplicaSealRequest{Segment: seg(fuzzOpen), Count: 9},
		},
		"Offload": {
			&ternpb.ReplicaOffloadRequest{Segment: seg(fuzzSealed), Objects: []*ternpb.ReplicaObject{{Key: "1/2/a", From: 0, To: 1}, {Key: "1/2/b", From: 1, To: 2}}},
			&ternpb.ReplicaOffloadRequest{Segment: seg(fuzzSealed), Objects: []*ternpb.ReplicaObject{{Key: "1/2/c", From: 0, To: 2}}},
			&ternpb.ReplicaOffloadRequest{Segment: seg(fuzzOpen), Objects: []*ternpb.ReplicaObject{{Key: "x", From: 0, To: 3}}},
		},
		"Drop": {&ternpb.ReplicaDropRequest{Segment: seg(fuzzOpen)}, &ternpb.ReplicaDropRequest{Segment: seg(SegmentID{Log: 3})}},
	}
	for i, m := range fuzzReplicaMethods {
		if len(seeds[m.name]) == 0 {
			f.Fatalf("no seed for %s", m.name)
		}
		for _, req := range seeds[m.name] {
			b, err := proto.Marshal(req)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), b)
		}
	}
	f.Fuzz(func(t *testing.T, method uint8, body []byte) {
		m := fuzzReplicaMethods[int(method)%len(fuzzReplicaMethods)]
		req := m.req()
		if proto.Unmarshal(body, req) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), fuzzCallTimeout)
		err := m.call(ctx, fr.api, req)
		cancel()
		if err != nil {
			st, ok := status.FromError(err)
			if !ok {
				t.Fatalf("%s(%v): %v, not a status", m.name, req, err)
			}
			switch st.Code() {
			case codes.DeadlineExceeded:
				t.Fatalf("%s(%v) did not answer within %v", m.name, req, fuzzCallTimeout)
			case codes.Unknown, codes.Internal, codes.DataLoss:
				t.Fatalf("%s(%v): %v", m.name, req, err)
			}
		}
		for _, info := range fr.store.Segments() {
			if info.Failed != nil {
				t.Fatalf("after %s(%v), segment %v failed: %v", m.name, req, info.ID, info.Failed)
			}
		}
		if err := fr.reset(); err != nil {
			t.Fatalf("after %s(%v): %v", m.name, req, err)
		}
	})
}
