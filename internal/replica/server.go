package replica

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/ternwal/tern/client/rpcerr"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/ternwal/tern/api/ternpb"
	"github.com/ternwal/tern/client/grpcopts"
)

const (
	// streamWindowBytes bounds the fragments an add stream has in the Store
	// and not yet durable; past it the server stops reading the connection,
	// and TCP's flow control stops the client's writes.
	streamWindowBytes = 32 << 20
	// fragmentCostBytes is what a fragment counts against the window besides
	// its data, so that tiny fragments are bounded too.
	fragmentCostBytes = 1 << 10
	// maxReadBytes bounds the data of one Read response; Conn.Read asks
	// for more in several calls.
	maxReadBytes = 8 << 20
)

// Server serves a Store: the Replica gRPC service, and the add streams,
// which come on connections of their own to the same port (see wire.go).
type Server struct {
	svc *service
	ka  addKeepalive

	admit func(net.Conn) error // nil: every add connection is served

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // the add connections being served
	closed bool
	wg     sync.WaitGroup // their goroutines
}

// NewServer returns a Server for s.
func NewServer(s *Store) *Server {
	return &Server{svc: &service{store: s}, ka: defaultKeepalive, conns: make(map[net.Conn]struct{})}
}

// Register adds the Replica service to g. g should be built with
// ServerOptions, or at least accept Conn's keepalive pings.
func (s *Server) Register(g *grpc.Server) { ternpb.RegisterReplicaServer(g, s.svc) }

// Admit makes the Server ask f about each add connection before it serves
// it: one f refuses is answered with f's error in an error frame and
// closed. A node of a cluster admits only the other nodes. Call it before
// Listen.
func (s *Server) Admit(f func(net.Conn) error) { s.admit = f }

// Listen serves the add connections that reach l, and returns a listener
// of its other connections, for the gRPC server. A connection of a TLS
// listener (a *tls.Conn, its handshake done) is told apart by the protocol
// its client chose, AddProtocol; any other by its first bytes, which stay
// unread for gRPC. Closing the returned listener closes l.
func (s *Server) Listen(l net.Listener) net.Listener {
	sl := &splitListener{Listener: l, s: s, conns: make(chan net.Conn), done: make(chan struct{})}
	go sl.run()
	return sl
}

// Close closes the add connections and waits for their goroutines. The
// gRPC server is stopped by its owner.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// splitListener is a listener of the gRPC connections of l.
type splitListener struct {
	net.Listener
	s     *Server
	conns chan net.Conn // to Accept
	done  chan struct{} // closed once l failed; err is set before
	err   error
}

func (sl *splitListener) run() {
	defer close(sl.done)
	for {
		c, err := sl.Listener.Accept()
		if err != nil {
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				// Out of descriptors, or a client gone before it was
				// accepted: the listener still works, as gRPC's Serve
				// would find.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			sl.err = err
			return
		}
		go sl.sort(c)
	}
}

// sort serves c if it is an add connection, or passes it to Accept.
func (sl *splitListener) sort(c net.Conn) {
	var add bool
	var err error
	if tc, ok := c.(*tls.Conn); ok {
		add = tc.ConnectionState().NegotiatedProtocol == AddProtocol
	} else {
		c.SetReadDeadline(time.Now().Add(prefaceTimeout))
		add, err = peekPreface(c)
		c.SetReadDeadline(time.Time{})
	}
	switch {
	case err != nil:
		c.Close()
	case add:
		sl.s.serveAdd(c)
	default:
		select {
		case sl.conns <- c:
		case <-sl.done:
			c.Close()
		}
	}
}

func (sl *splitListener) Accept() (net.Conn, error) {
	select {
	case c := <-sl.conns:
		return c, nil
	case <-sl.done:
		return nil, sl.err
	}
}

// serveAdd serves an add connection until it ends.
func (s *Server) serveAdd(c net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	raw := c
	if tc, ok := c.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			userTimeout("tcp", "", rc)
		}
	}
	if s.admit != nil {
		if err := s.admit(c); err != nil {
			c.SetWriteDeadline(time.Now().Add(s.ka.after))
			c.Write(appendError(nil, err))
			return
		}
	}

	r := bufio.NewReaderSize(deadlineReader{c, s.ka.after}, 64<<10)
	if _, err := r.Discard(len(addPreface)); err != nil {
		return
	}
	id, epoch, err := readOpen(r)
	if err != nil {
		return
	}
	a := &adder{
		store: s.svc.store,
		id:    id,
		epoch: epoch,
		wake:  make(chan struct{}, 1),
		flow:  flow{limit: streamWindowBytes, freed: make(chan struct{}, 1)},
	}
	ctx, cancel := context.WithCancel(context.Background())
	received := make(chan struct{})
	go func() {
		defer close(received)
		a.receive(ctx, r)
	}()
	a.respond(c, s.ka)
	cancel()  // ends a wait for the window
	c.Close() // ends receive's read
	<-received
	a.settle()
}

// deadlineReader reads from c, and fails with errConnDead once nothing
// has arrived for after.
type deadlineReader struct {
	c     net.Conn
	after time.Duration
}

func (d deadlineReader) Read(p []byte) (int, error) {
	d.c.SetReadDeadline(time.Now().Add(d.after))
	n, err := d.c.Read(p)
	return n, dead(err)
}

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
		return SegmentID{}, fmt.Errorf("%w: no segment", rpcerr.ErrInvalid)
	}
	return SegmentID{Log: p.GetLog(), Seq: p.GetSeq()}, nil
}

