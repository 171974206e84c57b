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

	"github.com/ternwal/tern/client/ternpb"
)

// Subscriber receives a subscription's entries from its cursor, in offset
// order, and acknowledges them. Delivery is at least once: entries delivered
// but not acknowledged, or acknowledged but not yet committed when the
// server stopped, are delivered again to the next Subscriber. A
// subscription has one Subscriber at a time; a new one takes over and the
// older one's calls fail with ErrClosed (and ErrTakenOver). A Subscriber is
// not safe for concurrent use, except Ack, which may be called from any
// goroutine.
//
// When its stream breaks for a reason that may pass (the server restarts,
// the log moves to another node of a cluster: see Options.RetryTimeout),
// Next and NextBatch open another, which starts from the subscription's
// committed cursor: the entries after it are delivered again, though this
// Subscriber returned them before (at least once). The acknowledgements the
// server received before the break are kept (a server that was killed may
// have lost those of its last commit interval); an Ack that finds no
// stream, or acknowledges an entry the new stream has not delivered again,
// is dropped, and the entry comes again. They try for as long as their ctx
// allows, and no longer than RetryTimeout; when that passes they return the
// error, and the next call tries again. Ticks sent while the subscriber
// was away are lost.
type Subscriber struct {
	l      *Log
	name   string
	o      ReadOptions
	life   context.Context // ends when the Subscriber is closed
	finish context.CancelFunc

	mu        sync.Mutex // serializes sends; guards the fields below
	closed    bool
	stream    grpc.BidiStreamingClient[ternpb.SubscribeRequest, ternpb.ReadResponse] // nil while reconnecting
	cancel    context.CancelFunc                                                     // ends stream
	loop      *recvLoop
	delivered uint64 // the offset after the last entry the stream delivered
	before    uint64 // the offset after the last entry earlier streams delivered
	acked     uint64 // the offset after the last acknowledgement sent
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
	if l.c.isClosed() {
		return nil, ErrClosed
	}
	sub, err := l.subscription(ctx, name)
	if err != nil {
		return nil, err
	}
	s := &Subscriber{l: l, name: name, o: NewReadOptions(opts...), delivered: sub.GetCursor(), acked: sub.GetCursor()}
	s.life, s.finish = context.WithCancel(context.Background())
	if err := s.open(ctx); err != nil {
		s.finish()
		return nil, err
	}
	if err := l.c.track(s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// open opens a stream, following redirects and retrying, until ctx ends or
// the Subscriber is closed.
func (s *Subscriber) open(ctx context.Context) error {
	l := s.l
	// The stream outlives ctx, which bounds only the opening, but not the
	// Subscriber.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopOpening := context.AfterFunc(ctx, cancel)
	stopClosing := context.AfterFunc(s.life, cancel)
	defer stopClosing()
	var stream grpc.BidiStreamingClient[ternpb.SubscribeRequest, ternpb.ReadResponse]
	err := l.call(sctx, func(sctx context.Context, api ternpb.TernClient) (err error) {
		stream, err = api.Subscribe(sctx)
		if err == nil {
			err = stream.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Start_{
				Start: &ternpb.SubscribeRequest_Start{Log: l.name, Name: s.name, Ticks: s.o.Ticks},
			}})
			if err == io.EOF { // the stream ended: its status says why
				_, err = opened(stream)
			}
		}
		if err == nil {
			_, err = opened(stream)
		}
		return err
	})
	if err != nil || !stopOpening() {
		cancel()
		if s.life.Err() != nil {
			return fmt.Errorf("%w: subscriber of %q", ErrClosed, s.name)
		}
		return cmp.Or(ctx.Err(), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cancel()
		return fmt.Errorf("%w: subscriber of %q", ErrClosed, s.name)
	}
	s.stream, s.cancel = stream, cancel
	s.loop = startRecv(stream.RecvMsg, s.o.MaxBatchBytes, func(err error) error { return streamErr(l.c, "subscription stream", err) })
	return nil
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
	for {
		s.mu.Lock()
		closed, loop := s.closed, s.loop
		s.mu.Unlock()
		if closed {
			return nil, fmt.Errorf("%w: subscriber of %q", ErrClosed, s.name)
		}
		if loop != nil {
			es, err := loop.next(ctx, max)
			if err == ErrClosed {
				return nil, fmt.Errorf("%w: subscriber of %q", ErrClosed, s.name)
			}
			if err == nil {
				s.took(es)
				return es, nil
			}
			if loop.cause == nil || !retryable(loop.cause) || loop.halted() || s.l.c.isClosed() {
				return nil, err
			}
			s.drop(loop)
			if s.o.reconnect != nil {
				s.o.reconnect(err)
			}
		}
		if err := s.open(ctx); err != nil {
			return nil, err
		}
		if s.o.reconnect != nil {
			s.o.reconnect(nil)
		}
	}
}

// took records the entries NextBatch returns as delivered.
func (s *Subscriber) took(es []Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range es {
		if e.IsTick {
			continue
		}
		s.delivered = uint64(e.Offset) + 1
		// Delivery went back (a Seek, or a new stream from the committed
		// cursor): acknowledge the entries again.
		s.acked = min(s.acked, uint64(e.Offset))
	}
}

// drop lets go of a stream that broke. What it delivered stays acknowledgeable
// (Ack drops those acknowledgements until the next stream delivers the
// entries again).
func (s *Subscriber) drop(loop *recvLoop) {
	s.mu.Lock()
	if s.loop == loop {
		s.before = max(s.before, s.delivered)
		s.delivered = 0
		s.stream, s.loop = nil, nil
		s.cancel()
	}
	s.mu.Unlock()
	loop.halt()
}

// Ack acknowledges every entry up to and including off: the subscription
// will not deliver them again once the acknowledgement is committed.
// Acknowledging an entry not yet delivered fails with ErrOutOfRange; an
// acknowledgement below an earlier one changes nothing. It sends the
// acknowledgement at once; the server commits it to the cursor in batches,
// and when the stream ends. While the Subscriber reconnects, and until the
// new stream has delivered off again, an acknowledgement is dropped: the
// entries come again.
func (s *Subscriber) Ack(off Offset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("%w: subscriber of %q", ErrClosed, s.name)
	case uint64(off) >= max(s.delivered, s.before):
		return fmt.Errorf("%w: cannot acknowledge offset %d of subscription %q, which has not been delivered (next: %d)", ErrOutOfRange, off, s.name, max(s.delivered, s.before))
	case uint64(off) < s.acked:
		return nil // already acknowledged
	case s.stream == nil || uint64(off) >= s.delivered:
		return nil // delivered by a stream that broke: it comes again
	}
	err := s.stream.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Ack_{Ack: &ternpb.SubscribeRequest_Ack{Offset: uint64(off)}}})
	if err == io.EOF {
		// The stream has ended: Next reconnects, and the entries come
		// again, or says why it cannot.
		return nil
	}
	if err != nil {
		return s.l.c.err(err)
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
	stream, loop, cancel := s.stream, s.loop, s.cancel
	cerr := io.EOF
	if stream != nil {
		cerr = stream.CloseSend()
	}
	s.mu.Unlock()
	s.finish()
	if loop == nil {
		s.l.c.untrack(s)
		return nil
	}
	loop.halt()
	var err error
	if cerr == nil {
		t := time.NewTimer(streamEndTimeout)
		select {
		case <-loop.done:
		case <-t.C:
			err = fmt.Errorf("tern: subscriber of %q: the server did not end the stream within %v; the last acknowledgements may not be committed", s.name, streamEndTimeout)
		}
		t.Stop()
	}
	cancel()
	<-loop.done
	s.l.c.untrack(s)
	return err
}

