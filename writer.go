package tern

import (
	"context"

	"github.com/ternwal/tern/client"
)

// Writer appends to a log. Only the newest writer session of a log can
// append; an older one gets ErrFenced. A Writer is safe for concurrent use;
// concurrent appends are committed together (group commit) in the order
// they were queued. A Writer opened with Shared is a shared producer.
//
// A writer's session is its epoch: a remote Writer rides through a restart
// of its server and a move of the log to another node, sending again (once)
// what was not answered.
type Writer struct {
	impl          writerImpl
	maxEntryBytes int // the log's MaxEntryBytes
}

// writerImpl is a Writer of an embedded log or of a server's. Its
// AppendAsync and AppendBatchAsync take entries that Writer has checked;
// AppendAsync saves a one-entry slice that would escape through the
// interface on the path of every single append.
type writerImpl interface {
	Epoch() uint64
	AppendAsync(e Entry, o client.AppendOptions) *Pending
	AppendBatchAsync(es []Entry, o client.AppendOptions) *Pending
	AppendTimeTick(ctx context.Context, t uint64) error
	Close() error
	Detach() error
}

// Pending is an append in progress, from AppendAsync.
type Pending struct{ impl pendingImpl }

type pendingImpl interface {
	Wait(ctx context.Context) (Offset, error)
	Done() <-chan struct{}
}

// Wait blocks until the append is acknowledged (durable, under the log's
// durability setting) or has failed, or ctx ends, and returns the offset of
// its first entry. When ctx ends first, the append goes on and its outcome
// is unknown.
func (p *Pending) Wait(ctx context.Context) (Offset, error) { return p.impl.Wait(ctx) }

// Done is closed once the outcome is known, for a select over several
// appends or other events; Wait then returns at once.
func (p *Pending) Done() <-chan struct{} { return p.impl.Done() }

// failedPending is an append that failed before it was queued.
type failedPending struct{ err error }

func (p failedPending) Wait(context.Context) (Offset, error) { return 0, p.err }
func (p failedPending) Done() <-chan struct{}                { return closedChan }

// closedChan is the Done of a failedPending.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Append appends one entry and waits for its acknowledgement.
func (w *Writer) Append(ctx context.Context, e Entry, opts ...AppendOption) (Offset, error) {
	return w.AppendAsync(e, opts...).Wait(ctx)
}

// AppendBatch appends entries atomically, also across crashes: after a crash
// either all of them are in the log or none. It waits for the
// acknowledgement and returns the offset of the first entry; the others
// follow densely.
func (w *Writer) AppendBatch(ctx context.Context, es []Entry, opts ...AppendOption) (Offset, error) {
	return w.AppendBatchAsync(es, opts...).Wait(ctx)
}

// AppendAsync queues one entry and returns at once; Wait on the result gives
// the outcome. Appends are acknowledged in the order they were queued. The
// entry's bytes are copied before AppendAsync returns.
func (w *Writer) AppendAsync(e Entry, opts ...AppendOption) *Pending {
	if _, err := client.CheckBatch([]Entry{e}, w.maxEntryBytes); err != nil { // the slice stays on the stack
		return &Pending{failedPending{err}}
	}
	return w.impl.AppendAsync(e, appendOptions(opts))
}

// AppendBatchAsync queues entries to be appended atomically, as
// AppendBatch does, and returns at once; Wait on the result gives the offset
// of the first entry. The entries' bytes are copied before it returns.
func (w *Writer) AppendBatchAsync(es []Entry, opts ...AppendOption) *Pending {
	if _, err := client.CheckBatch(es, w.maxEntryBytes); err != nil {
		return &Pending{failedPending{err}}
	}
	return w.impl.AppendBatchAsync(es, appendOptions(opts))
}

// appendOptions applies opts; without any it does not move an
// AppendOptions to the heap, as client.NewAppendOptions does for the
// options it passes to unknown functions.
func appendOptions(opts []AppendOption) client.AppendOptions {
	if len(opts) == 0 {
		return client.AppendOptions{}
	}
	return client.NewAppendOptions(opts...)
}

// Epoch is the writer's epoch: its session, the log's newest when the
// writer was opened (or the one WithEpoch chose); 0 for a shared producer.
func (w *Writer) Epoch() uint64 { return w.impl.Epoch() }

// AppendTimeTick sends a time tick: an ordered marker that readers and
// subscribers that asked WithTicks receive after every entry this log's
// writer queued before the call and before every entry queued after it.
// t is the application's timestamp (Milvus's hybrid time, say); Tern does
// not interpret it. Nothing is written to disk: a tick reaches only the
// readers open when it is sent, and a reader that lags may receive only the
// newest of several ticks at one position. AppendTimeTick returns once the
// tick has been handed to the readers; a fenced writer gets ErrFenced.
func (w *Writer) AppendTimeTick(ctx context.Context, t uint64) error {
	return w.impl.AppendTimeTick(ctx, t)
}

// Close waits for the writer's queued appends to finish, closes it and ends
// its session, unless a newer one has fenced it: shared producers may then
// append to the log. It does not fence the writer: its session can still
// be reopened with WithEpoch. A remote writer waits at most
// Options.RetryTimeout for a server that answers none of its appends, then
// fails them with ErrUnavailable (outcome unknown), leaves its session open
// and returns that error (client.Writer.Close).
func (w *Writer) Close() error { return w.impl.Close() }

// Detach closes the writer as Close does but leaves its session open: it can
// be reopened (WithEpoch), and shared producers still cannot append. A
// server detaches the writers it holds for its clients when it stops.
func (w *Writer) Detach() error { return w.impl.Detach() }