func segmentProto(id SegmentID) *ternpb.ReplicaSegment {
	return &ternpb.ReplicaSegment{Log: id.Log, Seq: id.Seq}
}

// adder runs one add connection: receive adds the fragments to the Store,
// respond sends the durable count as the committer reports it.
type adder struct {
	store *Store
	id    SegmentID
	epoch uint64
	wake  chan struct{} // capacity 1: there is news for respond
	flow  flow

	mu       sync.Mutex
	count    uint64 // durable count due to the stream's adds
	inflight int    // adds not yet durable
	eof      bool   // the client closed the connection
	err      error  // why the stream fails
}

func (a *adder) receive(ctx context.Context, r io.Reader) {
	for {
		kind, n, data, sum, err := readClientFrame(r, a.store.Buffer)
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
		if kind == kindPing {
			continue
		}
		cost := int64(len(data)) + fragmentCostBytes
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
		err = a.store.AddBuffer(a.id, a.epoch, n, data, sum, func(err error) {
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

// settle waits until no add of the stream is in flight.
func (a *adder) settle() {
	for {
		a.mu.Lock()
		n := a.inflight
		a.mu.Unlock()
		if n == 0 {
			return
		}
		<-a.wake
	}
}

func (a *adder) fail(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
	a.notify()
}

func (a *adder) notify() { signal(a.wake) }

// respond sends the durable count whenever it grew, only the latest when it
// grew several times since the last frame, and a ping when it sent nothing
// for ka.every. It ends on the first error, which it sends to the client
// (a broken connection does not deliver it), or once the client closed the
// connection and every add is durable.
func (a *adder) respond(c net.Conn, ka addKeepalive) {
	var (
		sent  uint64
		b     = make([]byte, 0, 64)
		ping  = time.NewTimer(ka.every)
		write = func(b []byte) error {
			c.SetWriteDeadline(time.Now().Add(ka.after))
			_, err := c.Write(b)
			ping.Reset(ka.every)
			return err
		}
	)
	defer ping.Stop()
	for {
		select {
		case <-a.wake:
		case <-ping.C:
			if write(appendCount(b[:0], kindPing, 0)) != nil {
				return
			}
			continue
		}
		a.mu.Lock()
		count, err, done := a.count, a.err, a.eof && a.inflight == 0
		a.mu.Unlock()
		if count > sent {
			if write(appendCount(b[:0], kindCount, count)) != nil {
				return
			}
			sent = count
		}
		if err != nil {
			write(appendError(b[:0], err))
			return
		}
		if done {
			return
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
	signal(f.freed)
}

func (v *service) Fence(ctx context.Context, req *ternpb.ReplicaFenceRequest) (*ternpb.ReplicaFenceResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, rpcerr.StatusError(err)
	}
	count, err := v.store.Fence(id, req.GetEpoch())
	if err != nil {
		return nil, rpcerr.StatusError(err)
	}
	return &ternpb.ReplicaFenceResponse{Count: count}, nil
}

func (v *service) List(ctx context.Context, req *ternpb.ReplicaListRequest) (*ternpb.ReplicaListResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, rpcerr.StatusError(err)
	}
	sizes, err := v.store.List(id)
	if err != nil {
		return nil, rpcerr.StatusError(err)
	}
	return &ternpb.ReplicaListResponse{Sizes: sizes}, nil
}

func (v *service) Read(ctx context.Context, req *ternpb.ReplicaReadRequest) (*ternpb.ReplicaReadResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, rpcerr.StatusError(err)
	}
	if req.GetLength() < 0 {
		return nil, rpcerr.StatusError(fmt.Errorf("%w: read of %d bytes", rpcerr.ErrInvalid, req.GetLength()))
	}
	p := make([]byte, min(req.GetLength(), maxReadBytes))
	n, err := v.store.Read(id, req.GetN(), req.GetOffset(), p)
	eof := errors.Is(err, io.EOF)
	if err != nil && !eof {
		return nil, rpcerr.StatusError(err)
	}
	return &ternpb.ReplicaReadResponse{Data: p[:n], Eof: eof}, nil
}

func (v *service) Seal(ctx context.Context, req *ternpb.ReplicaSealRequest) (*ternpb.ReplicaSealResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, rpcerr.StatusError(err)
	}
	if err := v.store.Seal(id, req.GetCount()); err != nil {
		return nil, rpcerr.StatusError(err)
	}
	return &ternpb.ReplicaSealResponse{}, nil
}

func (v *service) Offload(ctx context.Context, req *ternpb.ReplicaOffloadRequest) (*ternpb.ReplicaOffloadResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, rpcerr.StatusError(err)
	}
	objs := make([]Object, len(req.GetObjects()))
	for i, o := range req.GetObjects() {
		objs[i] = Object{Key: o.GetKey(), From: o.GetFrom(), To: o.GetTo()}
	}
	if err := v.store.Offload(ctx, id, objs); err != nil {
		return nil, rpcerr.StatusError(err)
	}
	return &ternpb.ReplicaOffloadResponse{}, nil
}

func (v *service) Drop(ctx context.Context, req *ternpb.ReplicaDropRequest) (*ternpb.ReplicaDropResponse, error) {
	id, err := segmentID(req.GetSegment())
	if err != nil {
		return nil, rpcerr.StatusError(err)
	}
	if err := v.store.Drop(id); err != nil {
		return nil, rpcerr.StatusError(err)
	}
	return &ternpb.ReplicaDropResponse{}, nil
}