// CreateSubscription creates a durable subscription on the log.
func (l *Log) CreateSubscription(ctx context.Context, name string, opts SubOptions) (SubInfo, error) {
	if err := ValidateSubName(name); err != nil {
		return SubInfo{}, err
	}
	if l.c.isClosed() {
		return SubInfo{}, ErrClosed
	}
	// Not idempotent: a retry after an unknown outcome may find the
	// subscription that the earlier try created. It is taken for that one
	// if it pins as asked (where it started cannot be told once it moved).
	var info *ternpb.SubscriptionInfo
	retried, err := l.callRetried(ctx, func(ctx context.Context, api ternpb.TernClient) (err error) {
		info, err = api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{
			Log: l.name, Name: name, From: uint64(opts.From), FromEnd: opts.FromEnd, Pin: opts.Pin,
		})
		return err
	})
	if retried && errors.Is(err, ErrSubExist) {
		if got, derr := l.subscription(ctx, name); derr == nil && got.GetPin() == opts.Pin {
			info, err = got, nil
		}
	}
	if err != nil {
		return SubInfo{}, err
	}
	return subInfoFromProto(info), nil
}

// Subscription describes one of the log's subscriptions.
func (l *Log) Subscription(ctx context.Context, name string) (SubInfo, error) {
	if err := ValidateSubName(name); err != nil {
		return SubInfo{}, err
	}
	if l.c.isClosed() {
		return SubInfo{}, ErrClosed
	}
	info, err := l.subscription(ctx, name)
	if err != nil {
		return SubInfo{}, err
	}
	return subInfoFromProto(info), nil
}

