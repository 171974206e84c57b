package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/ternwal/tern/api/ternpb"
	"github.com/ternwal/tern/internal/grpcopts"
)

const (
	// streamWindowBytes bounds the fragments an Add stream has in the Store
	// and not yet durable; past it the server stops reading the stream,
	// and HTTP/2 flow control stops the client's Send.
	streamWindowBytes = 32 << 20
	// fragmentCostBytes is what a fragment counts against the window besides
	// its data, so that tiny fragments are bounded too.
	fragmentCostBytes = 1 << 10
	// maxReadBytes bounds the data of one Read response; Conn.Read asks
	// for more in several calls.
	maxReadBytes = 8 << 20
)

// Server serves a Store as the Replica gRPC service.
type Server struct {
	svc *service
}

// NewServer returns a Server for s.
func NewServer(s *Store) *Server { return &Server{svc: &service{store: s}} }

// Register adds the Replica service to g. g should be built with
// ServerOptions, or at least accept Conn's keepalive pings.
func (s *Server) Register(g *grpc.Server) { ternpb.RegisterReplicaServer(g, s.svc) }

// ServerOptions returns the options of a gRPC server that serves replicas:
// grpcopts.Server, and keepalive settings that accept a Conn's pings (its
// ping interval is below gRPC's default enforcement) and drop a dead
// client's streams within seconds.
func ServerOptions() []grpc.ServerOption {
	return append(grpcopts.Server(),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveTime / 2, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
	)
}

// The keepalive of replica connections: a ping after keepaliveTime without
// a frame from the peer (gRPC's client minimum), and the connection closed
// when keepaliveTimeout passes without an answer. On Linux gRPC also sets
// TCP_USER_TIMEOUT to keepaliveTimeout, so a peer that stops acknowledging
// data in flight is detected within it.
const (
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 3 * time.Second
)

type service struct {
	ternpb.UnimplementedReplicaServer
	store *Store
}

func segmentID(p *ternpb.ReplicaSegment) (SegmentID, error) {
	if p == nil {
		return SegmentID{}, fmt.Errorf("%w: no segment", ErrInvalid)
	}
	return SegmentID{Log: p.GetLog(), Seq: p.GetSeq()}, nil
}

func segmentProto(id SegmentID) *ternpb.ReplicaSegment {
	return &ternpb.ReplicaSegment{Log: id.Log, Seq: id.Seq}
}

func (v *service) Add(stream ternpb.Replica_AddServer) error {
	req, err := stream.Recv()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	open := req.GetOpen()
	if open == nil {
		return toStatus(fmt.Errorf("%w: an add stream starts with an open request", ErrInvalid))
	}
	id, err := segmentID(open.GetSegment())
	if err != nil {
		return toStatus(err)
	}
	a := &adder{
		store:  v.store,
		id:     id,
		epoch:  open.GetEpoch(),
		stream: stream,
		wake:   make(chan struct{}, 1),
		flow:   flow{limit: streamWindowBytes, freed: make(chan struct{}, 1)},
	}
	go a.receive(stream.Context())
	return a.respond(stream.Context())
}

// adder runs one Add stream: receive adds the fragments to the Store,
// respond sends the durable count as the committer reports it.
type adder struct {
	store  *Store
	id     SegmentID
	epoch  uint64
	stream ternpb.Replica_AddServer
	wake   chan struct{} // capacity 1: there is news for respond
	flow   flow

	mu       sync.Mutex
	count    uint64 // durable count due to the stream's adds
	inflight int    // adds not yet durable
	eof      bool   // the client closed its side
	err      error  // why the stream fails
}

func (a *adder) receive(ctx context.Context) {
	for {
		req, err := a.stream.Recv()
		if err == io.EOF {
			a.mu.Lock()
			a.eof = true
			a.mu.Unlock()
			a.notify()
			return
		}
		if err != nil {
			a.fail(err)
			return
		}
		f := req.GetFragment()
		if f == nil {
			a.fail(fmt.Errorf("%w: a second open request", ErrInvalid))
			return
		}
		cost := int64(len(f.GetData())) + fragmentCostBytes
		if err := a.flow.acquire(ctx, cost); err != nil {
			a.fail(err)
			return
		}
		a.mu.Lock()
		failed := a.err != nil
		if !failed {
			a.inflight++
		}
		a.mu.Unlock()
		if failed {
			a.flow.release(cost)
			return
		}
		n := f.GetN()
		err = a.store.Add(a.id, a.epoch, n, f.GetData(), func(err error) {
			a.flow.release(cost)
			a.acked(n, err)
		})
		if err != nil {
			a.flow.release(cost)
			a.acked(n, err)
			return
		}
	}
}

