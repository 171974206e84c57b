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

func (l remoteLog) OpenWriter(ctx context.Context) (writerImpl, error) {
	w, err := l.Log.OpenWriter(ctx)
	if err != nil {
		return nil, err
	}
	return remoteWriter{w}, nil
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

func (w remoteWriter) AppendBatchAsync(es []Entry) pendingImpl {
	return w.Writer.AppendBatchAsync(es)
}
