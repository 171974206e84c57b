package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/grpc/metadata"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/ternpb"
)

const (
	defaultReadBatch = 1024
	maxReadBatch     = 1 << 16
	// maxResponseBytes is about the most entry bytes in one ReadResponse; an
	// entry larger than that goes alone.
	maxResponseBytes = 1 << 20
	// entryOverhead bounds the protobuf framing of one entry beyond its
	// payload and properties' bytes.
	entryOverhead = 64
)

// Read streams entries from an offset, following the tail if asked.
func (s *Server) Read(req *ternpb.ReadRequest, stream ternpb.Tern_ReadServer) error {
	if req.GetTicks() && !req.GetFollow() {
		return wire(errInvalid("ticks are delivered only to a reader that follows the tail: set follow"))
	}
	max, err := readBatch(req.GetMaxBatch())
	if err != nil {
		return wire(err)
	}
	ctx, end, err := s.stream(stream.Context(), "read")
	if err != nil {
		return wire(err)
	}
	defer end()

	l, err := s.open(ctx, req.GetLog())
	if err != nil {
		return wire(err)
	}
	// A batch the size of a response: a stream holds one batch while it
	// sends it, whatever max_batch asks.
	opts := []tern.ReadOption{tern.WithMaxBatchBytes(maxResponseBytes)}
	if req.GetTicks() {
		opts = append(opts, tern.WithTicks())
	}
	r, from, err := openReader(ctx, l, req, opts)
	if err != nil {
		return wire(err)
	}
	defer r.Close()
	// The reader is open: ticks reach it from now on. The header says where,
	// for a client that reconnects before it got an entry.
	if err := stream.SendHeader(metadata.Pairs(grpcopts.FromHeader, strconv.FormatUint(uint64(from), 10))); err != nil {
		return wire(s.streamErr("read", err))
	}
	info, err := l.Info(ctx)
	if err != nil {
		return wire(err)
	}

	next := from
	lag := s.metrics.lags.track(l, false)
	defer s.metrics.lags.untrack(lag)
	lag.at(next, false)
	for req.GetFollow() || next < info.End {
		n := max
		if !req.GetFollow() {
			n = int(min(uint64(max), uint64(info.End-next)))
		}
		es, err := r.NextBatch(ctx, n)
		if err != nil {
			return wire(s.streamErr("read", err))
		}
		if err := s.send(stream, es); err != nil {
			return wire(s.streamErr("read", err))
		}
		for _, e := range es {
			if !e.IsTick {
				next = e.Offset + 1
			}
		}
		lag.at(next, false)
	}
	return nil
}

// openReader opens a reader of l where req says: at from, or at the log's
// start or end as they are now, and returns the offset it opened at.
func openReader(ctx context.Context, l *tern.Log, req *ternpb.ReadRequest, opts []tern.ReadOption) (*tern.Reader, tern.Offset, error) {
	switch {
	case req.GetFromStart() && req.GetFromEnd():
		return nil, 0, errInvalid("from_start and from_end are both set: start at one of them")
	case !req.GetFromStart() && !req.GetFromEnd():
		r, err := l.OpenReader(ctx, tern.Offset(req.GetFrom()), opts...)
		return r, tern.Offset(req.GetFrom()), err
	}
	for attempt := 1; ; attempt++ {
		info, err := l.Info(ctx)
		if err != nil {
			return nil, 0, err
		}
		at := info.Start
		if req.GetFromEnd() {
			at = info.End
		}
		r, err := l.OpenReader(ctx, at, opts...)
		if req.GetFromStart() && errors.Is(err, tern.ErrTruncated) && attempt < maxStartAttempts {
			continue // truncated since Info: the start moved on
		}
		return r, at, err
	}
}

// maxStartAttempts bounds the tries to open a reader at the start of a log
// that is truncated as fast as the reader opens.
const maxStartAttempts = 10

func readBatch(n uint32) (int, error) {
	switch {
	case n == 0:
		return defaultReadBatch, nil
	case n > maxReadBatch:
		return 0, errInvalid("max_batch %d is over the limit of %d entries", n, maxReadBatch)
	}
	return int(n), nil
}

// sender is a stream of ReadResponses.
type sender interface {
	Send(*ternpb.ReadResponse) error
	SendMsg(any) error
}