func (a *adder) acked(n uint64, err error) {
	a.mu.Lock()
	a.inflight--
	if err != nil && a.err == nil {
		a.err = err
	} else if err == nil {
		a.count = max(a.count, n+1)
	}
	a.mu.Unlock()
	a.notify()
}

func (a *adder) fail(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
	a.notify()
}

func (a *adder) notify() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// respond sends the durable count whenever it grew, only the latest when it
// grew several times since the last response, and ends the stream on the
// first error, or once the client closed its side and every add is durable.
func (a *adder) respond(ctx context.Context) error {
	var sent uint64
	for {
		select {
		case <-a.wake:
		case <-ctx.Done():
			return toStatus(ctx.Err())
		}
		a.mu.Lock()
		count, err, done := a.count, a.err, a.eof && a.inflight == 0
		a.mu.Unlock()
		if count > sent {
			if err := a.stream.Send(&ternpb.ReplicaAddResponse{Count: count}); err != nil {
				return err
			}
			sent = count
		}
		if err != nil {
			return toStatus(err)
		}
		if done {
			return nil
		}
	}
}

// flow bounds the bytes one goroutine has in flight: acquire waits until
// release frees enough. One add is let through whatever its size.
type flow struct {
	mu    sync.Mutex
	used  int64
	limit int64
	freed chan struct{} // capacity 1
}

func (f *flow) acquire(ctx context.Context, n int64) error {
	for {
		f.mu.Lock()
		if f.used == 0 || f.used+n <= f.limit {
			f.used += n
			f.mu.Unlock()
			return nil
		}
		f.mu.Unlock()
		select {
		case <-f.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *flow) release(n int64) {
	f.mu.Lock()
	f.used -= n
	f.mu.Unlock()
	select {
	case f.freed <- struct{}{}:
	default:
	}
}

func (v *service) Fence(ctx context.Context, req *ternpb.ReplicaFenceRequest) (*ternpb.ReplicaFenceResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, toStatus(err)
	}
	count, err := v.store.Fence(id, req.GetEpoch())
	if err != nil {
		return nil, toStatus(err)
	}
	return &ternpb.ReplicaFenceResponse{Count: count}, nil
}

func (v *service) List(ctx context.Context, req *ternpb.ReplicaListRequest) (*ternpb.ReplicaListResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, toStatus(err)
	}
	sizes, err := v.store.List(id)
	if err != nil {
		return nil, toStatus(err)
	}
	return &ternpb.ReplicaListResponse{Sizes: sizes}, nil
}

func (v *service) Read(ctx context.Context, req *ternpb.ReplicaReadRequest) (*ternpb.ReplicaReadResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, toStatus(err)
	}
	if req.GetLength() < 0 {
		return nil, toStatus(fmt.Errorf("%w: read of %d bytes", ErrInvalid, req.GetLength()))
	}
	p := make([]byte, min(req.GetLength(), maxReadBytes))
	n, err := v.store.Read(id, req.GetN(), req.GetOffset(), p)
	eof := errors.Is(err, io.EOF)
	if err != nil && !eof {
		return nil, toStatus(err)
	}
	return &ternpb.ReplicaReadResponse{Data: p[:n], Eof: eof}, nil
}

func (v *service) Seal(ctx context.Context, req *ternpb.ReplicaSealRequest) (*ternpb.ReplicaSealResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := v.store.Seal(id, req.GetCount()); err != nil {
		return nil, toStatus(err)
	}
	return &ternpb.ReplicaSealResponse{}, nil
}

func (v *service) Offload(ctx context.Context, req *ternpb.ReplicaOffloadRequest) (*ternpb.ReplicaOffloadResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, toStatus(err)
	}
	objs := make([]Object, len(req.GetObjects()))
	for i, o := range req.GetObjects() {
		objs[i] = Object{Key: o.GetKey(), From: o.GetFrom(), To: o.GetTo()}
	}
	if err := v.store.Offload(ctx, id, objs); err != nil {
		return nil, toStatus(err)
	}
	return &ternpb.ReplicaOffloadResponse{}, nil
}

func (v *service) Drop(ctx context.Context, req *ternpb.ReplicaDropRequest) (*ternpb.ReplicaDropResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := v.store.Drop(id); err != nil {
		return nil, toStatus(err)
	}
	return &ternpb.ReplicaDropResponse{}, nil
}
