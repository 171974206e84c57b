package tern

import (
	"context"
	"fmt"

	"github.com/ternwal/tern/client"
)

// The implementation of Client, Log, Writer, Reader and Subscriber for a
// Tern server: the client module's, which speaks the server's gRPC API.
// What the module's types return is wrapped here only where the root
// package's interfaces want another type; the rest passes through.

type remoteClient struct{ *client.Client }

func (c remoteClient) CreateLog(ctx context.Context, name string, opts LogOptions) (logImpl, error) {
	return newRemoteLog(c.Client.CreateLog(ctx, name, opts))
}

func (c remoteClient) OpenLog(ctx context.Context, name string) (logImpl, error) {
	return newRemoteLog(c.Client.OpenLog(ctx, name))
}

func (c remoteClient) ListLogsMeta(context.Context, string) ([]LogInfo, error) {
	return nil, fmt.Errorf("%w: ListLogsMeta reads a data directory's metadata; on a server, use ListLogs", ErrUnsupported)
}

func (c remoteClient) LogID(context.Context, string) (uint64, error) {
	return 0, fmt.Errorf("%w: LogID reads a data directory's metadata; on a server, Log.Info gives the ID", ErrUnsupported)
}

func (c remoteClient) Health() (Health, error) {
	return Health{}, fmt.Errorf("%w: Health reports a data directory's state; a server's is at its /readyz", ErrUnsupported)
}

func (c remoteClient) CloseLog(string) error {
	return fmt.Errorf("%w: CloseLog closes a log this process keeps open; a client of a server keeps none", ErrUnsupported)
}

type remoteLog struct{ *client.Log }

func newRemoteLog(l *client.Log, err error) (logImpl, error) {
	if err != nil {
		return nil, err
	}
	return remoteLog{l}, nil
}

func (l remoteLog) OpenWriter(ctx context.Context, o client.WriterOptions) (writerImpl, error) {
	w, err := l.Log.OpenWriter(ctx, func(wo *client.WriterOptions) { *wo = o })
	if err != nil {
		return nil, err
	}
	return remoteWriter{w}, nil
}

// Append appends through the client's shared producer of the log, which
// numbers its appends itself: o's producer fields are not passed on.
func (l remoteLog) Append(ctx context.Context, es []Entry, o client.AppendOptions) (Offset, error) {
	return l.Log.AppendBatch(ctx, es, remoteOptions(o)...)
}

func (l remoteLog) OpenReader(ctx context.Context, from Offset, opts ...ReadOption) (readerImpl, error) {
	r, err := l.Log.OpenReader(ctx, from, opts...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (l remoteLog) Subscribe(ctx context.Context, name string, opts ...ReadOption) (subscriberImpl, error) {
	s, err := l.Log.Subscribe(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (l remoteLog) Compact(context.Context) error {
	return fmt.Errorf("%w: the server compacts its object logs itself", ErrUnsupported)
}

type remoteWriter struct{ *client.Writer }

func (w remoteWriter) AppendAsync(e Entry, o client.AppendOptions) *Pending {
	return &Pending{w.Writer.AppendAsync(e, remoteOptions(o)...)}
}

func (w remoteWriter) AppendBatchAsync(es []Entry, o client.AppendOptions) *Pending {
	return &Pending{w.Writer.AppendBatchAsync(es, remoteOptions(o)...)}
}

// remoteOptions are the options of an append through a remote writer: its
// condition; the writer numbers its appends itself.
func remoteOptions(o client.AppendOptions) []client.AppendOption {
	if !o.IfEnd {
		return nil
	}
	return []client.AppendOption{client.IfEnd(o.End)}
}
