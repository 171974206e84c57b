package physical

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/internal/vfs"
)

// GroupCommit measures producers goroutines that each append entries of
// size bytes to one file, one at a time, and wait for each to be durable: a
// committer takes everything queued, writes it with one write and
// fdatasyncs, round after round, in new files as a log's segments are. It is
// a log's group commit with nothing of Tern's in it (no framing, checksum,
// index or metadata), so the disk and the CPU bound it, not the engine.
//
// With overGRPC the producers are clients of a gRPC server in this process,
// over loopback TCP, as they are in `tern bench --grpc`: they share one
// bidirectional stream, on which a sender goroutine packs every entry queued
// since its last send into one message, the server appends each message as
// it arrives and answers with how many of its entries are durable, and a
// receiver completes them in order. The messages are raw bytes, not
// protobuf. The two variants together say how much of the embedded path's
// throughput gRPC alone leaves on this machine.
//
// The Variant is "group commit of N producers", with " over loopback gRPC"
// for the second; the latency is an entry's, from its append to its
// acknowledgement.
func GroupCommit(ctx context.Context, dir string, size, producers int, overGRPC bool, d time.Duration) (_ *loadgen.Result, err error) {
	variant := fmt.Sprintf("group commit of %d producers", producers)
	if overGRPC {
		variant += " over loopback gRPC"
	}
	if size <= 0 || producers <= 0 {
		return nil, fmt.Errorf("physical: %s of %d-byte entries: want a positive size and producers", variant, size)
	}
	c := &committer{dir: dir, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if err := c.newFile(); err != nil {
		return nil, measureError(variant, err)
	}
	var wg sync.WaitGroup
	wg.Go(c.run)
	defer func() {
		c.stop()
		wg.Wait()
		err = errors.Join(err, c.close())
	}()

	appendEntry := c.append
	if overGRPC {
		gc, err := startGRPC(c)
		if err != nil {
			return nil, measureError(variant, err)
		}
		defer gc.close()
		appendEntry = gc.append
	}

	m := startMeter()
	deadline := m.start.Add(d)
	counts := make([]int64, producers)
	errs := make([]error, producers)
	var pwg sync.WaitGroup
	for i := range producers {
		pwg.Go(func() {
			entry := payload(size)
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				if err := appendEntry(entry); err != nil {
					errs[i] = err
					return
				}
				m.hist.Record(time.Since(t0))
				counts[i]++
			}
		})
	}
	pwg.Wait()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return nil, measureError(variant, err)
	}
	var n int64
	for _, k := range counts {
		n += k
	}
	// Every entry counted was acknowledged, so each is in a file synced.
	if synced := c.synced.Load(); synced != n*int64(size) {
		return nil, measureError(variant, fmt.Errorf("%d entries of %d bytes acknowledged, but %d bytes synced", n, size, synced))
	}
	if c.replaced.Load() {
		m.note(fmt.Sprintf("each file took %d bytes, then writes went on in a new one", fileLimit))
	}
	spec := loadgen.Spec{Kind: loadgen.KindAppend, EntryBytes: size, Batch: 1, Producers: producers, Logs: 1, Duration: d}
	return m.result("disk", variant, spec, n, size), nil
}

// committer is the group commit: appends queue their bytes and a waiter,
// and run writes and syncs whatever is queued, round after round.
type committer struct {
	dir  string
	wake chan struct{} // has a value when the queue may have become non-empty
	done chan struct{} // closed to stop run

	mu      sync.Mutex
	queued  []byte
	waiters []chan error
	err     error // the failure that stopped run, for later appends

	f       *os.File // owned by run once it has started
	written int64    // into f

	synced   atomic.Int64 // bytes written and synced, all files together
	replaced atomic.Bool  // a file was full and a new one taken
}

// append queues b and waits until it is durable.
func (c *committer) append(b []byte) error {
	return <-c.appendAsync(b)
}

