package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
//
// This file is the one home of the client's retry policy. A call, or the
// (re)opening of a stream, is tried again when it failed because:
//   - the node could not be reached or is going away: gRPC's UNAVAILABLE,
//     which covers a refused or broken connection, a server shutting down
//     (its CLOSED), a log the node is giving up, and a metadata store that
//     does not answer (UNAVAILABLE);
//   - the log is served elsewhere (a NotOwnerError): the next try goes to
//     the node it names, at once for the first hops.
//
// Nothing else is retried: a refusal (NotFound, PermissionDenied, Fenced,
// Truncated, InvalidArgument, a limit, a subscriber taken over) is the
// answer. Tries are spaced by a backoff (backoff), so that a log that moves
// is found within about backoffMax of its move, until the caller's ctx ends
// but no longer than Options.RetryTimeout from the first try.
//
// Which calls are safe to try again, since an UNAVAILABLE may come after the
// server did the work (the connection broke before the answer):
//   - idempotent, retried as they are: DescribeLog, ListLogs,
//     DescribeSubscription, ListSubscriptions, Truncate (the start only
//     moves forward, to the same place), Seek (to the same place), opening a
//     Read stream (at the offset the reader is at), opening a Subscribe
//     stream (from the committed cursor), RepairLog (a second repair finds
//     the cut made; its report may say so rather than describe the cut),
//     AppendTimeTick (a tick is a marker with no storage: a reader may see
//     one twice);
//   - DeleteLog and DeleteSubscription: a retry that follows an unknown
//     outcome and finds nothing to delete (ErrNotFound, ErrSubNotFound)
//     reports success, since the earlier try deleted it;
//   - CreateLog and CreateSubscription: a retry that follows an unknown
//     outcome and finds the log (or subscription) there reports success
//     when its options are those asked for (see CreateLog), the error
//     otherwise;
//   - appends are the writer's, which numbers them so the server applies a
//     retried batch once.

// DefaultRetryTimeout is Options.RetryTimeout when it is zero.
const DefaultRetryTimeout = 30 * time.Second

// The backoff between tries: the first pause is about backoffFirst, each
// next one doubles up to backoffMax, and each is drawn at random between
// half and all of that (jitter), so that clients that lost one server do
// not come back in step.
const (
	backoffFirst = 10 * time.Millisecond
	backoffMax   = 100 * time.Millisecond
	// quickHops is how many redirects to another node a call follows
	// without a pause: while a log moves, the nodes' views catch up within
	// milliseconds and may send a call back and forth until then.
	quickHops = 2
)

// backoff spaces the tries of one operation. The zero value is ready: its
// first pause is about backoffFirst. It is not safe for concurrent use.
type backoff struct{ n int }

// pause returns how long to wait before the next try.
func (b *backoff) pause() time.Duration {
	d := backoffMax
	if b.n < 16 {
		d = min(backoffFirst<<b.n, backoffMax)
		b.n++
	}
	return d/2 + rand.N(d/2+1)
}

// retryable reports whether err, the error of a gRPC call or stream as gRPC
// returned it (not yet mapped), is one that trying again may cure: see the
// policy above.
func retryable(err error) bool {
	if errors.Is(rpcerr.Error(err), ErrNotOwner) {
		return true
	}
	return status.Code(err) == codes.Unavailable
}

// unreachable reports whether err, a gRPC error, says the node could not be
// reached at all: UNAVAILABLE without a Tern reason, as gRPC itself fails.
func unreachable(err error) bool {
	if status.Code(err) != codes.Unavailable {
		return false
	}
	_, isStatus := rpcerr.Error(err).(interface{ GRPCStatus() *status.Status })
	return isStatus // a Tern reason would have been mapped to its sentinel
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
	api, _, err := l.node()
	return api, err
}

// node is api, and the node's address.
func (l *Log) node() (ternpb.TernClient, string, error) {
	l.mu.Lock()
	at := l.at
	l.mu.Unlock()
	api, err := l.c.apiAt(at)
	if at == "" {
		at = l.c.addr
	}
	return api, at, err
}

