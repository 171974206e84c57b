package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/ternwal/tern/api/ternpb"
	"github.com/ternwal/tern/internal/grpcopts"
)

// Conn is a Node reached over gRPC: a client of a replica's Server. It is
// safe for concurrent use.
type Conn struct {
	cc     *grpc.ClientConn
	client ternpb.ReplicaClient
}

var _ Node = (*Conn)(nil)

// Dial returns a Conn to the replica at addr (host:port), without
// transport security. It connects lazily, on the first call. Keepalive
// pings detect a dead replica (see ServerOptions).
func Dial(addr string) (*Conn, error) {
	opts := append(grpcopts.Dial(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}),
	)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("replica: dial %s: %w", addr, err)
	}
	return &Conn{cc: cc, client: ternpb.NewReplicaClient(cc)}, nil
}

// Close closes the connection; streams still open fail.
func (c *Conn) Close() error { return c.cc.Close() }

// Stream opens an Add stream. Send returns once gRPC has taken the
// fragment; it blocks while the replica has a window of fragments in
// flight that are not yet durable. A fragment the replica refuses fails the
// stream, through onErr and the next Send.
func (c *Conn) Stream(ctx context.Context, seg SegmentID, epoch uint64, onDurable func(uint64), onErr func(error)) (Sender, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.client.Add(ctx)
	if err != nil {
		cancel()
		return nil, fromStatus(err)
	}
	open := &ternpb.ReplicaAddOpen{Segment: segmentProto(seg), Epoch: epoch}
	if err := stream.Send(&ternpb.ReplicaAddRequest{Kind: &ternpb.ReplicaAddRequest_Open{Open: open}}); err != nil {
		if errors.Is(err, io.EOF) {
			_, err = stream.Recv()
		}
		cancel()
		return nil, fromStatus(err)
	}
	st := &connStream{stream: stream, cancel: cancel, done: make(chan struct{})}
	go st.receive(onDurable, onErr)
	return st, nil
}

// connStream is a Conn's Sender.
type connStream struct {
	stream ternpb.Replica_AddClient
	cancel context.CancelFunc
	done   chan struct{} // closed once receive has set err and returned
	err    error
	closed atomic.Bool
}

// errStreamEnded is a stream that the server ended without an error, which
// it does only when the client closed its side.
var errStreamEnded = errors.New("replica: the server ended the stream")

func (st *connStream) receive(onDurable func(uint64), onErr func(error)) {
	var last uint64
	for {
		resp, err := st.stream.Recv()
		if err != nil {
			if err == io.EOF {
				err = errStreamEnded
			}
			st.err = fromStatus(err)
			close(st.done)
			if !st.closed.Load() {
				onErr(st.err)
			}
			return
		}
		if resp.GetCount() > last {
			last = resp.GetCount()
			onDurable(last)
		}
	}
}

func (st *connStream) Send(n uint64, data []byte) error {
	select {
	case <-st.done:
		return st.err
	default:
	}
	if st.closed.Load() {
		return errStreamClosed
	}
	frag := &ternpb.ReplicaFragment{N: n, Data: data}
	err := st.stream.Send(&ternpb.ReplicaAddRequest{Kind: &ternpb.ReplicaAddRequest_Fragment{Fragment: frag}})
	if errors.Is(err, io.EOF) {
		// The stream ended; receive has its status.
		<-st.done
		return st.err
	}
	return fromStatus(err)
}

func (st *connStream) Close() error {
	st.closed.Store(true)
	st.cancel()
	return nil
}

func (c *Conn) Fence(ctx context.Context, seg SegmentID, epoch uint64) (uint64, error) {
	resp, err := c.client.Fence(ctx, &ternpb.ReplicaFenceRequest{Segment: segmentProto(seg), Epoch: epoch})
	if err != nil {
		return 0, fromStatus(err)
	}
	return resp.GetCount(), nil
}

func (c *Conn) List(ctx context.Context, seg SegmentID) ([]int64, error) {
	resp, err := c.client.List(ctx, &ternpb.ReplicaListRequest{Segment: segmentProto(seg)})
	if err != nil {
		return nil, fromStatus(err)
	}
	// Readers allocate a fragment's size: a replica's answer must not
	// make them panic or exhaust memory.
	for n, size := range resp.GetSizes() {
		if size < 0 || size > MaxFragmentBytes {
			return nil, fmt.Errorf("replica: list of %v answered with fragment %d of %d bytes", seg, n, size)
		}
	}
	return resp.GetSizes(), nil
}

// Read asks for at most maxReadBytes per call, and makes as many calls as p
// needs.
func (c *Conn) Read(ctx context.Context, seg SegmentID, n uint64, off int64, p []byte) (int, error) {
	read := 0
	for {
		want := min(len(p)-read, maxReadBytes)
		resp, err := c.client.Read(ctx, &ternpb.ReplicaReadRequest{
			Segment: segmentProto(seg), N: n, Offset: off + int64(read), Length: int64(want),
		})
		if err != nil {
			return read, fromStatus(err)
		}
		data := resp.GetData()
		if len(data) > want || (len(data) < want && !resp.GetEof()) {
			return read, fmt.Errorf("replica: read of %d bytes answered with %d", want, len(data))
		}
		read += copy(p[read:], data)
		if resp.GetEof() {
			return read, io.EOF
		}
		if read == len(p) {
			return read, nil
		}
	}
}

func (c *Conn) Seal(ctx context.Context, seg SegmentID, count uint64) error {
	_, err := c.client.Seal(ctx, &ternpb.ReplicaSealRequest{Segment: segmentProto(seg), Count: count})
	return fromStatus(err)
}

func (c *Conn) Offload(ctx context.Context, seg SegmentID, objs []Object) error {
	req := &ternpb.ReplicaOffloadRequest{Segment: segmentProto(seg)}
	for _, o := range objs {
		req.Objects = append(req.Objects, &ternpb.ReplicaObject{Key: o.Key, From: o.From, To: o.To})
	}
	_, err := c.client.Offload(ctx, req)
	return fromStatus(err)
}

func (c *Conn) Drop(ctx context.Context, seg SegmentID) error {
	_, err := c.client.Drop(ctx, &ternpb.ReplicaDropRequest{Segment: segmentProto(seg)})
	return fromStatus(err)
}
