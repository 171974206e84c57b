package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// In a cluster, each log is served by one node, and the others answer a
// call about it with a NotOwnerError that names that node. A remote log
// remembers where it was sent and goes there for its calls and streams.
// When that node stops answering, the log goes back to the address the
// client was opened with, which points it on.

// maxRedirects bounds the redirects one call follows.
const maxRedirects = 10

// redirectPause is how long a call waits before it follows its redirect
// number attempt (from 0). While a log moves between nodes, their views of
// the cluster catch up within milliseconds, and until then they may send a
// call back and forth: the first redirects are followed at once, the later
// ones after a pause that doubles, 0.7s in all.
func redirectPause(attempt int) time.Duration {
	if attempt < 2 {
		return 0
	}
	return min(5*time.Millisecond<<(attempt-2), 200*time.Millisecond)
}

// apiAt returns the API of the server at addr, connecting once per address.
func (c *Client) apiAt(addr string) (ternpb.TernClient, error) {
	if addr == "" || addr == c.addr {
		return c.api, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if conn, ok := c.conns[addr]; ok {
		return ternpb.NewTernClient(conn), nil
	}
	conn, err := grpc.NewClient(addr, c.dialOptions(addr)...)
	if err != nil {
		return nil, fmt.Errorf("tern: node address %q: %w", addr, err)
	}
	c.conns[addr] = conn
	return ternpb.NewTernClient(conn), nil
}

// api returns the API of the node that serves the log, as far as the log
// knows.
func (l *Log) api() (ternpb.TernClient, error) {
	l.mu.Lock()
	at := l.at
	l.mu.Unlock()
	return l.c.apiAt(at)
}

// redirect learns from a call's error where the log is served, and reports
// whether to make the call again.
func (l *Log) redirect(err error) bool {
	if ne, ok := rpcerr.As[*rpcerr.NotOwnerError](rpcerr.Error(err)); ok {
		l.mu.Lock()
		l.at = ne.Owner // "" when the node gave the log up: ask the first one
		l.mu.Unlock()
		return true
	}
	if status.Code(err) == codes.Unavailable && !l.c.isClosed() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.at != "" {
			l.at = ""
			return true
		}
	}
	return false
}

// call makes a unary call on the node that serves the log, following
// redirects.
func (l *Log) call(ctx context.Context, fn func(ctx context.Context, api ternpb.TernClient) error) error {
	if l.c.isClosed() {
		return ErrClosed
	}
	for attempt := 0; ; attempt++ {
		api, err := l.api()
		if err != nil {
			return err
		}
		err = fn(ctx, api)
		if err != nil && attempt < maxRedirects && l.redirect(err) {
			select {
			case <-time.After(redirectPause(attempt)):
				continue
			case <-ctx.Done():
			}
		}
		return l.c.err(err)
	}
}