// appendAsync queues b and returns where its outcome will be sent.
func (c *committer) appendAsync(b []byte) <-chan error {
	w := make(chan error, 1)
	c.mu.Lock()
	if c.err != nil {
		w <- c.err
		c.mu.Unlock()
		return w
	}
	c.queued = append(c.queued, b...)
	c.waiters = append(c.waiters, w)
	first := len(c.waiters) == 1
	c.mu.Unlock()
	if first {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return w
}

func (c *committer) run() {
	var spare []byte
	for {
		c.mu.Lock()
		for len(c.waiters) == 0 {
			c.mu.Unlock()
			select {
			case <-c.wake:
			case <-c.done:
				c.fail(errors.New("physical: the measurement is over"))
				return
			}
			c.mu.Lock()
		}
		b, ws := c.queued, c.waiters
		c.queued, c.waiters = spare[:0], nil
		c.mu.Unlock()
		err := c.commit(b)
		for _, w := range ws {
			w <- err
		}
		if err != nil {
			c.fail(err)
			return
		}
		spare = b
	}
}

// commit writes b and syncs it, in a new file once the current one holds
// fileLimit bytes.
func (c *committer) commit(b []byte) error {
	if c.written >= int64(fileLimit) {
		if err := c.newFile(); err != nil {
			return err
		}
		c.replaced.Store(true)
	}
	if _, err := c.f.Write(b); err != nil {
		return err
	}
	c.written += int64(len(b))
	if err := vfs.Datasync(c.f); err != nil {
		return err
	}
	c.synced.Add(int64(len(b)))
	return nil
}

// newFile replaces the file being written with a new, empty one.
func (c *committer) newFile() error {
	f, err := os.CreateTemp(c.dir, "physical-group-*")
	if err != nil {
		return err
	}
	err = c.close()
	c.f, c.written = f, 0
	return err
}

// close removes the file being written.
func (c *committer) close() (err error) {
	if c.f != nil {
		removeFile(c.f, &err)
		c.f = nil
	}
	return err
}

// fail makes the queued and later appends fail with err.
func (c *committer) fail(err error) {
	c.mu.Lock()
	c.err = err
	ws := c.waiters
	c.waiters = nil
	c.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

func (c *committer) stop() { close(c.done) }

// rawCodec passes messages as the bytes they are (a *[]byte).
type rawCodec struct{}

func (rawCodec) Name() string { return "raw" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// appendService is the gRPC service of the measurement: one bidirectional
// stream whose requests are a 4-byte count of entries followed by them, and
// whose answers are 4-byte counts of entries made durable, in order.
var appendService = grpc.ServiceDesc{
	ServiceName: "tern.physical.GroupCommit",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Append",
		Handler:       func(srv any, s grpc.ServerStream) error { return srv.(*committer).serve(s) },
		ServerStreams: true,
		ClientStreams: true,
	}},
}

// serve appends each request as it arrives and answers, once its entries
// are durable, with their count, adding up the counts of requests already
// durable into one answer.
func (c *committer) serve(s grpc.ServerStream) error {
	type request struct {
		entries uint32
		outcome <-chan error
	}
	received := make(chan request, 1024)
	go func() {
		defer close(received)
		for {
			var b []byte
			if err := s.RecvMsg(&b); err != nil || len(b) < 4 {
				return // the client is gone; the handler's Send fails next
			}
			select {
			case received <- request{binary.LittleEndian.Uint32(b), c.appendAsync(b[4:])}:
			case <-s.Context().Done():
				return
			}
		}
	}()
	var durable uint32 // not yet answered
	answer := func() error {
		if durable == 0 {
			return nil
		}
		b := binary.LittleEndian.AppendUint32(nil, durable)
		durable = 0
		return s.SendMsg(&b)
	}
	for r := range received {
		var err error
		select {
		case err = <-r.outcome:
		default:
			if err := answer(); err != nil {
				return err
			}
			err = <-r.outcome
		}
		if err != nil {
			return err
		}
		durable += r.entries
		if len(received) == 0 {
			if err := answer(); err != nil {
				return err
			}
		}
	}
	return nil
}

// grpcClient is the producers' side: one stream, a sender and a receiver.
type grpcClient struct {
	server *grpc.Server
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	wake chan struct{} // has a value when an entry may have been queued

	mu      sync.Mutex
	queued  []byte       // the next request: a count, then the entries
	count   uint32       // the entries in queued
	waiters []chan error // every entry queued or sent and not answered
	err     error        // why the stream failed
}

// startGRPC serves c on a loopback port and opens a client's stream to it.
func startGRPC(c *committer) (*grpcClient, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gc := &grpcClient{wake: make(chan struct{}, 1)}
	// The HTTP/2 windows are those Tern's server and client advertise.
	// Messages as large as Tern's own server and client take: a sender
	// packs every entry queued since its last send into one, and 64
	// producers of 64 KiB fill 4 MiB, gRPC's default limit.
	gc.server = grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.MaxRecvMsgSize(grpcopts.MaxMessageBytes),
		grpc.InitialWindowSize(grpcopts.WindowBytes), grpc.InitialConnWindowSize(grpcopts.WindowBytes))
	gc.server.RegisterService(&appendService, c)
	gc.wg.Go(func() { _ = gc.server.Serve(lis) }) // ends at Stop
	gc.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}),
			grpc.MaxCallRecvMsgSize(grpcopts.MaxMessageBytes), grpc.MaxCallSendMsgSize(grpcopts.MaxMessageBytes)),
		grpc.WithInitialWindowSize(grpcopts.WindowBytes), grpc.WithInitialConnWindowSize(grpcopts.WindowBytes))
	if err != nil {
		gc.server.Stop()
		gc.wg.Wait()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	gc.cancel = cancel
	stream, err := gc.conn.NewStream(ctx, &appendService.Streams[0], "/tern.physical.GroupCommit/Append")
	if err != nil {
		gc.close()
		return nil, err
	}
	gc.wg.Go(func() { gc.send(ctx, stream) })
	gc.wg.Go(func() { gc.receive(stream) })
	return gc, nil
}

