package replica

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/ternwal/tern/api/ternpb"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
)

// Conn is a Node reached over the network: a client of a replica's
// Server, over gRPC and, for add streams, connections of their own. It is
// safe for concurrent use.
type Conn struct {
	addr   string
	cc     *grpc.ClientConn
	client ternpb.ReplicaClient
	ka     addKeepalive // of its add streams
	tls    *tls.Config  // of its add streams, offering AddProtocol; nil for plaintext
}

var _ Node = (*Conn)(nil)

// Dial returns a Conn to the replica at addr (host:port), over TLS with
// conf (in a cluster, the node's certificate and the cluster's CA), or in
// plaintext when conf is nil. It connects lazily, on the first call.
// Keepalive pings detect a dead replica (see ServerOptions).
func Dial(addr string, conf *tls.Config) (*Conn, error) {
	creds := insecure.NewCredentials()
	var addTLS *tls.Config
	if conf != nil {
		creds = credentials.NewTLS(conf)
		addTLS = conf.Clone()
		addTLS.NextProtos = []string{AddProtocol}
	}
	opts := append(grpcopts.Dial(),
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}),
	)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("replica: dial %s: %w", addr, err)
	}
	return &Conn{addr: addr, cc: cc, client: ternpb.NewReplicaClient(cc), ka: defaultKeepalive, tls: addTLS}, nil
}

// Close closes the gRPC connection; calls in flight fail. Add streams
// have connections of their own, which their Close closes.
func (c *Conn) Close() error { return c.cc.Close() }

// sendQueueBytes bounds the fragments a stream has queued for its writer;
// past it Send waits.
const sendQueueBytes = 8 << 20

// Stream opens an add stream on a connection of its own. Send queues the
// fragment for the stream's writer, and blocks while sendQueueBytes are
// queued; the replica reads a window of fragments that are not yet
// durable, and then TCP's flow control holds the writer. A fragment the
// replica refuses fails the stream, through onErr and the next Send.
func (c *Conn) Stream(ctx context.Context, seg SegmentID, epoch uint64, onDurable func(uint64), onErr func(error)) (Sender, error) {
	nc, err := addDialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("replica: connect to %s for the add stream of %v: %w", c.addr, seg, err)
	}
	if c.tls != nil {
		tc := tls.Client(nc, c.tls)
		hctx, cancel := context.WithTimeout(ctx, c.ka.after)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("replica: TLS handshake with %s for the add stream of %v: %w", c.addr, seg, err)
		}
		nc = tc
	}
	nc.SetWriteDeadline(time.Now().Add(c.ka.after))
	if _, err := nc.Write(appendOpen(nil, seg, epoch)); err != nil {
		nc.Close()
		return nil, fmt.Errorf("replica: open the add stream of %v at %s: %w", seg, c.addr, err)
	}
	st := &addConn{addr: c.addr, c: nc, ka: c.ka, wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
	st.stop = context.AfterFunc(ctx, func() { st.fail(ctx.Err()) })
	go st.write()
	go st.read(onDurable, onErr)
	return st, nil
}

// addConn is a Conn's Sender: Send queues, write writes the queue, and
// read reports the replica's frames.
type addConn struct {
	addr string
	c    net.Conn
	ka   addKeepalive
	stop func() bool   // of the context's AfterFunc
	wake chan struct{} // capacity 1: the queue grew, or the stream failed
	room chan struct{} // capacity 1: the queue shrank, or the stream failed

	mu     sync.Mutex
	queue  []queuedFragment
	queued int   // bytes of the fragments queued and not yet written
	err    error // why the stream failed; set once
	closed bool  // by Close: onErr is not called
}

type queuedFragment struct {
	n    uint64
	data []byte
	sum  uint32
}

// errStreamEnded is a stream whose server closed the connection without
// an error frame: it is shutting down, or the client closed its side.
var errStreamEnded = errors.New("replica: the server ended the stream")

func (st *addConn) Send(n uint64, data []byte, sum uint32) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.err == nil && st.queued > 0 && st.queued+len(data) > sendQueueBytes {
		st.mu.Unlock()
		<-st.room
		st.mu.Lock()
	}
	if st.err != nil {
		return st.err
	}
	st.queue = append(st.queue, queuedFragment{n: n, data: data, sum: sum})
	st.queued += len(data)
	signal(st.wake)
	return nil
}

func (st *addConn) Close() error {
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
	st.fail(errStreamClosed)
	st.stop()
	return nil
}

