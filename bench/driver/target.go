package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
)

// ternTarget is Tern as tern bench measures it: logs <prefix>0, <prefix>1,
// ... (bench-0, ... in a fresh data directory), one writer each, on an
// embedded client or a client of a server.
type ternTarget struct {
	c       *tern.Client
	cleanup bool // delete the logs on Close: they are on a server that stays
	logs    []*tern.Log
	writers []*tern.Writer
	// acks has one queue per log of asynchronous appends waiting for their
	// acknowledgement, which comes in append order; one goroutine per log
	// waits on them in turn.
	acks    []*ackQueue
	waiting sync.WaitGroup
}

type pendingAck struct {
	p    *tern.Pending
	done func(error)
}

// An ackQueue hands appends from AppendAsync to the goroutine that waits
// for them. It costs a lock per append, and a wake-up only when that
// goroutine has taken every append queued before: it takes them all at
// once, whereas a channel would cost a send and a receive per append.
type ackQueue struct {
	mu     sync.Mutex
	queued []pendingAck
	closed bool
	wake   chan struct{} // a send when queued was empty, or at close
}

func newAckQueue() *ackQueue { return &ackQueue{wake: make(chan struct{}, 1)} }

func (q *ackQueue) push(a pendingAck) {
	q.mu.Lock()
	q.queued = append(q.queued, a)
	first := len(q.queued) == 1
	q.mu.Unlock()
	if first {
		select {
		case q.wake <- struct{}{}:
		default: // a wake-up is already waiting
		}
	}
}

func (q *ackQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// reap waits for every append queued, in order, and calls its done, until
// the queue is closed and empty.
func (q *ackQueue) reap() {
	var taken []pendingAck
	for {
		q.mu.Lock()
		taken, q.queued = q.queued, taken[:0]
		closed := q.closed
		q.mu.Unlock()
		for i, a := range taken {
			_, err := a.p.Wait(context.Background()) // every append is acknowledged or failed, in time
			a.done(err)
			taken[i] = pendingAck{} // let the Pending go
		}
		if len(taken) == 0 {
			if closed {
				return
			}
			<-q.wake
		}
	}
}

func openTernTarget(ctx context.Context, copts tern.Options, prefix string, logs int, opts tern.LogOptions) (_ *ternTarget, err error) {
	c, err := tern.Open(ctx, copts)
	if err != nil {
		return nil, err
	}
	t := &ternTarget{c: c, cleanup: copts.Server != ""}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	for i := range logs {
		l, err := c.CreateLog(ctx, fmt.Sprintf("%s%d", prefix, i), opts)
		if err != nil {
			return nil, err
		}
		w, err := l.OpenWriter(ctx)
		if err != nil {
			return nil, err
		}
		acks := newAckQueue()
		t.logs, t.writers, t.acks = append(t.logs, l), append(t.writers, w), append(t.acks, acks)
		t.waiting.Go(acks.reap)
	}
	return t, nil
}

func (t *ternTarget) Append(ctx context.Context, log int, entries [][]byte) error {
	if len(entries) == 1 {
		_, err := t.writers[log].Append(ctx, tern.Entry{Payload: entries[0]})
		return err
	}
	es := make([]tern.Entry, len(entries))
	for i, p := range entries {
		es[i].Payload = p
	}
	_, err := t.writers[log].AppendBatch(ctx, es)
	return err
}

// AppendAsync hands the entry to the writer, which has copied it when
// AppendAsync returns.
func (t *ternTarget) AppendAsync(ctx context.Context, log int, entry []byte, done func(error)) {
	t.acks[log].push(pendingAck{t.writers[log].AppendAsync(tern.Entry{Payload: entry}), done})
}

func (t *ternTarget) Read(ctx context.Context, log int, fromStart bool, ready func(), fn func([]byte) error) error {
	l := t.logs[log]
	info, err := l.Info(ctx)
	if err != nil {
		return err
	}
	from := info.End
	if fromStart {
		from = info.Start
	}
	r, err := l.OpenReader(ctx, from)
	if err != nil {
		return err
	}
	defer r.Close()
	ready()
	for {
		es, err := r.NextBatch(ctx, 1024)
		if err != nil {
			return err
		}
		for _, e := range es {
			if err := fn(e.Payload); err != nil {
				return err
			}
		}
	}
}

func (t *ternTarget) Close() error {
	var errs []error
	for _, acks := range t.acks {
		acks.close()
	}
	for _, w := range t.writers {
		errs = append(errs, w.Close())
	}
	t.waiting.Wait()
	if t.cleanup {
		for _, l := range t.logs {
			errs = append(errs, t.c.DeleteLog(context.Background(), l.Name()))
		}
	}
	return errors.Join(append(errs, t.c.Close())...)
}

// sizes records in r the bytes the logs store and the bytes appended to
// them, before compression: Extra "stored_bytes", "logical_bytes" and
// "stored_per_logical".
func (t *ternTarget) sizes(ctx context.Context, r *loadgen.Result) error {
	var stored, logical int64
	for _, l := range t.logs {
		info, err := l.Info(ctx)
		if err != nil {
			return fmt.Errorf("describe %s after the run: %w", l.Name(), err)
		}
		stored, logical = stored+info.Bytes, logical+info.LogicalBytes
	}
	if logical == 0 {
		return nil
	}
	if r.Extra == nil {
		r.Extra = make(map[string]float64)
	}
	r.Extra["stored_bytes"], r.Extra["logical_bytes"] = float64(stored), float64(logical)
	r.Extra["stored_per_logical"] = float64(stored) / float64(logical)
	return nil
}

// compressed is what a variant adds for logs with compression c.
func compressed(c tern.Compression) string {
	if c == "" || c == tern.CompressionNone {
		return ""
	}
	return ", " + string(c)
}

// truncateBehind truncates each log every 100 ms so that it keeps about
// keep bytes of spec's entries behind its end, until the returned function
// is called; keep <= 0 does nothing. A failed truncation is retried at the
// next tick: the append figures are what is measured.
func (t *ternTarget) truncateBehind(spec loadgen.Spec, keep int64) (stop func()) {
	if keep <= 0 {
		return func() {}
	}
	entries := uint64(max(keep/int64(max(spec.EntryBytes, 1)), 1))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		ctx := context.Background()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, l := range t.logs {
				info, err := l.Info(ctx)
				if err == nil && uint64(info.End) > uint64(info.Start)+entries {
					l.Truncate(ctx, info.End-tern.Offset(entries))
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