// Subscriptions describes the log's subscriptions, by name.
func (l *Log) Subscriptions(ctx context.Context) ([]SubInfo, error) {
	if l.c.isClosed() {
		return nil, ErrClosed
	}
	var resp *ternpb.ListSubscriptionsResponse
	err := l.call(ctx, func(ctx context.Context, api ternpb.TernClient) (err error) {
		resp, err = api.ListSubscriptions(ctx, &ternpb.ListSubscriptionsRequest{Log: l.name})
		return err
	})
	if err != nil {
		return nil, err
	}
	infos := make([]SubInfo, 0, len(resp.GetSubscriptions()))
	for _, s := range resp.GetSubscriptions() {
		infos = append(infos, subInfoFromProto(s))
	}
	return infos, nil
}

// DeleteSubscription deletes a subscription. Its subscriber, if any, fails
// with ErrClosed.
func (l *Log) DeleteSubscription(ctx context.Context, name string) error {
	if err := ValidateSubName(name); err != nil {
		return err
	}
	if l.c.isClosed() {
		return ErrClosed
	}
	retried, err := l.callRetried(ctx, func(ctx context.Context, api ternpb.TernClient) error {
		_, err := api.DeleteSubscription(ctx, &ternpb.DeleteSubscriptionRequest{Log: l.name, Name: name})
		return err
	})
	if retried && errors.Is(err, ErrSubNotFound) {
		return nil // deleted by the try whose outcome was unknown
	}
	return err
}

// Seek moves a subscription's cursor to to, which must lie between the log's
// Start and End, forwards or backwards. Its subscriber, if any, goes on from
// there.
func (l *Log) Seek(ctx context.Context, name string, to Offset) error {
	if err := ValidateSubName(name); err != nil {
		return err
	}
	if l.c.isClosed() {
		return ErrClosed
	}
	return l.call(ctx, func(ctx context.Context, api ternpb.TernClient) error {
		_, err := api.Seek(ctx, &ternpb.SeekRequest{Log: l.name, Name: name, To: uint64(to)})
		return err
	})
}

// subscription describes a subscription.
func (l *Log) subscription(ctx context.Context, name string) (*ternpb.SubscriptionInfo, error) {
	var info *ternpb.SubscriptionInfo
	err := l.call(ctx, func(ctx context.Context, api ternpb.TernClient) (err error) {
		info, err = api.DescribeSubscription(ctx, &ternpb.DescribeSubscriptionRequest{Log: l.name, Name: name})
		return err
	})
	return info, err
}

func subInfoFromProto(p *ternpb.SubscriptionInfo) SubInfo {
	return SubInfo{
		Log: p.GetLog(), Name: p.GetName(), Created: unixNano(p.GetCreatedUnixNano()),
		Cursor: Offset(p.GetCursor()), Pin: p.GetPin(), Lag: p.GetLag(),
	}
}