// send sends es in order: entries packed into responses of about
// maxResponseBytes, encoded straight from es (grpcopts.EncodedRead), and
// each tick alone. The responses' entries are one allocation for all of
// es, not one each.
func (s *Server) send(stream sender, es []tern.Entry) error {
	var slab []grpcopts.ReadEntry // a response's entries, then the next one's
	from, size := 0, 0
	flush := func() error {
		if len(slab) == from {
			return nil
		}
		if err := stream.SendMsg(&grpcopts.EncodedRead{Entries: slab[from:]}); err != nil {
			return err
		}
		s.metrics.readEntries.Add(float64(len(slab) - from))
		from, size = len(slab), 0
		return nil
	}
	for _, e := range es {
		if e.IsTick {
			if err := flush(); err != nil {
				return err
			}
			if err := stream.Send(&ternpb.ReadResponse{Tick: &ternpb.TimeTick{Time: e.Tick, Offset: uint64(e.Offset)}}); err != nil {
				return err
			}
			continue
		}
		n := entryOverhead + len(e.Payload)
		for k, v := range e.Properties {
			n += entryOverhead + len(k) + len(v)
		}
		if n > grpcopts.MaxMessageBytes {
			return fmt.Errorf("%w: entry %d has %d bytes, over the %d bytes a message can carry", tern.ErrTooLarge, e.Offset, n, grpcopts.MaxMessageBytes)
		}
		if size+n > maxResponseBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		if slab == nil {
			slab = make([]grpcopts.ReadEntry, 0, len(es))
		}
		slab = append(slab, grpcopts.ReadEntry{Offset: uint64(e.Offset), Entry: grpcopts.Entry{
			Payload: e.Payload, Properties: e.Properties, UnixNano: e.Time.UnixNano(),
		}})
		size += n
	}
	return flush()
}

// errClientDone is how the acknowledgements of a Subscribe stream end when
// the client closes its side.
var errClientDone = errors.New("server: the client closed the stream")

// Subscribe streams a subscription's entries and takes the client's
// acknowledgements. A goroutine receives the acknowledgements and hands
// them to the Subscriber; this one sends.
func (s *Server) Subscribe(stream ternpb.Tern_SubscribeServer) error {
	ctx, end, err := s.stream(stream.Context(), "subscribe")
	if err != nil {
		return wire(err)
	}
	defer end()

	// Receive in a goroutine: Recv does not end with ctx, and Close must
	// not wait for a client that sends nothing.
	type recv struct {
		req *ternpb.SubscribeRequest
		err error
	}
	first := make(chan recv, 1)
	go func() {
		req, err := stream.Recv()
		first <- recv{req, err}
	}()
	var start *ternpb.SubscribeRequest_Start
	select {
	case r := <-first:
		if r.err == io.EOF {
			return nil // nothing asked
		}
		if r.err != nil {
			return wire(s.streamErr("subscribe", r.err))
		}
		if start = r.req.GetStart(); start == nil {
			return wire(errInvalid("the first message of a Subscribe stream must be Start"))
		}
	case <-ctx.Done():
		return wire(s.streamErr("subscribe", ctx.Err()))
	}

	l, err := s.open(ctx, start.GetLog())
	if err != nil {
		return wire(err)
	}
	opts := []tern.ReadOption{tern.WithMaxBatchBytes(maxResponseBytes)}
	if start.GetTicks() {
		opts = append(opts, tern.WithTicks())
	}
	sub, err := l.Subscribe(ctx, start.GetName(), opts...)
	if err != nil {
		return wire(err)
	}
	if err := stream.SendHeader(nil); err != nil { // the subscriber is open and has taken over
		sub.Close()
		return wire(s.streamErr("subscribe", err))
	}

	lag := s.metrics.lags.track(l, true)
	defer s.metrics.lags.untrack(lag)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	acksDone := make(chan struct{})
	go func() {
		defer close(acksDone)
		cancel(s.acks(stream, sub, lag)) // always an error: the end of the acks
	}()

	for err == nil {
		var es []tern.Entry
		if es, err = sub.NextBatch(ctx, defaultReadBatch); err == nil {
			cursorAt(lag, es)
			err = s.send(stream, es)
		}
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	// Close must not run while the acks goroutine may call Ack, but that
	// goroutine may be blocked in Recv, which returns only once this
	// handler has: wait for it only if it has ended or is ending.
	select {
	case <-acksDone:
	case <-stream.Context().Done():
		<-acksDone
	default:
	}
	if cerr := sub.Close(); err == errClientDone {
		err = cerr
	}
	return wire(s.streamErr("subscribe", err))
}

// cursorAt gives lag, before the subscription's first delivery, the
// cursor it delivers from: its first entry's offset.
func cursorAt(lag *lagPos, es []tern.Entry) {
	for _, e := range es {
		if !e.IsTick {
			lag.at(e.Offset, true)
			return
		}
	}
}

// acks hands the stream's acknowledgements to sub until the stream ends,
// and returns why: errClientDone when the client closed its side. lag
// follows the cursor they move.
func (s *Server) acks(stream ternpb.Tern_SubscribeServer, sub *tern.Subscriber, lag *lagPos) error {
	for {
		req, err := stream.Recv()
		switch {
		case err == io.EOF:
			return errClientDone
		case err != nil:
			return err
		case req.GetAck() != nil:
			if err := sub.Ack(tern.Offset(req.GetAck().GetOffset())); err != nil {
				return err
			}
			lag.at(tern.Offset(req.GetAck().GetOffset())+1, false)
		case req.GetStart() != nil:
			return errInvalid("a Subscribe stream has one Start: the later messages must be Acks")
		default:
			return errInvalid("a Subscribe message must be Start or Ack")
		}
	}
}