// redirect learns from a retryable error where to send the log's next try,
// and reports whether that is another node than the one that failed, which
// may be tried at once. A NotOwnerError names the node (or none, when the
// node gave the log up: the client's first address is asked); a node that
// cannot be reached is replaced by the client's first address, which points
// the client on, and that one, when it cannot be reached, by the last node
// a NotOwnerError named or another of Options.Nodes, in turn.
func (l *Log) redirect(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.at
	if ne, ok := rpcerr.As[*rpcerr.NotOwnerError](rpcerr.Error(err)); ok {
		l.at = ne.Owner
		if ne.Owner != "" {
			l.named = ne.Owner
		}
	} else if l.at != "" {
		l.at = ""
	} else if next := l.nextNode(); next != "" {
		l.at = next
	}
	return l.at != was
}

// nextNode returns, in turn, the nodes to ask when the one Open connected
// to cannot be reached: the last one a NotOwnerError named, and the other
// addresses the client was given (Options.Nodes). The caller holds l.mu.
func (l *Log) nextNode() string {
	var nodes []string
	if l.named != "" && l.named != l.c.addr {
		nodes = append(nodes, l.named)
	}
	for _, a := range l.c.seeds {
		if a != l.c.addr && a != l.named {
			nodes = append(nodes, a)
		}
	}
	if len(nodes) == 0 {
		return ""
	}
	l.turn++
	return nodes[l.turn%len(nodes)]
}

// retrier is one operation's tries: the backoff between them and the
// deadline past which it gives up. Writers and readers use it to reopen
// their streams; call uses it for unary calls. It is not safe for
// concurrent use.
type retrier struct {
	l        *Log
	b        backoff
	deadline time.Time // from Options.RetryTimeout
	hops     int       // redirects followed without a pause
	unknown  bool      // a try that was retried failed with an unknown outcome
}

// newRetrier starts the tries of one operation now.
func (l *Log) newRetrier() *retrier {
	return &retrier{l: l, deadline: time.Now().Add(l.c.retryTimeout)}
}

// again decides after a try that failed with err (as gRPC returned it, at
// the node at addr) whether to try again. It returns nil once it has
// pointed the log at the next node and paused, and otherwise the error to
// give up with, mapped to Tern's: err itself when it is not retryable;
// ErrClosed once the client is closed; when RetryTimeout has passed, err,
// which says that the server cannot be reached if it could not; when ctx
// ends during the pause, ctx's error and that one.
func (r *retrier) again(ctx context.Context, err error, addr string) error {
	c := r.l.c
	if c.isClosed() {
		return ErrClosed
	}
	if !retryable(err) {
		return c.err(err)
	}
	var pause time.Duration
	if r.l.redirect(err) && r.hops < quickHops {
		r.hops++
	} else {
		pause = r.b.pause()
	}
	if pause > 0 && time.Now().Add(pause).After(r.deadline) {
		return r.giveUp(err, addr)
	}
	// A NotOwnerError is an answer: the node did nothing. UNAVAILABLE may
	// come after the work was done.
	r.unknown = r.unknown || !errors.Is(rpcerr.Error(err), ErrNotOwner)
	if pause == 0 {
		return ctx.Err()
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ctx.Err(), r.giveUp(err, addr))
	}
}

// retried reports whether an earlier try failed with an unknown outcome
// and was retried: a call that is not idempotent may have been done by it.
func (r *retrier) retried() bool { return r.unknown }

// giveUp is the error of an operation whose last try failed with err.
func (r *retrier) giveUp(err error, addr string) error {
	c := r.l.c
	if unreachable(err) {
		return fmt.Errorf("tern: cannot reach the tern server at %s (tried for up to %v, Options.RetryTimeout): %w (is `tern serve` running?)", addr, c.retryTimeout, c.err(err))
	}
	return c.err(err)
}

// call makes a unary call on the node that serves the log, following
// redirects and retrying as the policy above says. fn must be safe to call
// again (see above); it gets the API of the node to try.
func (l *Log) call(ctx context.Context, fn func(ctx context.Context, api ternpb.TernClient) error) error {
	_, err := l.callRetried(ctx, fn)
	return err
}

// callRetried is call, and reports whether a try before the last (whose
// outcome is err) failed with an unknown outcome: a call that is not
// idempotent may then have been done by that one.
func (l *Log) callRetried(ctx context.Context, fn func(ctx context.Context, api ternpb.TernClient) error) (bool, error) {
	if l.c.isClosed() {
		return false, ErrClosed
	}
	r := l.newRetrier()
	for {
		api, addr, err := l.node()
		if err != nil {
			return r.retried(), err
		}
		err = fn(ctx, api)
		if err == nil {
			return r.retried(), nil
		}
		if err := r.again(ctx, err, addr); err != nil {
			return r.retried(), err
		}
	}
}
