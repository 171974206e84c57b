package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/ternwal/tern/client/ternpb"
)

// A remote Reader or Subscriber reads one server stream (Read, or Subscribe).
// A goroutine receives the stream's responses into a channel of a few
// responses, which gRPC's flow control extends back to the server; Next and
// NextBatch take from that channel, so a ctx that ends only stops the
// caller's wait and the stream stays usable for the next call.

// recvAhead is how many responses a reader receives before they are asked for.
const recvAhead = 4

// recvItem is one response turned into entries, or the error that ended the
// stream.
type recvItem struct {
	es  []Entry
	err error
}

// recvLoop receives a stream's responses. Its buf and err belong to the
// caller of next, which is one goroutine at a time.
type recvLoop struct {
	items    chan recvItem
	stop     chan struct{} // closed by halt: next fails with ErrClosed, the loop drops what it receives
	stopOnce sync.Once
	done     chan struct{} // closed when the loop has exited

	buf      []Entry
	err      error // the error that ended the stream, once buf is drained
	maxBytes int   // of one next; 0 is no bound (WithMaxBatchBytes)
}

// startRecv runs recv until it fails; mapErr turns its error into the error
// next returns.
func startRecv(recv func() (*ternpb.ReadResponse, error), maxBytes int, mapErr func(error) error) *recvLoop {
	r := &recvLoop{items: make(chan recvItem, recvAhead), stop: make(chan struct{}), done: make(chan struct{}), maxBytes: maxBytes}
	go func() {
		defer close(r.done)
		for {
			resp, err := recv()
			var item recvItem
			if err != nil {
				item.err = mapErr(err)
			} else {
				item.es = entriesFromProto(resp)
			}
			select {
			case r.items <- item:
			case <-r.stop:
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// halt makes next fail with ErrClosed from now on, and the loop drop what it
// receives until the stream ends. It may be called more than once, from any
// goroutine.
func (r *recvLoop) halt() { r.stopOnce.Do(func() { close(r.stop) }) }

func (r *recvLoop) halted() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// next returns up to max entries, and up to maxBytes of them unless the
// first is larger, waiting for the first until ctx ends.
func (r *recvLoop) next(ctx context.Context, max int) ([]Entry, error) {
	if max <= 0 {
		return nil, fmt.Errorf("%w: NextBatch of no entries", ErrInvalid)
	}
	if r.halted() {
		return nil, ErrClosed
	}
	for len(r.buf) == 0 {
		if r.err != nil {
			return nil, r.err
		}
		select {
		case it := <-r.items:
			r.take(it)
			continue
		default:
		}
		select {
		case it := <-r.items:
			r.take(it)
		case <-r.stop:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
fill: // with what has arrived, without waiting
	for len(r.buf) < max && r.err == nil && r.bytesBefore(max) == 0 {
		select {
		case it := <-r.items:
			r.take(it)
		default:
			break fill
		}
	}
	n := min(max, len(r.buf))
	if k := r.bytesBefore(n); k > 0 {
		n = k
	}
	out := r.buf[:n:n]
	r.buf = r.buf[n:]
	return out, nil
}

// bytesBefore returns how many of the first n buffered entries, at least
// one, fit in maxBytes when the first n do not; 0 when they do.
func (r *recvLoop) bytesBefore(n int) int {
	if r.maxBytes <= 0 {
		return 0
	}
	size := 0
	for i, e := range r.buf[:min(n, len(r.buf))] {
		if size += EntryBytes(e); size > r.maxBytes {
			return max(i, 1)
		}
	}
	return 0
}

func (r *recvLoop) take(it recvItem) {
	if it.err != nil {
		r.err = it.err
		return
	}
	r.buf = append(r.buf, it.es...)
}

// entriesFromProto converts a response: its entries, then its tick.
func entriesFromProto(resp *ternpb.ReadResponse) []Entry {
	es := make([]Entry, 0, len(resp.GetEntries())+1)
	for _, e := range resp.GetEntries() {
		es = append(es, Entry{Offset: Offset(e.GetOffset()), Payload: e.GetPayload(), Properties: e.GetProperties(), Time: time.Unix(0, e.GetTimeUnixNano())})
	}
	if t := resp.GetTick(); t != nil {
		es = append(es, Entry{Offset: Offset(t.GetOffset()), IsTick: true, Tick: t.GetTime()})
	}
	return es
}

// streamErr maps the error that ended a stream that should go on until
// closed: a server that ends it gives ErrClosed.
func streamErr(c *Client, what string, err error) error {
	if err == io.EOF {
		return fmt.Errorf("%w: the server ended the %s", ErrClosed, what)
	}
	return c.err(err)
}

// Reader reads a log in offset order and follows its tail. It returns only
// acknowledged entries. A Reader is not safe for concurrent use, but Close
// may be called while a Next waits.
//
// A Reader that falls below the log's start (because of truncation or
// retention) fails with a *TruncatedError.
type Reader struct {
	c      *Client
	cancel context.CancelFunc
	loop   *recvLoop
}

// OpenReader returns a Reader positioned at from, which must be between the
// log's Start and End (inclusive), or be FromStart or FromEnd. A from below
// Start fails with a *TruncatedError. It returns once the server has opened
// the reader, so that a bad from fails here.
func (l *Log) OpenReader(ctx context.Context, from Offset, opts ...ReadOption) (*Reader, error) {
	o := NewReadOptions(opts...)
	if l.c.isClosed() {
		return nil, ErrClosed
	}
	// The stream outlives ctx, which bounds only the opening.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopOpening := context.AfterFunc(ctx, cancel)
	var stream grpc.ServerStreamingClient[ternpb.ReadResponse]
	err := l.call(sctx, func(sctx context.Context, api ternpb.TernClient) (err error) {
		req := &ternpb.ReadRequest{Log: l.name, From: uint64(from), Follow: true, Ticks: o.Ticks}
		switch from {
		case FromStart:
			req.From, req.FromStart = 0, true
		case FromEnd:
			req.From, req.FromEnd = 0, true
		}
		stream, err = api.Read(sctx, req)
		if err == nil {
			err = opened(stream)
		}
		return err
	})
	if err != nil || !stopOpening() {
		cancel()
		return nil, cmp.Or(ctx.Err(), err)
	}
	r := &Reader{c: l.c, cancel: cancel}
	r.loop = startRecv(stream.Recv, o.MaxBatchBytes, func(err error) error { return streamErr(l.c, "read stream", err) })
	if err := l.c.track(r); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Next returns the next entry, waiting at the tail until one is appended or
// ctx ends.
func (r *Reader) Next(ctx context.Context) (Entry, error) {
	es, err := r.NextBatch(ctx, 1)
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

// NextBatch returns up to max entries, at least one: it waits at the tail
// for the first until ctx ends, but returns what is there without waiting
// for more. It is the fast way to catch up.
func (r *Reader) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	return r.loop.next(ctx, max)
}

// Close cancels the stream. A Next waiting meanwhile (Client.Close may run
// concurrently with one) returns ErrClosed.
func (r *Reader) Close() error {
	r.loop.halt()
	r.cancel()
	<-r.loop.done
	r.c.untrack(r)
	return nil
}

// Subscriber receives a subscription's entries from its cursor, in offset
// order, and acknowledges them. Delivery is at least once: entries delivered
// but not acknowledged, or acknowledged but not yet committed when the
// server stopped, are delivered again to the next Subscriber. A
// subscription has one Subscriber at a time; a new one takes over and the
// older one's calls fail with ErrClosed. A Subscriber is not safe for
// concurrent use, except Ack, which may be called from any goroutine.
type Subscriber struct {
	c      *Client
	name   string
	stream grpc.BidiStreamingClient[ternpb.SubscribeRequest, ternpb.ReadResponse]
	cancel context.CancelFunc
	loop   *recvLoop

	mu        sync.Mutex // serializes sends; guards the fields below
	delivered uint64     // the offset after the last entry returned
	acked     uint64     // the offset after the last acknowledgement sent
	closed    bool
}

// Subscribe starts receiving the subscription's entries from its cursor.
// A cursor below the log's start (because of truncation or retention) fails
// with a *TruncatedError: Seek the subscription to go on.
//
// It describes the subscription first, so that Ack knows which offsets were
// delivered, and returns once the server has opened the subscriber, so that
// a missing subscription or a cursor below the log's start fails here.
func (l *Log) Subscribe(ctx context.Context, name string, opts ...ReadOption) (*Subscriber, error) {
	if err := ValidateSubName(name); err != nil {
		return nil, err
	}
	o := NewReadOptions(opts...)
	if l.c.isClosed() {
		return nil, ErrClosed
	}
	sub, err := l.subscription(ctx, name)
	if err != nil {
		return nil, err
	}
	// The stream outlives ctx, which bounds only the opening.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopOpening := context.AfterFunc(ctx, cancel)
	api, err := l.api() // where the description came from
	var stream grpc.BidiStreamingClient[ternpb.SubscribeRequest, ternpb.ReadResponse]
	if err == nil {
		stream, err = api.Subscribe(sctx)
	}
	if err == nil {
		err = stream.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Start_{
			Start: &ternpb.SubscribeRequest_Start{Log: l.name, Name: name, Ticks: o.Ticks},
		}})
	}
	if err == nil {
		err = opened(stream)
	}
	if err != nil || !stopOpening() {
		cancel()
		return nil, cmp.Or(ctx.Err(), l.c.err(err))
	}
	s := &Subscriber{c: l.c, name: name, stream: stream, cancel: cancel, delivered: sub.GetCursor(), acked: sub.GetCursor()}
	s.loop = startRecv(stream.Recv, o.MaxBatchBytes, func(err error) error { return streamErr(l.c, "subscription stream", err) })
	if err := l.c.track(s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Next returns the next entry (or tick), waiting at the tail until ctx ends.
func (s *Subscriber) Next(ctx context.Context) (Entry, error) {
	es, err := s.NextBatch(ctx, 1)
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

// NextBatch returns up to max entries (and ticks), at least one, waiting at
// the tail for the first until ctx ends.
func (s *Subscriber) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	es, err := s.loop.next(ctx, max)
	if err == ErrClosed {
		return nil, fmt.Errorf("%w: subscriber of %q", ErrClosed, s.name)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range es {
		if e.IsTick {
			continue
		}
		s.delivered = uint64(e.Offset) + 1
		// Delivery went back (a Seek): acknowledge the entries again.
		s.acked = min(s.acked, uint64(e.Offset))
	}
	return es, nil
}

// Ack acknowledges every entry up to and including off: the subscription
// will not deliver them again once the acknowledgement is committed.
// Acknowledging an entry not yet delivered fails with ErrOutOfRange; an
// acknowledgement below an earlier one changes nothing. It sends the
// acknowledgement at once; the server commits it to the cursor in batches,
// and when the stream ends.
func (s *Subscriber) Ack(off Offset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("%w: subscriber of %q", ErrClosed, s.name)
	case uint64(off) >= s.delivered:
		return fmt.Errorf("%w: cannot acknowledge offset %d of subscription %q, which has not been delivered (next: %d)", ErrOutOfRange, off, s.name, s.delivered)
	case uint64(off) < s.acked:
		return nil // already acknowledged
	}
	err := s.stream.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Ack_{Ack: &ternpb.SubscribeRequest_Ack{Offset: uint64(off)}}})
	if err == io.EOF {
		return fmt.Errorf("%w: the subscription stream of %q has ended; Next says why", ErrClosed, s.name)
	}
	if err != nil {
		return s.c.err(err)
	}
	s.acked = uint64(off) + 1
	return nil
}

// Close half-closes the stream and waits, a few seconds at most, for the
// server to end it: the server commits the acknowledged cursor first. It
// must not run concurrently with Next or NextBatch.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cerr := s.stream.CloseSend()
	s.mu.Unlock()
	s.loop.halt()
	var err error
	if cerr == nil {
		t := time.NewTimer(streamEndTimeout)
		select {
		case <-s.loop.done:
		case <-t.C:
			err = fmt.Errorf("tern: subscriber of %q: the server did not end the stream within %v; the last acknowledgements may not be committed", s.name, streamEndTimeout)
		}
		t.Stop()
	}
	s.cancel()
	<-s.loop.done
	s.c.untrack(s)
	return err
}

// opened waits for the response headers, which the server sends once the
// reader or subscriber is open: from then on it receives every tick, and a
// subscriber has taken the subscription over. A stream that ended instead
// returns its error.
func opened(stream interface {
	Header() (metadata.MD, error)
	RecvMsg(any) error
}) error {
	md, err := stream.Header()
	if err != nil {
		return err
	}
	if md == nil { // ended without headers: the status says why
		if err := stream.RecvMsg(new(ternpb.ReadResponse)); err != nil {
			return err
		}
		return errors.New("tern: the server sent an entry before opening the stream")
	}
	return nil
}
