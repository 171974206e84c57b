package tern

import (
	"context"
	"fmt"
)

// Reader reads a log in offset order and follows its tail. It returns only
// acknowledged entries. A Reader is not safe for concurrent use.
//
// A Reader that falls below the log's start (because of truncation or
// retention) fails with a *TruncatedError.
//
// A Reader of a server's log rides through the server's restart and a move
// of the log to another node: Next reconnects after the last entry it
// returned, within the client's Options.RetryTimeout; the ticks sent
// meanwhile are lost (docs/streaming.md).
type Reader struct{ impl readerImpl }

// readerImpl is a Reader of an embedded log or of a server's.
type readerImpl interface {
	Next(ctx context.Context) (Entry, error)
	NextBatch(ctx context.Context, max int) ([]Entry, error)
	Close() error
}

// Next returns the next entry, waiting at the tail until one is appended or
// ctx ends.
func (r *Reader) Next(ctx context.Context) (Entry, error) { return r.impl.Next(ctx) }

// NextBatch returns up to max entries, at least one: it waits at the tail for
// the first until ctx ends, but returns what is there without waiting for
// more. It is the fast way to catch up.
func (r *Reader) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	if err := checkMax(max); err != nil {
		return nil, err
	}
	return r.impl.NextBatch(ctx, max)
}

// Close releases the Reader.
func (r *Reader) Close() error { return r.impl.Close() }

// Subscriber receives a subscription's entries from its cursor, in offset
// order, and acknowledges them. Delivery is at least once: entries delivered
// but not acknowledged, or acknowledged but not yet committed when the
// process died, are delivered again to the next Subscriber. A subscription
// has one Subscriber at a time; a new one takes over and the older one's
// calls fail with ErrTakenOver (which matches ErrClosed). A Subscriber is
// not safe for concurrent use, except Ack, which may be called from any
// goroutine. A Subscriber of a server's log rides through the server's
// restart: Next reconnects, from the subscription's committed cursor.
type Subscriber struct{ impl subscriberImpl }

// subscriberImpl is a Subscriber of an embedded log or of a server's.
type subscriberImpl interface {
	readerImpl
	Ack(off Offset) error
}

// Next returns the next entry (or tick), waiting at the tail until ctx ends.
func (s *Subscriber) Next(ctx context.Context) (Entry, error) { return s.impl.Next(ctx) }

// NextBatch returns up to max entries (and ticks), at least one, waiting at
// the tail for the first until ctx ends.
func (s *Subscriber) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	if err := checkMax(max); err != nil {
		return nil, err
	}
	return s.impl.NextBatch(ctx, max)
}

// Ack acknowledges every entry up to and including off: the subscription
// will not deliver them again once the acknowledgement is committed (within
// the client's CommitInterval, or at Close). Acknowledging an entry not yet
// delivered fails with ErrOutOfRange; an acknowledgement below an earlier
// one changes nothing.
func (s *Subscriber) Ack(off Offset) error { return s.impl.Ack(off) }

// Close commits the acknowledged cursor and ends the Subscriber. It must not
// run concurrently with Next or NextBatch.
func (s *Subscriber) Close() error { return s.impl.Close() }

// checkMax refuses a NextBatch of no entries.
func checkMax(max int) error {
	if max <= 0 {
		return fmt.Errorf("%w: NextBatch of %d entries: ask for at least one", ErrInvalid, max)
	}
	return nil
}
