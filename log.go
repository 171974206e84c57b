package tern

import (
	"context"

	"github.com/ternwal/tern/client"
)

// Log is a handle on an open log. It is safe for concurrent use.
type Log struct{ impl logImpl }

// logImpl is a Log kept by this process (embedded) or by a server. The
// arguments it gets have been checked by Log.
type logImpl interface {
	Name() string
	Options() LogOptions
	Info(ctx context.Context) (LogInfo, error)
	OpenWriter(ctx context.Context, o client.WriterOptions) (writerImpl, error)
	Append(ctx context.Context, es []Entry, o client.AppendOptions) (Offset, error)
	OpenReader(ctx context.Context, from Offset, opts ...ReadOption) (readerImpl, error)
	Truncate(ctx context.Context, before Offset) error
	Compact(ctx context.Context) error
	CreateSubscription(ctx context.Context, name string, opts SubOptions) (SubInfo, error)
	Subscription(ctx context.Context, name string) (SubInfo, error)
	Subscriptions(ctx context.Context) ([]SubInfo, error)
	DeleteSubscription(ctx context.Context, name string) error
	Seek(ctx context.Context, name string, to Offset) error
	Subscribe(ctx context.Context, name string, opts ...ReadOption) (subscriberImpl, error)
	Repair(ctx context.Context, acceptLoss bool) (RepairReport, error)
}

// Name is the log's name.
func (l *Log) Name() string { return l.impl.Name() }

// Options returns the log's settings.
func (l *Log) Options() LogOptions { return l.impl.Options() }

// Info describes the log as it is now.
func (l *Log) Info(ctx context.Context) (LogInfo, error) { return l.impl.Info(ctx) }

// OpenWriter opens a writer session of the log: a new epoch, above every
// older one, or the one WithEpoch chose (see there for lower, equal and
// higher epochs). Every older session is fenced: once OpenWriter returns,
// none of their appends is acknowledged, and their later appends fail with
// ErrFenced. With Shared it opens a shared producer instead.
//
// An embedded writer holds a claim on its epoch in the metadata store. With
// etcd metadata the claim rides on a lease: if the lease cannot be renewed
// (etcd unreachable) the writer stops acknowledging and its appends fail
// with ErrFenced, since another process may have taken the log over.
func (l *Log) OpenWriter(ctx context.Context, opts ...WriterOption) (*Writer, error) {
	w, err := l.impl.OpenWriter(ctx, client.NewWriterOptions(opts...))
	if err != nil {
		return nil, err
	}
	return &Writer{impl: w, maxEntryBytes: l.impl.Options().MaxEntryBytes}, nil
}

// Append appends one entry as a shared producer (see Shared) and waits for
// its acknowledgement: producers in many processes may append so to one
// log without fencing each other. While an exclusive writer's session is
// open it fails with ErrFenced.
func (l *Log) Append(ctx context.Context, e Entry, opts ...AppendOption) (Offset, error) {
	return l.AppendBatch(ctx, []Entry{e}, opts...)
}

// AppendBatch appends entries atomically as a shared producer (see Append)
// and returns the offset of the first.
func (l *Log) AppendBatch(ctx context.Context, es []Entry, opts ...AppendOption) (Offset, error) {
	if _, err := client.CheckBatch(es, l.impl.Options().MaxEntryBytes); err != nil {
		return 0, err
	}
	return l.impl.Append(ctx, es, client.NewAppendOptions(opts...))
}

// OpenReader returns a Reader positioned at from, which must be between the
// log's Start and End (inclusive), or be FromStart (the log's start when the
// reader opens, wherever truncation has moved it) or FromEnd (its end then:
// the reader returns only the entries appended from then on). A from below
// Start fails with a *TruncatedError.
func (l *Log) OpenReader(ctx context.Context, from Offset, opts ...ReadOption) (*Reader, error) {
	r, err := l.impl.OpenReader(ctx, from, opts...)
	if err != nil {
		return nil, err
	}
	return &Reader{r}, nil
}

// Truncate declares that the entries below before are no longer needed:
// reads below it fail with ErrTruncated from now on, and the segments wholly
// below it are deleted. The start only moves forward; before may be at most
// End.
func (l *Log) Truncate(ctx context.Context, before Offset) error {
	return l.impl.Truncate(ctx, before)
}

// Compact rewrites the objects of an object log's sealed segments (one per
// upload) into a few large ones now, as an embedded client otherwise does
// every RetentionInterval. A local log has nothing to compact; a server's
// log is compacted by its server, and Compact fails with ErrUnsupported.
func (l *Log) Compact(ctx context.Context) error { return l.impl.Compact(ctx) }

// CreateSubscription creates a durable subscription on the log.
func (l *Log) CreateSubscription(ctx context.Context, name string, opts SubOptions) (SubInfo, error) {
	if err := ValidateSubName(name); err != nil {
		return SubInfo{}, err
	}
	return l.impl.CreateSubscription(ctx, name, opts)
}

// Subscription describes one of the log's subscriptions.
func (l *Log) Subscription(ctx context.Context, name string) (SubInfo, error) {
	if err := ValidateSubName(name); err != nil {
		return SubInfo{}, err
	}
	return l.impl.Subscription(ctx, name)
}

// Subscriptions describes the log's subscriptions, by name.
func (l *Log) Subscriptions(ctx context.Context) ([]SubInfo, error) {
	return l.impl.Subscriptions(ctx)
}

// DeleteSubscription deletes a subscription. Its subscriber, if any, fails
// with ErrClosed.
func (l *Log) DeleteSubscription(ctx context.Context, name string) error {
	if err := ValidateSubName(name); err != nil {
		return err
	}
	return l.impl.DeleteSubscription(ctx, name)
}

// Seek moves a subscription's cursor to to, which must lie between the log's
// Start and End, forwards or backwards. Its subscriber, if any, goes on from
// there; acknowledgements it sends for entries delivered before the Seek are
// ignored.
func (l *Log) Seek(ctx context.Context, name string, to Offset) error {
	if err := ValidateSubName(name); err != nil {
		return err
	}
	return l.impl.Seek(ctx, name, to)
}

// Subscribe starts receiving the subscription's entries from its cursor.
// A cursor below the log's start (because of truncation or retention) fails
// with a *TruncatedError: Seek the subscription to go on.
func (l *Log) Subscribe(ctx context.Context, name string, opts ...ReadOption) (*Subscriber, error) {
	if err := ValidateSubName(name); err != nil {
		return nil, err
	}
	s, err := l.impl.Subscribe(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	return &Subscriber{s}, nil
}
