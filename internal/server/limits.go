package server

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/ternpb"
)

// Limits are the bounds of tern serve (docs/server.md): zero takes the
// default, a negative value sets none.
type Limits struct {
	// MaxLogs, MaxLogsPerPrefix and MaxSubscriptionsPerLog are tern.Options'.
	MaxLogs, MaxLogsPerPrefix, MaxSubscriptionsPerLog int
	// MaxStreamsPerConnection bounds the streams (reads, subscriptions,
	// append streams) open at once on one client connection: one more
	// fails with RESOURCE_EXHAUSTED. Default DefaultMaxStreamsPerConnection.
	MaxStreamsPerConnection int
	// MaxStreams bounds the streams open at once on the server, all
	// connections together (Options.MaxStreams). Default: from the memory
	// limit, a quarter of it at 2 MiB a stream, at least 64.
	MaxStreams int
	// IdleConnectionTimeout closes a client connection that has had no call
	// for this long (the client reconnects at its next call). Default
	// DefaultIdleConnectionTimeout.
	IdleConnectionTimeout time.Duration
	// LogIdleTimeout is tern.Options.LogIdleTimeout: how long a log's
	// engine stays open unused. Default tern.DefaultLogIdleTimeout.
	LogIdleTimeout time.Duration
	// MaxRequestBytes bounds one request message, such as a batch of
	// appends. Default grpcopts.MaxMessageBytes.
	MaxRequestBytes int
	// ReuseSegments is tern.Options.ReuseSegments: how many files of
	// deleted segments each local log keeps to write over. Default
	// tern.DefaultReuseSegments.
	ReuseSegments int
	// ZeroAheadBytes is tern.Options.ZeroAheadBytes: how far past its
	// batches a local log writes zeros while its rounds are small. Default
	// tern.DefaultZeroAheadBytes; negative: none.
	ZeroAheadBytes int64
}

// Defaults of Limits.
const (
	DefaultMaxStreamsPerConnection = 1000
	DefaultIdleConnectionTimeout   = 15 * time.Minute
)

// serverOptions are the gRPC options that enforce the connection limits.
func (l Limits) serverOptions() []grpc.ServerOption {
	var opts []grpc.ServerOption
	if n := limitOr(l.MaxStreamsPerConnection, DefaultMaxStreamsPerConnection); n > 0 {
		// The interceptor refuses the streams over the limit with a
		// status; HTTP/2 makes the client wait past twice as many (unary
		// calls need room too).
		opts = append(opts,
			grpc.StatsHandler(connStreams{}),
			grpc.ChainStreamInterceptor(limitStreams(n)),
			grpc.MaxConcurrentStreams(uint32(min(2*n, math.MaxUint32))))
	}
	if d := l.IdleConnectionTimeout; d >= 0 {
		if d == 0 {
			d = DefaultIdleConnectionTimeout
		}
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: d}))
	}
	if n := l.MaxRequestBytes; n != 0 {
		if n < 0 {
			n = math.MaxInt32
		}
		opts = append(opts, grpc.MaxRecvMsgSize(n)) // after grpcopts.Server's: the last one counts
	}
	return opts
}

// limitOr is v with 0 for def and a negative value, no limit, as 0.
func limitOr(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// connStreams tags each connection's context with its count of open
// streams.
type connStreams struct{}

type connStreamsKey struct{}

func (connStreams) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connStreamsKey{}, new(atomic.Int64))
}
func (connStreams) HandleConn(context.Context, stats.ConnStats) {}
func (connStreams) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}
func (connStreams) HandleRPC(context.Context, stats.RPCStats) {}

// limitStreams refuses a stream of the Tern service over max open on its
// connection with tern.ErrLimit. The nodes' replica streams are not
// counted.
func limitStreams(max int) grpc.StreamServerInterceptor {
	prefix := "/" + ternpb.Tern_ServiceDesc.ServiceName + "/"
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		n, ok := ss.Context().Value(connStreamsKey{}).(*atomic.Int64)
		if !ok || !strings.HasPrefix(info.FullMethod, prefix) {
			return handler(srv, ss)
		}
		defer n.Add(-1)
		if n.Add(1) > int64(max) {
			return wire(fmt.Errorf("%w: %d streams are open on this connection, the most one may have (tern serve --max-streams-per-connection): close some, or open another connection", tern.ErrLimit, max))
		}
		return handler(srv, ss)
	}
}
