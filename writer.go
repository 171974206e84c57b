package tern

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
)

// Entry is one entry of a log.
type Entry struct {
	// Offset is set by reads and ignored by appends.
	Offset Offset
	// Payload is the entry's data. Entries returned by a Reader own their
	// bytes: Tern never modifies or reuses them.
	Payload []byte
	// Properties are small named values beside the payload.
	Properties map[string][]byte
	// Time is the writer's append time, set to the current time by the
	// append when it is zero.
	Time time.Time

	// IsTick marks a time tick, returned only to readers and subscribers
	// that asked WithTicks. A tick is not an entry: Tick is the time given
	// to AppendTimeTick, Offset is the tick's position (the entries below it
	// came before it, those at or above it come after), and the other
	// fields are empty.
	IsTick bool
	Tick   uint64
}

// Writer appends to a log. Only the newest writer of a log can append; an
// older one gets ErrFenced. A Writer is safe for concurrent use; concurrent
// appends are committed together (group commit) in the order they were
// queued.
type Writer struct {
	remote *remoteWriter // set for a writer on a server; the fields below are then unused

	l     *Log
	epoch uint64
	claim meta.Claim

	mu     sync.Mutex
	last   *Pending // the latest queued append, for Close; nil if none
	closed bool
}

// Pending is an append in progress, from AppendAsync.
type Pending struct {
	remote *remotePending // set for an append to a server

	p   engine.Pending
	err error
}

// Wait blocks until the append is acknowledged (durable, under the log's
// fsync setting) or has failed, or ctx ends, and returns the offset of its
// entry. When ctx ends first, the append goes on and its outcome is unknown.
func (p *Pending) Wait(ctx context.Context) (Offset, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.remote != nil {
		return p.remote.Wait(ctx)
	}
	off, err := p.p.Wait(ctx)
	return Offset(off), err
}

// Done is closed once the outcome is known, for a select over several
// appends or other events; Wait then returns at once.
func (p *Pending) Done() <-chan struct{} {
	switch {
	case p.err != nil:
		return closedChan
	case p.remote != nil:
		return p.remote.done
	}
	return p.p.Done()
}

// closedChan is the Done of a Pending that failed before it was queued.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Append appends one entry and waits for its acknowledgement.
func (w *Writer) Append(ctx context.Context, e Entry) (Offset, error) {
	return w.AppendAsync(e).Wait(ctx)
}

// AppendBatch appends entries atomically, also across crashes: after a crash
// either all of them are in the log or none. It waits for the
// acknowledgement and returns the offset of the first entry; the others
// follow densely.
func (w *Writer) AppendBatch(ctx context.Context, es []Entry) (Offset, error) {
	if w.remote != nil {
		return w.remote.AppendBatch(ctx, es)
	}
	p := w.appendAsync(es)
	return p.Wait(ctx)
}

// AppendAsync queues one entry and returns at once; Wait on the result gives
// the outcome. Appends are acknowledged in the order they were queued. The
// entry's bytes are copied before AppendAsync returns.
func (w *Writer) AppendAsync(e Entry) *Pending {
	if w.remote != nil {
		return w.remote.AppendAsync(e)
	}
	return w.appendAsync([]Entry{e})
}

// AppendBatchAsync queues entries to be appended atomically, as
// AppendBatch does, and returns at once; Wait on the result gives the offset
// of the first entry. The entries' bytes are copied before it returns.
func (w *Writer) AppendBatchAsync(es []Entry) *Pending {
	if w.remote != nil {
		return w.remote.append(es)
	}
	return w.appendAsync(es)
}

// Epoch is the writer's epoch: the log's newest when the writer was opened.
func (w *Writer) Epoch() uint64 {
	if w.remote != nil {
		return w.remote.Epoch()
	}
	return w.epoch
}

// AppendTimeTick sends a time tick: an ordered marker that readers and
// subscribers that asked WithTicks receive after every entry this log's
// writer queued before the call and before every entry queued after it.
// t is the application's timestamp (Milvus's hybrid time, say); Tern does
// not interpret it. Nothing is written to disk: a tick reaches only the
// readers open when it is sent, and a reader that lags may receive only the
// newest of several ticks at one position. AppendTimeTick returns once the
// tick has been handed to the readers; a fenced writer gets ErrFenced.
func (w *Writer) AppendTimeTick(ctx context.Context, t uint64) error {
	if w.remote != nil {
		return w.remote.AppendTimeTick(ctx, t)
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	p, err := w.l.eng.AppendTick(w.epoch, t)
	w.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = p.Wait(ctx)
	return err
}

func (w *Writer) appendAsync(es []Entry) *Pending {
	if len(es) == 0 {
		return &Pending{err: fmt.Errorf("%w: an append needs at least one entry", ErrInvalid)}
	}
	limit := w.l.opts.MaxEntryBytes
	now := time.Now().UnixNano()
	var rs [1]record.Entry
	recs := rs[:0]
	if len(es) > 1 {
		recs = make([]record.Entry, 0, len(es))
	}
	total := 0
	for i, e := range es {
		n := len(e.Payload)
		for k, v := range e.Properties {
			n += len(k) + len(v)
		}
		if n > limit {
			return &Pending{err: fmt.Errorf("%w: entry %d of the batch has %d bytes, over the log's limit of %d (LogOptions.MaxEntryBytes)", ErrTooLarge, i, n, limit)}
		}
		if total += n; total > MaxBatchBytes {
			return &Pending{err: fmt.Errorf("%w: the batch has over %d bytes; split it", ErrTooLarge, MaxBatchBytes)}
		}
		t := now
		if !e.Time.IsZero() {
			t = e.Time.UnixNano()
		}
		recs = append(recs, record.Entry{Time: t, Payload: e.Payload, Properties: e.Properties})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return &Pending{err: ErrClosed}
	}
	p, err := w.l.eng.Append(w.epoch, recs)
	if err != nil {
		return &Pending{err: err}
	}
	w.last = &Pending{p: p}
	return w.last
}

// Close waits for the writer's queued appends to finish and closes it. It
// does not fence the writer: another writer must still be opened to take over.
func (w *Writer) Close() error {
	if w.remote != nil {
		return w.remote.Close()
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	last := w.last
	w.mu.Unlock()
	if last != nil {
		<-last.p.Done()
	}
	// Bounded: with etcd unreachable the release would retry for ever, and
	// the lease lapses on its own.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.claim.Release(ctx); err != nil {
		return fmt.Errorf("tern: release writer claim on %q: %w", w.l.name, err)
	}
	return nil
}