// append queues b on the stream and waits for its answer.
func (gc *grpcClient) append(b []byte) error {
	w := make(chan error, 1)
	gc.mu.Lock()
	if gc.err != nil {
		gc.mu.Unlock()
		return gc.err
	}
	if gc.count == 0 {
		gc.queued = append(gc.queued[:0], 0, 0, 0, 0)
	}
	gc.queued = append(gc.queued, b...)
	gc.count++
	gc.waiters = append(gc.waiters, w)
	gc.mu.Unlock()
	select {
	case gc.wake <- struct{}{}:
	default:
	}
	return <-w
}

// send sends everything queued since its last send as one request.
func (gc *grpcClient) send(ctx context.Context, stream grpc.ClientStream) {
	for {
		select {
		case <-gc.wake:
		case <-ctx.Done():
			return
		}
		// The producers that one answer woke append at about the same
		// time: let them queue, so that one request carries them all.
		runtime.Gosched()
		gc.mu.Lock()
		if gc.count == 0 {
			gc.mu.Unlock()
			continue
		}
		binary.LittleEndian.PutUint32(gc.queued, gc.count)
		// gRPC may hold the bytes after SendMsg returns: a new buffer.
		b := gc.queued
		gc.queued, gc.count = make([]byte, 0, cap(b)), 0
		gc.mu.Unlock()
		if err := stream.SendMsg(&b); err != nil {
			gc.fail(err)
			return
		}
	}
}

// receive completes the waiters in order with the server's counts.
func (gc *grpcClient) receive(stream grpc.ClientStream) {
	for {
		var b []byte
		if err := stream.RecvMsg(&b); err != nil {
			gc.fail(err)
			return
		}
		if len(b) != 4 {
			gc.fail(fmt.Errorf("physical: the server answered with %d bytes, not a 4-byte count", len(b)))
			return
		}
		n := int(binary.LittleEndian.Uint32(b))
		gc.mu.Lock()
		if n > len(gc.waiters) {
			gc.mu.Unlock()
			gc.fail(fmt.Errorf("physical: the server answered %d entries of %d sent", n, len(gc.waiters)))
			return
		}
		ws := gc.waiters[:n:n]
		gc.waiters = gc.waiters[n:]
		gc.mu.Unlock()
		for _, w := range ws {
			w <- nil
		}
	}
}

// fail ends the stream's unanswered and later appends with err.
func (gc *grpcClient) fail(err error) {
	gc.mu.Lock()
	if gc.err == nil {
		gc.err = err
	}
	ws := gc.waiters
	gc.waiters = nil
	err = gc.err
	gc.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

func (gc *grpcClient) close() {
	gc.fail(errors.New("physical: the measurement is over"))
	gc.cancel()
	gc.conn.Close()
	gc.server.Stop()
	gc.wg.Wait()
}
