package milvus

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/milvus-io/milvus/pkg/v2/proto/streamingpb"
	"github.com/milvus-io/milvus/pkg/v2/streaming/util/message"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls/helper"

	"github.com/ternwal/tern/client"
)

// wal is one channel's WAL: its log, and in read-write mode the writer
// session of its term. Safe for concurrent use.
type wal struct {
	*helper.WALHelper
	name string // the log's
	log  logHandle
	w    writer // nil in read-only mode
}

var _ walimpls.WALImpls = (*wal)(nil)

func (w *wal) WALName() string { return WALName }

// Append appends msg as one entry: its payload as the entry's payload, its
// properties as the entry's properties (values as bytes). It returns once
// the entry is durable in the log's mode. A newer term's writer fences
// this one for good: Append then fails with an error that matches
// walimpls.ErrFenced. It panics in read-only mode.
func (w *wal) Append(ctx context.Context, msg message.MutableMessage) (message.MessageID, error) {
	if w.w == nil {
		panic("tern wal: append to a read-only wal of channel " + w.Channel().Name)
	}
	off, err := w.w.Append(ctx, entry(msg))
	if err != nil {
		return nil, wrapFenced(fmt.Errorf("tern wal: append to log %s: %w", w.name, err))
	}
	return MessageID(off), nil
}

// entry is the Tern entry of msg.
func entry(msg message.MutableMessage) client.Entry {
	raw := msg.Properties().ToRawMap()
	e := client.Entry{Payload: msg.Payload()}
	if len(raw) > 0 {
		e.Properties = make(map[string][]byte, len(raw))
		for k, v := range raw {
			e.Properties[k] = []byte(v)
		}
	}
	return e
}

// immutable is the Milvus message of a Tern entry.
func immutable(e client.Entry) message.ImmutableMessage {
	props := make(map[string]string, len(e.Properties))
	for k, v := range e.Properties {
		props[k] = string(v)
	}
	return message.NewImmutableMesasge(MessageID(e.Offset), e.Payload, props)
}

// Truncate declares the messages before id no longer needed: the log's
// start moves to id's offset, and the message at id stays readable
// (Milvus's "inclusive": it truncates at the checkpoint it recovers from,
// and reads from it with DeliverPolicyStartFrom). It panics in read-only
// mode.
func (w *wal) Truncate(ctx context.Context, id message.MessageID) error {
	if w.w == nil {
		panic("tern wal: truncate a read-only wal of channel " + w.Channel().Name)
	}
	off, ok := id.(MessageID)
	if !ok {
		return fmt.Errorf("tern wal: truncate log %s at %v: %w: a %T is not a tern message id", w.name, id, client.ErrInvalid, id)
	}
	if err := w.log.Truncate(ctx, off.Offset()); err != nil {
		return fmt.Errorf("tern wal: truncate log %s before %d: %w", w.name, off, err)
	}
	return nil
}

// Read opens a reader of the log where opts.DeliverPolicy says, in the one
// call that opens it: all from the log's start, latest from its end,
// start-from at the ID's offset, start-after at the next one.
func (w *wal) Read(ctx context.Context, opts walimpls.ReadOption) (walimpls.ScannerImpls, error) {
	from, err := deliverFrom(opts.DeliverPolicy)
	if err != nil {
		return nil, fmt.Errorf("tern wal: read log %s: %w", w.name, err)
	}
	r, err := w.log.OpenReader(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("tern wal: read log %s from %s: %w", w.name, fromString(from), err)
	}
	return newScanner(opts.Name, w.name, r, opts.ReadAheadBufferSize), nil
}

// deliverFrom is the offset a reader of the policy opens at.
func deliverFrom(p *streamingpb.DeliverPolicy) (client.Offset, error) {
	switch t := p.GetPolicy().(type) {
	case *streamingpb.DeliverPolicy_All:
		return client.FromStart, nil
	case *streamingpb.DeliverPolicy_Latest:
		return client.FromEnd, nil
	case *streamingpb.DeliverPolicy_StartFrom:
		id, err := unmarshalMessageID(t.StartFrom.GetId())
		if err != nil {
			return 0, err
		}
		return id.Offset(), nil
	case *streamingpb.DeliverPolicy_StartAfter:
		id, err := unmarshalMessageID(t.StartAfter.GetId())
		if err != nil {
			return 0, err
		}
		return id.Offset() + 1, nil
	}
	return 0, fmt.Errorf("%w: deliver policy %v: use all, latest, start from or start after", client.ErrInvalid, p)
}

func fromString(from client.Offset) string {
	switch from {
	case client.FromStart:
		return "its start"
	case client.FromEnd:
		return "its end"
	}
	return fmt.Sprintf("offset %d", from)
}

// Close detaches the writer: its queued appends are answered, and its
// session stays the log's (see doc.go for why it does not end it).
func (w *wal) Close() {
	if w.w == nil {
		return
	}
	if err := w.w.Detach(); err != nil {
		w.Log().Warn("tern wal: detach the writer", zap.String("log", w.name), zap.Error(err))
	}
}

// fencedError is a Tern ErrFenced that also matches walimpls.ErrFenced,
// with the standard library's errors.Is and cockroachdb's (which Milvus
// uses), both of which call Is.
type fencedError struct{ err error }

func (e *fencedError) Error() string        { return e.err.Error() }
func (e *fencedError) Unwrap() error        { return e.err }
func (e *fencedError) Is(target error) bool { return target == walimpls.ErrFenced }

// wrapFenced marks err as walimpls.ErrFenced when it is a Tern ErrFenced.
func wrapFenced(err error) error {
	if errors.Is(err, client.ErrFenced) {
		return &fencedError{err}
	}
	return err
}
