package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// A remote writer pipelines its appends over one AppendStream, opened at the
// first append. Each AppendAsync or AppendBatch call is one batch (appended
// atomically) with one result. The batches and their pendings are queued
// under the writer's mutex, so the queue order is the call order; a sender
// goroutine sends every batch queued since its last send in one request (so
// many producers cost the server one message, not one each; the producers
// encode their batches into that request as they queue them), and a receiver
// goroutine completes the pendings in order, since the server answers a
// stream's batches in the order received. When the stream breaks, every pending it
// holds fails and the next append opens a new stream.

// maxRequestBytes is about the most batches' bytes the sender packs into
// one request; a single larger batch goes alone.
const maxRequestBytes = 4 << 20

// streamEndTimeout bounds how long closing a writer or subscriber waits for
// the server to end the stream after the client has half-closed it.
const streamEndTimeout = 5 * time.Second

// Writer appends to a log. Only the newest writer of a log can append; an
// older one gets ErrFenced. A Writer is safe for concurrent use; concurrent
// appends are committed together (group commit) in the order they were
// queued.
type Writer struct {
	l     *Log
	epoch uint64

	mu     sync.Mutex
	closed bool
	s      *appendStream  // nil before the first append and after the stream broke
	last   *Pending       // the latest queued append, for Close and AppendTimeTick
	wg     sync.WaitGroup // the goroutines of every stream
}

// appendStream is one AppendStream and its queue. Its mutable fields are
// guarded by the writer's mu.
type appendStream struct {
	w      *Writer
	ctx    context.Context // ends the stream when canceled
	cancel context.CancelFunc
	wake   chan struct{} // has a value when queue or ending may have changed
	done   chan struct{} // closed when the stream's goroutines have exited

	queue   *grpcopts.AppendQueue // encoded batches, not yet handed to the sender
	pending []*Pending            // every unanswered request, in queue order
	ending  bool                  // half-close once everything queued is sent
	err     error                 // why the stream broke; nil while it works
}

// Epoch is the writer's epoch: the log's newest when the writer was opened.
func (w *Writer) Epoch() uint64 { return w.epoch }

// Append appends one entry and waits for its acknowledgement.
func (w *Writer) Append(ctx context.Context, e Entry) (Offset, error) {
	return w.append([]Entry{e}).Wait(ctx)
}

// AppendAsync queues one entry and returns at once; Wait on the result gives
// the outcome. Appends are acknowledged in the order they were queued. The
// entry's bytes are copied before AppendAsync returns.
func (w *Writer) AppendAsync(e Entry) *Pending { return w.append([]Entry{e}) }

// AppendBatch appends entries atomically, also across crashes: after a crash
// either all of them are in the log or none. It waits for the
// acknowledgement and returns the offset of the first entry; the others
// follow densely. It goes through the stream like AppendAsync, so that it is
// acknowledged in its place among the appends queued around it.
func (w *Writer) AppendBatch(ctx context.Context, es []Entry) (Offset, error) {
	return w.append(es).Wait(ctx)
}

// AppendBatchAsync queues entries to be appended atomically, as
// AppendBatch does, and returns at once; Wait on the result gives the offset
// of the first entry. The entries' bytes are copied before it returns.
func (w *Writer) AppendBatchAsync(es []Entry) *Pending { return w.append(es) }

