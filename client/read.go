package client

import (
	"cmp"
	"context"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/ternpb"
)

// Reader reads a log in offset order and follows its tail. It returns only
// acknowledged entries. A Reader is not safe for concurrent use, but Close
// may be called while a Next waits.
//
// When its stream breaks for a reason that may pass (the server restarts,
// the log moves to another node of a cluster: see Options.RetryTimeout),
// Next and NextBatch open another where it left off, after the last entry
// they returned, and go on: no entry is returned twice and none is skipped.
// They try for as long as their ctx allows, and no longer than
// RetryTimeout; when that passes they return the error, and the next call
// tries again. Ticks (WithTicks) sent while the reader was away are lost.
// What ends a Reader: ErrNotFound when the log is deleted, a
// *TruncatedError when the reader fell below the log's start (because of
// truncation or retention, maybe while it was away; the error says where
// the log starts), ErrPermissionDenied, and Close.
type Reader struct {
	l      *Log
	o      ReadOptions
	life   context.Context // ends when the Reader is closed
	finish context.CancelFunc

	mu     sync.Mutex // guards the fields below against Close
	closed bool
	loop   *recvLoop          // nil while the Reader reconnects
	cancel context.CancelFunc // ends loop's stream

	next Offset // the caller of Next's: where a new stream starts, after the last entry returned or where the first stream opened
}

// OpenReader returns a Reader positioned at from, which must be between the
// log's Start and End (inclusive), or be FromStart or FromEnd, which the
// server resolves to an offset when it opens the reader. A from below Start
// fails with a *TruncatedError. It returns once the server has opened the
// reader, so that a bad from fails here; it retries as calls do until then
// (Options.RetryTimeout).
func (l *Log) OpenReader(ctx context.Context, from Offset, opts ...ReadOption) (*Reader, error) {
	if l.c.isClosed() {
		return nil, ErrClosed
	}
	r := &Reader{l: l, o: NewReadOptions(opts...), next: from}
	r.life, r.finish = context.WithCancel(context.Background())
	if err := r.open(ctx); err != nil {
		r.finish()
		return nil, err
	}
	if err := l.c.track(r); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// open opens a stream at r.next, following redirects and retrying, until
// ctx ends or the Reader is closed.
func (r *Reader) open(ctx context.Context) error {
	l := r.l
	// The stream outlives ctx, which bounds only the opening, but not the
	// Reader.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopOpening := context.AfterFunc(ctx, cancel)
	stopClosing := context.AfterFunc(r.life, cancel)
	defer stopClosing()
	var stream grpc.ServerStreamingClient[ternpb.ReadResponse]
	at := r.next
	err := l.call(sctx, func(sctx context.Context, api ternpb.TernClient) (err error) {
		req := &ternpb.ReadRequest{Log: l.name, From: uint64(r.next), Follow: true, Ticks: r.o.Ticks}
		switch r.next {
		case FromStart:
			req.From, req.FromStart = 0, true
		case FromEnd:
			req.From, req.FromEnd = 0, true
		}
		stream, err = api.Read(sctx, req)
		var md metadata.MD
		if err == nil {
			md, err = opened(stream)
		}
		if err == nil {
			at = resolved(md, r.next)
		}
		return err
	})
	if err != nil || !stopOpening() {
		cancel()
		if r.life.Err() != nil {
			return ErrClosed
		}
		return cmp.Or(ctx.Err(), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		cancel()
		return ErrClosed
	}
	r.next = at
	r.cancel = cancel
	r.loop = startRecv(stream.RecvMsg, r.o.MaxBatchBytes, func(err error) error { return streamErr(l.c, "read stream", err) })
	return nil
}

// resolved is the offset a stream asked to open at from opened at: from,
// or what the server says FromStart or FromEnd resolved to. A server that
// does not say leaves them as they are.
func resolved(md metadata.MD, from Offset) Offset {
	if from != FromStart && from != FromEnd {
		return from
	}
	if v := md.Get(grpcopts.FromHeader); len(v) == 1 {
		if off, err := strconv.ParseUint(v[0], 10, 64); err == nil {
			return Offset(off)
		}
	}
	return from
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
	for {
		r.mu.Lock()
		closed, loop := r.closed, r.loop
		r.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if loop != nil {
			es, err := loop.next(ctx, max)
			if err == nil {
				for _, e := range es {
					if !e.IsTick {
						r.next = e.Offset + 1
					}
				}
				return es, nil
			}
			if loop.cause == nil || !retryable(loop.cause) || loop.halted() || r.l.c.isClosed() {
				return nil, err
			}
			r.drop(loop)
			if r.o.reconnect != nil {
				r.o.reconnect(err)
			}
		}
		if err := r.open(ctx); err != nil {
			return nil, err
		}
		if r.o.reconnect != nil {
			r.o.reconnect(nil)
		}
	}
}

// drop lets go of a stream that broke.
func (r *Reader) drop(loop *recvLoop) {
	r.mu.Lock()
	if r.loop == loop {
		r.loop = nil
		r.cancel()
	}
	r.mu.Unlock()
	loop.halt()
}

// Close cancels the stream. A Next waiting meanwhile (Client.Close may run
// concurrently with one) returns ErrClosed.
func (r *Reader) Close() error {
	r.mu.Lock()
	r.closed = true
	loop, cancel := r.loop, r.cancel
	r.mu.Unlock()
	r.finish()
	if loop != nil {
		loop.halt()
		cancel()
		<-loop.done
	}
	r.l.c.untrack(r)
	return nil
}
