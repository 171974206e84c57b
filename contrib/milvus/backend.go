package milvus

import (
	"context"
	"errors"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client"
)

// backend is the Tern the WALs are kept in: a server reached through the
// thin client module (remote), or a tern.Client of this process
// (embedded). The two share the client module's types, so each adapter
// only returns its own handles as these interfaces.
type backend interface {
	// openLog opens the log name, creating it with opts when there is none.
	openLog(ctx context.Context, name string, opts client.LogOptions) (logHandle, error)
	// close releases the backend if the opener owns it.
	close() error
}

// logHandle is one log. Safe for concurrent use.
type logHandle interface {
	OpenWriter(ctx context.Context, opts ...client.WriterOption) (writer, error)
	OpenReader(ctx context.Context, from client.Offset, opts ...client.ReadOption) (reader, error)
	Truncate(ctx context.Context, before client.Offset) error
}

// writer is an exclusive writer session (*client.Writer, *tern.Writer).
// Safe for concurrent use.
type writer interface {
	Append(ctx context.Context, e client.Entry, opts ...client.AppendOption) (client.Offset, error)
	Detach() error
}

// reader is a tail reader (*client.Reader, *tern.Reader).
type reader interface {
	NextBatch(ctx context.Context, max int) ([]client.Entry, error)
	Close() error
}

var (
	_ writer = (*client.Writer)(nil)
	_ writer = (*tern.Writer)(nil)
	_ reader = (*client.Reader)(nil)
	_ reader = (*tern.Reader)(nil)
)

// openOrCreate opens a log, or creates it if there is none. Two openers
// may create the same channel's log at once: the one whose create fails
// with ErrExist opens the other's.
func openOrCreate[L any](ctx context.Context, name string,
	open func(context.Context, string) (L, error),
	create func(context.Context, string, client.LogOptions) (L, error),
	opts client.LogOptions,
) (L, error) {
	l, err := open(ctx, name)
	if !errors.Is(err, client.ErrNotFound) {
		return l, err
	}
	l, err = create(ctx, name, opts)
	if errors.Is(err, client.ErrExist) {
		return open(ctx, name)
	}
	return l, err
}

// remote is a backend on a Tern server.
type remote struct{ c *client.Client }

func (b remote) openLog(ctx context.Context, name string, opts client.LogOptions) (logHandle, error) {
	l, err := openOrCreate(ctx, name, b.c.OpenLog, b.c.CreateLog, opts)
	if err != nil {
		return nil, err
	}
	return remoteLog{l}, nil
}

func (b remote) close() error { return b.c.Close() }

type remoteLog struct{ l *client.Log }

func (l remoteLog) OpenWriter(ctx context.Context, opts ...client.WriterOption) (writer, error) {
	w, err := l.l.OpenWriter(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (l remoteLog) OpenReader(ctx context.Context, from client.Offset, opts ...client.ReadOption) (reader, error) {
	r, err := l.l.OpenReader(ctx, from, opts...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (l remoteLog) Truncate(ctx context.Context, before client.Offset) error {
	return l.l.Truncate(ctx, before)
}

// embedded is a backend on a tern.Client of this process; owned says
// whether the opener closes it.
type embedded struct {
	c     *tern.Client
	owned bool
}

func (b embedded) openLog(ctx context.Context, name string, opts client.LogOptions) (logHandle, error) {
	l, err := openOrCreate(ctx, name, b.c.OpenLog, b.c.CreateLog, opts)
	if err != nil {
		return nil, err
	}
	return embeddedLog{l}, nil
}

func (b embedded) close() error {
	if !b.owned {
		return nil
	}
	return b.c.Close()
}

type embeddedLog struct{ l *tern.Log }

func (l embeddedLog) OpenWriter(ctx context.Context, opts ...client.WriterOption) (writer, error) {
	w, err := l.l.OpenWriter(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (l embeddedLog) OpenReader(ctx context.Context, from client.Offset, opts ...client.ReadOption) (reader, error) {
	r, err := l.l.OpenReader(ctx, from, opts...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (l embeddedLog) Truncate(ctx context.Context, before client.Offset) error {
	return l.l.Truncate(ctx, before)
}
