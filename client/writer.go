package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// A remote writer pipelines its appends over an AppendStream. Each append
// is one batch (appended atomically) with one result, and carries the
// writer's producer ID (random) and a sequence number, so that the server
// applies a batch sent twice only once (docs/writers.md).
//
// The batches and their pendings are queued under the writer's mutex, so
// the queue order is the call order and the sequence order. A sender
// goroutine sends every batch queued since its last send in one request (so
// many producers cost the server one message, not one each) and a receiver
// goroutine completes the pendings in order, since the server answers a
// stream's batches in the order received.
//
// When the stream breaks (the server restarted, the log moved to another
// node, the connection dropped), the batches sent and not answered have an
// unknown outcome: they go back to the front of the queue, in order, and
// are sent again on a new stream, to the node that serves the log now.
// The server answers a batch it had applied with its first offset. The
// writer keeps trying, as route.go's policy says, for Options.RetryTimeout
// after the failure, then fails the batches it could not get answered.
// Only a newer writer session (ErrFenced) ends it for good.

// maxRequestBytes is about the most batches' bytes the sender packs into
// one request; a single larger batch goes alone.
const maxRequestBytes = 4 << 20

// streamEndTimeout bounds how long closing a writer or subscriber waits for
// the server to end the stream after the client has half-closed it.
const streamEndTimeout = 5 * time.Second

// Writer appends to a log. Only the newest writer session of a log can
// append; an older one gets ErrFenced. A Writer is safe for concurrent use;
// concurrent appends are committed together (group commit) in the order they
// were queued.
//
// A Writer's session is its epoch, not its connection: it rides through a
// restart of the server and a move of the log to another node, sending
// again what was not answered, without duplicates.
type Writer struct {
	l        *Log
	epoch    uint64 // 0 for a shared producer
	shared   bool
	producer uint64

	mu      sync.Mutex
	closed  bool
	seq     uint64        // the last given out
	queue   []*Pending    // not sent on the current stream, in order
	sent    []*Pending    // sent on the current stream, not answered, in order
	s       *appendStream // nil while there is none
	wake    chan struct{} // has a value when queue, s or closed may have changed
	fenced  error         // set once for good: every append fails with it
	failing time.Time     // when the oldest unanswered batch's stream broke; zero while none did
	last    *Pending      // the latest queued append, for Close and AppendTimeTick
	done    chan struct{} // closed when the sender has exited
	// answered is when the server last answered an append; abandoned, the
	// error a closing writer failed its unanswered appends with when the
	// server stopped answering (closeWait): its streams are then over.
	answered  time.Time
	abandoned error
}

// appendStream is one AppendStream.
type appendStream struct {
	stream grpc.BidiStreamingClient[ternpb.AppendStreamRequest, ternpb.AppendStreamResponse]
	cancel context.CancelFunc
	broken chan struct{} // closed by the receiver when the stream ends
}

// newWriter starts a writer of session epoch, or a shared producer.
func newWriter(l *Log, epoch uint64, shared bool) *Writer {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	p := binary.LittleEndian.Uint64(b[:]) | 1
	w := &Writer{l: l, epoch: epoch, shared: shared, producer: p, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.run()
	}()
	return w
}

// Epoch is the writer's epoch: its session, the log's newest when the
// writer was opened (or the one WithEpoch chose).
func (w *Writer) Epoch() uint64 { return w.epoch }

// Append appends one entry and waits for its acknowledgement.
func (w *Writer) Append(ctx context.Context, e Entry, opts ...AppendOption) (Offset, error) {
	return w.append([]Entry{e}, opts).Wait(ctx)
}

// AppendAsync queues one entry and returns at once; Wait on the result gives
// the outcome. Appends are acknowledged in the order they were queued. The
// entry's bytes are copied before AppendAsync returns.
func (w *Writer) AppendAsync(e Entry, opts ...AppendOption) *Pending {
	return w.append([]Entry{e}, opts)
}

