package server

import (
	"context"
	"io"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// maxInFlight bounds the requests of one AppendStream queued or waiting for
// their acknowledgement. Beyond it the stream stops receiving.
const maxInFlight = 1024

// appendOptions are the options of a batch of producer, from a request.
func (s *Server) appendOptions(producer, acked uint64, h grpcopts.BatchHeader) []tern.AppendOption {
	var opts []tern.AppendOption
	if producer != 0 && h.Seq != 0 && !s.noDedup {
		opts = append(opts, tern.AsProducer(producer, h.Seq, acked))
	}
	if h.IfEnd {
		opts = append(opts, tern.IfEnd(tern.Offset(h.End)))
	}
	return opts
}

// batch validates an append request and returns its writer and entries,
// and the entries' bytes.
func (s *Server) batch(ctx context.Context, req *ternpb.AppendRequest) (*writer, []tern.Entry, int, error) {
	w, err := s.writer(ctx, req.GetLog(), req.GetEpoch(), req.GetShared())
	if err != nil {
		return nil, nil, 0, err
	}
	es, n, err := entries(req.GetLog(), req.GetEntries())
	return w, es, n, err
}

// entries converts a batch's entries and counts their bytes.
func entries(log string, pes []*ternpb.Entry) ([]tern.Entry, int, error) {
	if len(pes) == 0 {
		return nil, 0, errInvalid("append to log %q has no entries", log)
	}
	es := make([]tern.Entry, len(pes))
	for i, e := range pes {
		es[i] = tern.Entry{Payload: e.GetPayload(), Properties: e.GetProperties()}
		if t := e.GetTimeUnixNano(); t != 0 {
			es[i].Time = time.Unix(0, t)
		}
	}
	return es, entryBytes(es), nil
}

func (s *Server) appended(start time.Time, entries, bytes int) {
	s.metrics.appendLatency.Observe(time.Since(start).Seconds())
	s.metrics.appendEntries.Add(float64(entries))
	s.metrics.appendBytes.Add(float64(bytes))
}

// Append appends a batch atomically and answers once it is durable.
func (s *Server) Append(ctx context.Context, req *ternpb.AppendRequest) (*ternpb.AppendResponse, error) {
	start := time.Now()
	w, es, n, err := s.batch(ctx, req)
	if err != nil {
		return nil, wire(err)
	}
	// gRPC holds the request already; the budget makes it wait, not pile
	// up in the library's queue, while other appends fill memory.
	if err := s.appends.acquire(ctx, int64(n)); err != nil {
		return nil, wire(err)
	}
	h := grpcopts.BatchHeader{Seq: req.GetSeq(), IfEnd: req.IfEnd != nil, End: req.GetIfEnd()}
	p := w.AppendBatchAsync(es, s.appendOptions(req.GetProducer(), 0, h)...)
	defer s.releaseWhenDone(p, int64(n))
	off, err := p.Wait(ctx)
	if err != nil {
		return nil, wire(s.fail(w, err))
	}
	s.appended(start, len(es), n)
	return &ternpb.AppendResponse{Offset: uint64(off)}, nil
}

// AppendTimeTick sends a time tick to the log's tail readers.
func (s *Server) AppendTimeTick(ctx context.Context, req *ternpb.AppendTimeTickRequest) (*ternpb.AppendTimeTickResponse, error) {
	w, err := s.writer(ctx, req.GetLog(), req.GetEpoch(), false)
	if err != nil {
		return nil, wire(err)
	}
	if err := w.AppendTimeTick(ctx, req.GetTime()); err != nil {
		return nil, wire(s.fail(w, err))
	}
	return &ternpb.AppendTimeTickResponse{}, nil
}

// releaseWhenDone gives n bytes back to the append budget once p's
// outcome is known: until then the library holds the entries.
func (s *Server) releaseWhenDone(p *tern.Pending, n int64) {
	select {
	case <-p.Done():
		s.appends.release(n)
	default:
		go func() {
			<-p.Done()
			s.appends.release(n)
		}()
	}
}

// inFlight is one batch of an AppendStream request, queued to the library.
type inFlight struct {
	start   time.Time
	w       *writer
	p       *tern.Pending // nil when the outcome is known: err
	err     error
	entries int
	bytes   int
	// reqBytes, on the last batch of a request, is the request's bytes:
	// unanswered until that batch's result is sent.
	reqBytes int64
}

// failed is one failed inFlight per batch of req.
func failed(req *grpcopts.DecodedAppend, err error) []*inFlight {
	fs := make([]*inFlight, max(len(req.Ends), 1))
	for i := range fs {
		fs[i] = &inFlight{err: err}
	}
	return fs
}

// requestBytes counts the payload and property bytes of req's entries.
func requestBytes(req *grpcopts.DecodedAppend) int64 {
	var n int64
	for _, e := range req.Entries {
		n += int64(len(e.Payload))
		for k, v := range e.Properties {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// queue hands the request's batches to the library without waiting. A
// batch that fails validation fails alone.
//
// Once a batch of the stream fails at once with an error that the client
// answers by sending it again (the server or the log unavailable), *stuck
// keeps that error, and every later batch of the stream fails with it
// unapplied: the client sends them all again, in order, behind the one
// that failed, rather than see them applied ahead of it.
func (s *Server) queue(ctx context.Context, req *grpcopts.DecodedAppend, stuck *error) []*inFlight {
	start := time.Now()
	if len(req.Ends) == 0 {
		return failed(req, errInvalid("append to log %q has no batches", req.Log))
	}
	if *stuck != nil {
		return failed(req, *stuck)
	}
	fs := make([]*inFlight, len(req.Ends))
	w, werr := s.writer(ctx, req.Log, req.Epoch, req.Shared)
	if werr != nil && rpcerr.Resent(werr) {
		*stuck = werr
	}
	all := make([]tern.Entry, len(req.Entries))
	n := 0
	for i, e := range req.Entries {
		all[i] = tern.Entry{Payload: e.Payload, Properties: e.Properties}
		if e.UnixNano != 0 {
			all[i].Time = time.Unix(0, e.UnixNano)
		}
	}
	for i, end := range req.Ends {
		f := &inFlight{start: start, err: werr}
		fs[i] = f
		es := all[n:end]
		n = end
		if werr != nil {
			continue
		}
		if len(es) == 0 {
			f.err = errInvalid("append to log %q has no entries", req.Log)
			continue
		}
		if *stuck != nil {
			f.err = *stuck
			continue
		}
		f.w, f.entries, f.bytes = w, len(es), entryBytes(es)
		f.p = w.AppendBatchAsync(es, s.appendOptions(req.Producer, req.Acked, req.Headers[i])...)
		if f.ready() {
			if _, err := f.p.Wait(ctx); err != nil {
				f.p, f.err = nil, s.fail(w, err)
				if rpcerr.Resent(f.err) {
					*stuck = f.err
				}
			}
		}
	}
	return fs
}

// entryBytes counts the payload and property bytes of es.
func entryBytes(es []tern.Entry) int {
	n := 0
	for _, e := range es {
		n += len(e.Payload)
		for k, v := range e.Properties {
			n += len(k) + len(v)
		}
	}
	return n
}

// ready reports whether the batch's outcome is known, so that wait would
// not block.
func (f *inFlight) ready() bool {
	if f.p == nil {
		return true
	}
	select {
	case <-f.p.Done():
		return true
	default:
		return false
	}
}

// wait returns the batch's outcome once it is known.
func (s *Server) wait(ctx context.Context, f *inFlight) (tern.Offset, error) {
	if f.p != nil {
		off, err := f.p.Wait(ctx)
		if err != nil {
			err = s.fail(f.w, err)
		}
		return off, err
	}
	return 0, f.err
}

// maxResults bounds the results of one AppendStream response.
const maxResults = 4096

// AppendStream pipelines appends: a goroutine receives the requests and
// queues them to the library in order; this one waits for the outcomes in
// the same order and answers them. It answers whatever is known before it
// blocks, so a request whose batches went into two commit rounds has the
// first round's answered as soon as that round is durable, not once the
// second is.
//
// Memory: the receiving goroutine takes each request's bytes from the
// Server's append budget (given back once the library is done with them,
// by a third goroutine that waits for the outcomes), and stops receiving
// while the stream's unanswered bytes reach the stream's budget: a client
// that does not read its answers stops being read.
func (s *Server) AppendStream(stream ternpb.Tern_AppendStreamServer) error {
	ctx, end, err := s.stream(stream.Context(), "append")
	if err != nil {
		return wire(err)
	}
	defer end()

	flow := newFlow(s.streamAppendBytes)
	defer func() {
		for peak := flow.most(); ; {
			if old := s.streamPeak.Load(); old >= peak || s.streamPeak.CompareAndSwap(old, peak) {
				break
			}
		}
	}()
	queue := make(chan []*inFlight, maxInFlight)
	held := make(chan []*inFlight, maxInFlight)
	go func() { // gives the budget back in order, after the handler too
		for fs := range held {
			var n int64
			for _, f := range fs {
				if f.p != nil {
					<-f.p.Done()
				}
				n += f.reqBytes
			}
			s.appends.release(n)
		}
	}()
	var (
		recvErr error // read once queue is closed
		stuck   error // see queue
	)
	go func() {
		defer close(queue)
		defer close(held)
		for {
			if err := flow.wait(ctx); err != nil {
				return
			}
			// Decoded by the codec (grpcopts), not as a ternpb message.
			req := new(grpcopts.DecodedAppend)
			if err := stream.RecvMsg(req); err != nil {
				if err != io.EOF {
					recvErr = err
				}
				return
			}
			n := requestBytes(req)
			var fs []*inFlight
			if err := s.appends.acquire(ctx, n); err != nil {
				req.Release()
				if ctx.Err() != nil {
					return
				}
				fs, n = failed(req, err), 0
			} else {
				fs = s.queue(ctx, req, &stuck)
				req.Release() // the library copied the entries
			}
			fs[len(fs)-1].reqBytes = n
			flow.add(n)
			held <- fs // never blocks for long: the outcomes come without the client
			select {
			case queue <- fs:
			case <-ctx.Done():
				return
			}
		}
	}()

	var (
		results grpcopts.EncodedResults // known, not yet sent
		acked   int64                   // the bytes of the requests results completes
		fs      []*inFlight             // received, outcome not yet taken
	)
	answer := func() error {
		if results.Len() == 0 {
			return nil
		}
		resp := results
		results = grpcopts.EncodedResults{} // gRPC may still hold resp's bytes
		// Encoded by the codec (grpcopts), not as a ternpb message.
		if err := stream.SendMsg(&resp); err != nil {
			return wire(s.streamErr("append", err))
		}
		flow.done(acked)
		acked = 0
		return nil
	}
	for {
		if len(fs) == 0 {
			if len(queue) == 0 { // nothing more received: answer before waiting
				if err := answer(); err != nil {
					return err
				}
			}
			var ok bool
			select {
			case fs, ok = <-queue:
			case <-ctx.Done():
				return wire(s.streamErr("append", ctx.Err()))
			}
			if !ok { // the client is done sending, or the stream broke; all is answered
				return wire(s.streamErr("append", recvErr))
			}
			continue
		}
		f := fs[0]
		if results.Len() == maxResults || !f.ready() {
			if err := answer(); err != nil {
				return err
			}
		}
		off, err := s.wait(ctx, f)
		if ctx.Err() != nil {
			return wire(s.streamErr("append", ctx.Err()))
		}
		fs = fs[1:]
		acked += f.reqBytes
		if err != nil {
			results.Error(rpcerr.Proto(err))
			continue
		}
		results.Offset(uint64(off))
		s.appended(f.start, f.entries, f.bytes)
	}
}