// append checks es, and encodes them into the stream's next request.
func (w *Writer) append(es []Entry) *Pending {
	var one [1]grpcopts.Entry
	ges := one[:0]
	if len(es) > 1 {
		ges = make([]grpcopts.Entry, 0, len(es))
	}
	for _, e := range es {
		ge := grpcopts.Entry{Payload: e.Payload, Properties: e.Properties}
		if !e.Time.IsZero() { // else the server's clock
			ge.UnixNano = e.Time.UnixNano()
		}
		ges = append(ges, ge)
	}
	size, err := w.check(es, ges)
	if err != nil {
		return failed(err)
	}
	p := &Pending{done: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.l.c.isClosed() {
		return failed(ErrClosed)
	}
	s := w.s
	if s == nil {
		s = w.openStream()
	}
	s.queue.Add(ges, size) // the entries' one copy
	s.pending = append(s.pending, p)
	w.last = p
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return p
}

// check validates es (CheckBatch), and returns the bytes of their Batch
// message (ges, their encoding), which one request must be able to carry.
func (w *Writer) check(es []Entry, ges []grpcopts.Entry) (int, error) {
	if _, err := CheckBatch(es, w.l.opts.MaxEntryBytes); err != nil {
		return 0, err
	}
	size := grpcopts.BatchSize(ges)
	if n := size + len(w.l.name) + 64; n > grpcopts.MaxMessageBytes {
		return 0, fmt.Errorf("%w: the batch is %d bytes on the wire, over the %d one request to a server can carry; split it", ErrTooLarge, n, grpcopts.MaxMessageBytes)
	}
	return size, nil
}

// openStream starts a stream for the queue. The caller holds w.mu.
func (w *Writer) openStream() *appendStream {
	s := &appendStream{w: w, queue: grpcopts.NewAppendQueue(maxRequestBytes), wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	w.s = s
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(s.done)
		s.run()
	}()
	return s
}

func (s *appendStream) run() {
	api, err := s.w.l.api()
	var stream grpc.BidiStreamingClient[ternpb.AppendStreamRequest, ternpb.AppendStreamResponse]
	if err == nil {
		stream, err = api.AppendStream(s.ctx)
	}
	if err != nil {
		s.fail(err)
		return
	}
	received := make(chan struct{})
	go func() {
		defer close(received)
		s.receive(stream)
	}()
	s.send(stream)
	<-received
}

// send sends the queued requests in order, and half-closes the stream once
// it is ending and everything queued is sent.
func (s *appendStream) send(stream grpc.BidiStreamingClient[ternpb.AppendStreamRequest, ternpb.AppendStreamResponse]) {
	for {
		s.w.mu.Lock()
		bodies, ending, broken := s.queue.Take(), s.ending, s.err != nil
		s.w.mu.Unlock()
		if broken {
			grpcopts.Discard(bodies)
			return
		}
		for i, body := range bodies {
			// The codec takes body (grpcopts.EncodedAppend).
			if err := stream.SendMsg(&grpcopts.EncodedAppend{Log: s.w.l.name, Epoch: s.w.epoch, Body: body}); err != nil {
				grpcopts.Discard(bodies[i+1:])
				// io.EOF: the stream is over, and Recv returns why.
				if err != io.EOF {
					s.fail(err)
				}
				return
			}
		}
		s.w.mu.Lock()
		more := s.queue.Len() > 0
		s.w.mu.Unlock()
		if more {
			continue
		}
		if ending {
			if err := stream.CloseSend(); err != nil {
				s.fail(err)
			}
			return
		}
		select {
		case <-s.wake:
			// The producers that an answer woke append at about the same
			// time: let them queue, so one request carries them all.
			runtime.Gosched()
		case <-s.ctx.Done():
			return
		}
	}
}

// receive completes the pendings in order with the server's answers.
func (s *appendStream) receive(stream grpc.BidiStreamingClient[ternpb.AppendStreamRequest, ternpb.AppendStreamResponse]) {
	var (
		ps   []*Pending
		resp grpcopts.DecodedResults // reused by each RecvMsg
	)
	for {
		// Decoded by the codec (grpcopts), not as a ternpb message.
		if err := stream.RecvMsg(&resp); err != nil {
			s.fail(err)
			return
		}
		results := resp.Results
		s.w.mu.Lock()
		if len(s.pending) < len(results) {
			s.w.mu.Unlock()
			s.fail(errors.New("tern: the server answered an append that was not sent"))
			return
		}
		ps = append(ps[:0], s.pending[:len(results)]...)
		clear(s.pending[:len(results)])
		s.pending = s.pending[len(results):]
		s.w.mu.Unlock()
		for i, r := range results {
			if r.Err != nil {
				ps[i].finish(0, rpcerr.FromProto(r.Err))
			} else {
				ps[i].finish(Offset(r.Offset), nil)
			}
		}
	}
}

// fail ends the stream: its unanswered appends fail with the mapped err, and
// the writer's next append opens a new stream.
func (s *appendStream) fail(err error) {
	w := s.w
	w.mu.Lock()
	if s.err == nil {
		switch {
		case w.l.c.isClosed():
			s.err = ErrClosed
		case err == io.EOF:
			s.err = errors.New("tern: the server ended the append stream without answering; the append's outcome is unknown")
		default:
			s.err = w.l.c.err(err)
		}
	}
	if w.s == s {
		w.s = nil
	}
	ps := s.pending
	s.pending = nil
	grpcopts.Discard(s.queue.Take())
	err = s.err
	w.mu.Unlock()
	s.cancel()
	for _, p := range ps {
		p.finish(0, err)
	}
}

// AppendTimeTick sends a time tick: an ordered marker that readers and
// subscribers that asked WithTicks receive after every entry this writer
// queued before the call and before every entry queued after it. t is the
// application's timestamp; Tern does not interpret it. Nothing is written
// to disk: a tick reaches only the readers open when it is sent.
//
// It waits until the appends queued before it are answered, so that the
// tick cannot overtake them on the way to the server, then sends it.
func (w *Writer) AppendTimeTick(ctx context.Context, t uint64) error {
	w.mu.Lock()
	closed, last := w.closed, w.last
	w.mu.Unlock()
	if closed || w.l.c.isClosed() {
		return ErrClosed
	}
	if last != nil {
		select {
		case <-last.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.l.call(ctx, func(ctx context.Context, api ternpb.TernClient) error {
		_, err := api.AppendTimeTick(ctx, &ternpb.AppendTimeTickRequest{Log: w.l.name, Epoch: w.epoch, Time: t})
		return err
	})
}

// Close waits for the writer's queued appends to be answered, then
// half-closes the stream and waits (a few seconds at most) for the server to
// end it. It does not fence the writer: another writer must still be opened
// to take over.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	last := w.last
	w.mu.Unlock()
	if last != nil {
		<-last.done
	}
	w.mu.Lock()
	s := w.s
	w.s = nil
	if s != nil {
		s.ending = true
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
	if s != nil {
		t := time.NewTimer(streamEndTimeout)
		select {
		case <-s.done:
		case <-t.C:
		}
		t.Stop()
		s.cancel()
	}
	w.wg.Wait()
	w.l.c.untrack(w)
	return nil
}

// Pending is an append in progress, from AppendAsync: queued on the writer's
// stream, or failed before it was. Its fields are written once, before done
// is closed.
type Pending struct {
	done chan struct{}
	off  Offset
	err  error
}

// failed is a Pending that failed before it was queued.
func failed(err error) *Pending {
	p := &Pending{done: make(chan struct{}), err: err}
	close(p.done)
	return p
}

// Done is closed once the outcome is known, for a select over several
// appends or other events; Wait then returns at once.
func (p *Pending) Done() <-chan struct{} { return p.done }

func (p *Pending) finish(off Offset, err error) {
	p.off, p.err = off, err
	close(p.done)
}

// Wait blocks until the append is acknowledged (durable, under the log's
// durability setting) or has failed, or ctx ends, and returns the offset of
// its first entry. When ctx ends first, the append goes on and its outcome
// is unknown.
func (p *Pending) Wait(ctx context.Context) (Offset, error) {
	select {
	case <-p.done:
	default:
		select {
		case <-p.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return p.off, p.err
}