// fail records why the stream failed, if it is the first reason, and
// closes the connection, which ends read and write.
func (st *addConn) fail(err error) {
	st.mu.Lock()
	if st.err == nil {
		st.err = err
		st.queue = nil
	}
	st.mu.Unlock()
	st.c.Close()
	signal(st.wake)
	signal(st.room)
}

// write writes the queued fragments, all of them in one writev, and a ping
// when it wrote nothing for ka.every.
func (st *addConn) write() {
	var (
		bufs    net.Buffers
		headers []byte
		ping    = time.NewTimer(st.ka.every)
	)
	defer ping.Stop()
	for {
		st.mu.Lock()
		queue, failed := st.queue, st.err != nil
		st.queue = nil
		st.mu.Unlock()
		if failed {
			return
		}
		sent := 0 // fragment bytes
		if len(queue) == 0 {
			select {
			case <-st.wake:
				continue
			case <-ping.C:
				var h [clientFrameBytes]byte
				putClientFrame(&h, kindPing, 0, 0, 0)
				bufs = append(bufs[:0], h[:])
			}
		} else {
			headers = slices.Grow(headers[:0], clientFrameBytes*len(queue))[:clientFrameBytes*len(queue)]
			bufs = bufs[:0]
			for i, f := range queue {
				h := (*[clientFrameBytes]byte)(headers[i*clientFrameBytes:])
				putClientFrame(h, kindFragment, f.n, len(f.data), f.sum)
				bufs = append(bufs, h[:], f.data)
				sent += len(f.data)
			}
		}
		st.c.SetWriteDeadline(time.Now().Add(st.ka.after))
		// WriteTo consumes bufs; clear what it leaves so the fragments
		// are not kept.
		all := bufs
		_, err := bufs.WriteTo(st.c)
		clear(all)
		bufs = all[:0]
		if err != nil {
			st.fail(fmt.Errorf("replica: add stream to %s: %w", st.addr, err))
			return
		}
		ping.Reset(st.ka.every)
		if len(queue) > 0 {
			st.mu.Lock()
			st.queued -= sent
			st.mu.Unlock()
			signal(st.room)
		}
	}
}

// read reports the durable counts, and the stream's end to onErr unless
// Close ended it.
func (st *addConn) read(onDurable func(uint64), onErr func(error)) {
	r := bufio.NewReaderSize(deadlineReader{st.c, st.ka.after}, 4<<10)
	var last uint64
	for {
		kind, count, err := readServerFrame(r)
		if err == nil && kind == kindCount && count > last {
			last = count
			onDurable(last)
		}
		if err == nil {
			continue
		}
		switch {
		case err == io.EOF:
			err = errStreamEnded
		case kind != kindError:
			err = fmt.Errorf("replica: add stream to %s: %w", st.addr, err)
		}
		st.fail(err)
		st.mu.Lock()
		closed, err := st.closed, st.err
		st.mu.Unlock()
		if !closed {
			onErr(err)
		}
		return
	}
}

func (c *Conn) Fence(ctx context.Context, seg SegmentID, epoch uint64) (uint64, error) {
	resp, err := c.client.Fence(ctx, &ternpb.ReplicaFenceRequest{Segment: segmentProto(seg), Epoch: epoch})
	if err != nil {
		return 0, rpcerr.Error(err)
	}
	return resp.GetCount(), nil
}

func (c *Conn) List(ctx context.Context, seg SegmentID) ([]int64, error) {
	resp, err := c.client.List(ctx, &ternpb.ReplicaListRequest{Segment: segmentProto(seg)})
	if err != nil {
		return nil, rpcerr.Error(err)
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
			return read, rpcerr.Error(err)
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
	return rpcerr.Error(err)
}

func (c *Conn) Offload(ctx context.Context, seg SegmentID, objs []Object) error {
	req := &ternpb.ReplicaOffloadRequest{Segment: segmentProto(seg)}
	for _, o := range objs {
		req.Objects = append(req.Objects, &ternpb.ReplicaObject{Key: o.Key, From: o.From, To: o.To})
	}
	_, err := c.client.Offload(ctx, req)
	return rpcerr.Error(err)
}

func (c *Conn) Drop(ctx context.Context, seg SegmentID) error {
	_, err := c.client.Drop(ctx, &ternpb.ReplicaDropRequest{Segment: segmentProto(seg)})
	return rpcerr.Error(err)
}
