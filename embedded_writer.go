package tern

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
)

// embeddedWriter is the writer of a log kept by this process: it holds a
// claim on its epoch in the metadata store, and queues appends on the log's
// engine.
type embeddedWriter struct {
	l       *embeddedLog
	eng     engine.Engine // the log's, held open until Close
	release func()
	epoch   uint64 // the claim's: the engine's writer epoch
	session uint64 // the caller's epoch; 0 for a shared producer
	claim   meta.Claim
	shared  *sharedSession // a shared producer's session, whose claim is claim

	mu     sync.Mutex
	recs   []record.Entry // appendBatch's conversion buffer
	last   engine.Pending // the latest queued append, for Close
	queued bool           // last is set
	closed bool
}

// embeddedPending is an append queued on an engine, and the Pending that
// AppendAsync returns for it: one allocation per append instead of a
// Pending and the interface value boxed in it.
type embeddedPending struct {
	pub Pending // pub.impl is the embeddedPending itself
	p   engine.Pending
}

func newEmbeddedPending(p engine.Pending) *Pending {
	ep := &embeddedPending{p: p}
	ep.pub.impl = ep
	return &ep.pub
}

func (p *embeddedPending) Wait(ctx context.Context) (Offset, error) {
	off, err := p.p.Wait(ctx)
	return Offset(off), err
}

func (p *embeddedPending) Done() <-chan struct{} { return p.p.Done() }

func (w *embeddedWriter) Epoch() uint64 { return w.session }

func (w *embeddedWriter) AppendTimeTick(ctx context.Context, t uint64) error {
	if w.shared != nil {
		return fmt.Errorf("%w: shared producers send no time ticks; open a writer", ErrInvalid)
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	p, err := w.eng.AppendTick(w.epoch, t)
	w.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = p.Wait(ctx)
	return err
}

// AppendAsync queues e, which Writer has checked, on the engine.
func (w *embeddedWriter) AppendAsync(e Entry, o client.AppendOptions) *Pending {
	return w.appendBatch([]Entry{e}, o) // appendBatch keeps no reference: the slice stays on the stack
}

// AppendBatchAsync queues es, which Writer has checked, on the engine.
func (w *embeddedWriter) AppendBatchAsync(es []Entry, o client.AppendOptions) *Pending {
	return w.appendBatch(es, o)
}

// appendBatch queues es on the engine. It converts them into w.recs, which
// w.mu guards: an engine copies the entries before Append returns and
// keeps no reference to the slice.
func (w *embeddedWriter) appendBatch(es []Entry, o client.AppendOptions) *Pending {
	now := appendTime()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return &Pending{failedPending{ErrClosed}}
	}
	recs := w.recs[:0]
	for _, e := range es {
		t := now
		if !e.Time.IsZero() {
			t = e.Time.UnixNano()
		}
		recs = append(recs, record.Entry{Time: t, Payload: e.Payload, Properties: e.Properties})
	}
	p, err := w.eng.Append(w.epoch, recs, engine.AppendOptions{
		Producer: o.Producer, Seq: o.Seq, Acked: o.Acked,
		IfEnd: o.IfEnd, End: uint64(o.End),
	})
	clear(recs) // drop the references to the caller's bytes
	if cap(recs) <= maxKeptRecs {
		w.recs = recs[:0]
	}
	if err != nil {
		return &Pending{failedPending{err}}
	}
	w.last, w.queued = p, true
	return newEmbeddedPending(p)
}

// maxKeptRecs bounds the entries of the conversion buffer a writer keeps
// between appends.
const maxKeptRecs = 1024

// Close waits for the writer's queued appends to finish, then ends its
// session, unless it was fenced, and releases its claim.
func (w *embeddedWriter) Close() error { return w.close(true) }

// Detach is Close without ending the session.
func (w *embeddedWriter) Detach() error { return w.close(false) }

func (w *embeddedWriter) close(end bool) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	last, queued := w.last, w.queued
	w.mu.Unlock()
	if queued {
		<-last.Done()
	}
	w.release()
	if w.shared != nil && !w.l.leaveShared(w.shared) {
		return nil // the session's other producers hold the claim
	}
	// Bounded: with etcd unreachable the release would retry for ever, and
	// the lease lapses on its own.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if end && w.shared == nil && w.claim.Valid() {
		if err := w.l.c.meta.EndSession(ctx, w.l.name, w.epoch); err != nil {
			errs = append(errs, fmt.Errorf("tern: end the writer session of %q: %w", w.l.name, err))
		}
	}
	if err := w.claim.Release(ctx); err != nil {
		errs = append(errs, fmt.Errorf("tern: release writer claim on %q: %w", w.l.name, err))
	}
	return errors.Join(errs...)
}