// AppendBatch appends entries atomically, also across crashes: after a crash
// either all of them are in the log or none. It waits for the
// acknowledgement and returns the offset of the first entry; the others
// follow densely. It goes through the stream like AppendAsync, so that it is
// acknowledged in its place among the appends queued around it.
func (w *Writer) AppendBatch(ctx context.Context, es []Entry, opts ...AppendOption) (Offset, error) {
	return w.append(es, opts).Wait(ctx)
}

// AppendBatchAsync queues entries to be appended atomically, as
// AppendBatch does, and returns at once; Wait on the result gives the offset
// of the first entry. The entries' bytes are copied before it returns.
func (w *Writer) AppendBatchAsync(es []Entry, opts ...AppendOption) *Pending {
	return w.append(es, opts)
}

// append checks es, encodes them with the next sequence number and queues
// them.
func (w *Writer) append(es []Entry, opts []AppendOption) *Pending {
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
	o := NewAppendOptions(opts...)
	h := grpcopts.BatchHeader{Seq: 1 << 62, IfEnd: o.IfEnd, End: uint64(o.End)} // the largest seq, to size it
	size, err := w.check(es, ges, h)
	if err != nil {
		return failed(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed || w.l.c.isClosed():
		return failed(ErrClosed)
	case w.fenced != nil:
		return failed(w.fenced)
	}
	w.seq++
	h.Seq = w.seq
	p := &Pending{done: make(chan struct{}), seq: w.seq}
	p.batch = grpcopts.EncodeBatch(ges, grpcopts.BatchSize(ges, h), h) // the entries' one copy
	p.bytes = size
	w.queue = append(w.queue, p)
	w.last = p
	w.signal()
	return p
}

// signal wakes the sender. The caller holds w.mu.
func (w *Writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// check validates es (CheckBatch), and returns the bytes of their Batch
// message with h (ges, their encoding), which one request must be able to
// carry.
func (w *Writer) check(es []Entry, ges []grpcopts.Entry, h grpcopts.BatchHeader) (int, error) {
	if _, err := CheckBatch(es, w.l.opts.MaxEntryBytes); err != nil {
		return 0, err
	}
	size := grpcopts.BatchSize(ges, h)
	if n := size + len(w.l.name) + 64; n > grpcopts.MaxMessageBytes {
		return 0, fmt.Errorf("%w: the batch is %d bytes on the wire, over the %d one request to a server can carry; split it", ErrTooLarge, n, grpcopts.MaxMessageBytes)
	}
	return size, nil
}

// run is the sender: it opens streams, sends the queue in order, and
// starts over on a new stream when one breaks, until the writer is closed
// and everything queued is answered; then it half-closes the stream and
// waits (a few seconds at most) for the server to end it.
func (w *Writer) run() {
	var b backoff // between streams, while failing
	for {
		w.mu.Lock()
		for len(w.queue) == 0 {
			if w.closed && len(w.sent) == 0 {
				s := w.s
				w.mu.Unlock()
				if s != nil {
					w.end(s)
				}
				return
			}
			w.mu.Unlock()
			<-w.wake
			w.mu.Lock()
		}
		s, failing := w.s, !w.failing.IsZero()
		w.mu.Unlock()
		if s == nil {
			// Every new stream while the writer is failing waits longer,
			// up to a cap: the log may take a moment to come back.
			if !failing {
				b = backoff{}
			} else {
				time.Sleep(b.pause())
			}
			var err error
			if s, err = w.open(); err != nil {
				w.retryOrFail(err)
				continue
			}
		}
		w.send(s)
	}
}

// end half-closes s and waits, streamEndTimeout at most, for the server to
// end it.
func (w *Writer) end(s *appendStream) {
	_ = s.stream.CloseSend()
	t := time.NewTimer(streamEndTimeout)
	defer t.Stop()
	select {
	case <-s.broken:
	case <-t.C:
		s.cancel()
		<-s.broken
	}
}

// open starts a stream and its receiver on the node that serves the log.
func (w *Writer) open() (*appendStream, error) {
	api, err := w.l.api()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := api.AppendStream(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &appendStream{stream: stream, cancel: cancel, broken: make(chan struct{})}
	w.mu.Lock()
	w.s = s
	w.mu.Unlock()
	go w.receive(s)
	return s, nil
}

// send sends what is queued on s in requests of about maxRequestBytes. It
// returns when the queue is empty or s broke.
func (w *Writer) send(s *appendStream) {
	for {
		w.mu.Lock()
		if w.s != s {
			w.mu.Unlock()
			return
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		n, bytes := 0, 0
		for n < len(w.queue) && (n == 0 || bytes+w.queue[n].bytes <= maxRequestBytes) {
			bytes += w.queue[n].bytes
			n++
		}
		batches := make([]*[]byte, n)
		for i, p := range w.queue[:n] {
			batches[i] = p.batch
		}
		acked := w.queue[0].seq
		if len(w.sent) > 0 {
			acked = w.sent[0].seq
		}
		w.sent = append(w.sent, w.queue[:n]...)
		w.queue = w.queue[n:]
		if len(w.queue) == 0 {
			w.queue = nil
		}
		req := &grpcopts.EncodedAppend{Log: w.l.name, Epoch: w.epoch, Shared: w.shared, Producer: w.producer, Acked: acked, Batches: batches}
		w.mu.Unlock()
		// The codec sends the batches without taking them: they are the
		// pendings' until answered.
		if err := s.stream.SendMsg(req); err != nil {
			// io.EOF: the stream is over, and the receiver learns why.
			if err != io.EOF {
				s.cancel()
			}
			<-s.broken
			return
		}
		w.mu.Lock()
		more := len(w.queue) > 0
		w.mu.Unlock()
		if !more {
			// The producers that an answer woke append at about the same
			// time: let them queue, so one request carries them all.
			runtime.Gosched()
		}
	}
}

// receive completes the pendings in order with the server's answers on s,
// and when s ends, gives what it did not answer back to the queue.
func (w *Writer) receive(s *appendStream) {
	defer close(s.broken)
	var (
		ps   []*Pending
		errs []error
		resp grpcopts.DecodedResults // reused by each RecvMsg
	)
	for {
		// Decoded by the codec (grpcopts), not as a ternpb message.
		if err := s.stream.RecvMsg(&resp); err != nil {
			w.broke(s, err)
			return
		}
		w.mu.Lock()
		if len(w.sent) < len(resp.Results) {
			w.mu.Unlock()
			w.broke(s, errors.New("tern: the server answered an append that was not sent"))
			return
		}
		ps, errs = ps[:0], errs[:0]
		retry := -1 // the first result that says to send it again
		for i, r := range resp.Results {
			var err error
			if r.Err != nil {
				err = w.l.c.err(rpcerr.FromProto(r.Err))
				if resendable(err) && !w.l.c.isClosed() {
					retry = i
					break
				}
			}
			ps, errs = append(ps, w.sent[i]), append(errs, err)
		}
		clear(w.sent[:len(ps)])
		w.sent = w.sent[len(ps):]
		if len(ps) > 0 {
			w.failing = time.Time{} // answers come again
			w.answered = time.Now()
		}
		w.signal() // a closing writer's sender waits for the last answer
		w.mu.Unlock()
		for i, p := range ps {
			if errs[i] != nil {
				if errors.Is(errs[i], ErrFenced) {
					w.fence(errs[i])
				}
				p.finish(0, errs[i])
			} else {
				p.finish(Offset(resp.Results[i].Offset), nil)
			}
		}
		if retry >= 0 {
			w.broke(s, rpcerr.FromProto(resp.Results[retry].Err))
			return
		}
	}
}

// broke ends s for err: what it sent and did not answer goes back to the
// front of the queue, to be sent again on the next stream, unless err is
// final.
func (w *Writer) broke(s *appendStream, err error) {
	s.cancel()
	if err == io.EOF {
		err = errStreamEnded
	}
	w.mu.Lock()
	if w.s == s {
		w.s = nil
	}
	if w.abandoned != nil {
		w.mu.Unlock()
		return // closeWait failed what it sent
	}
	sent := w.sent
	w.sent = nil
	for _, p := range sent {
		p.resent = true // a stream may still hold its bytes: never pooled
	}
	w.queue = append(sent, w.queue...)
	w.mu.Unlock()
	w.retryOrFail(err)
}

// retryOrFail handles a stream that broke or did not open with err: the
// queue waits for the next stream if err says the server or the log's
// node went away (route.go's policy), and the writer has not tried for
// Options.RetryTimeout yet; otherwise every queued append fails.
func (w *Writer) retryOrFail(err error) {
	if w.l.c.isClosed() {
		w.failAll(ErrClosed)
		return
	}
	mapped := w.l.c.err(err)
	w.mu.Lock()
	if w.abandoned != nil {
		w.mu.Unlock()
		return // closeWait failed the queue
	}
	if w.failing.IsZero() {
		w.failing = time.Now()
	}
	expired := time.Since(w.failing) > w.l.c.retryTimeout
	w.signal()
	w.mu.Unlock()
	switch {
	case errors.Is(mapped, ErrFenced):
		w.fence(mapped)
		w.failAll(mapped)
	case !resendable(err):
		w.failAll(mapped)
	case expired:
		what := "the tern server"
		if unreachable(err) {
			what = "the tern server at " + w.l.c.addr + " (is `tern serve` running?)"
		}
		w.failAll(fmt.Errorf("%w: the writer could not reach %s for %v (Options.RetryTimeout): the outcome of the appends it had sent is unknown", mapped, what, w.l.c.retryTimeout))
	default:
		w.l.redirect(err)
	}
}

// isFenced reports whether fence was called.
func (w *Writer) isFenced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fenced != nil
}

// fence makes every later append of the writer fail with err.
func (w *Writer) fence(err error) {
	w.mu.Lock()
	if w.fenced == nil {
		w.fenced = err
	}
	w.mu.Unlock()
}

// failAll fails every queued append with err.
func (w *Writer) failAll(err error) {
	w.mu.Lock()
	ps := w.queue
	w.queue = nil
	w.failing = time.Time{}
	w.mu.Unlock()
	for _, p := range ps {
		p.finish(0, err)
	}
}

// resendable reports whether an append that failed with err, as gRPC or
// rpcerr.FromProto gave it, may be sent again: the policy of route.go,
// and a stream this writer canceled because sending on it failed.
func resendable(err error) bool {
	return rpcerr.Resent(rpcerr.Error(err)) || retryable(err) || status.Code(err) == codes.Canceled || errors.Is(err, errStreamEnded)
}

// errStreamEnded is a stream that the server ended without answering
// everything sent on it.
var errStreamEnded = errors.New("tern: the server ended the append stream without answering")

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
	closed, last, fenced := w.closed, w.last, w.fenced
	w.mu.Unlock()
	switch {
	case closed || w.l.c.isClosed():
		return ErrClosed
	case fenced != nil:
		return fenced
	case w.shared:
		return fmt.Errorf("%w: shared producers send no time ticks; open a writer", ErrInvalid)
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

// Pending is an append in progress, from AppendAsync: queued on the writer,
// or failed before it was. Its outcome fields are written once, before
// done is closed.
type Pending struct {
	done chan struct{}
	off  Offset
	err  error

	// The writer's, under its mutex.
	seq    uint64
	batch  *[]byte // encoded; nil once answered
	bytes  int     // of the Batch message
	resent bool    // sent on a stream that broke: its batch is never pooled
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
	if p.batch != nil && !p.resent {
		grpcopts.ReleaseBatch(p.batch)
	}
	p.batch = nil
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
