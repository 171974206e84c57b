package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
	"github.com/ternwal/tern/internal/auth"
	"github.com/ternwal/tern/internal/cluster"
)

// Options configure a Server.
type Options struct {
	// Logger receives state changes: writers opened and fenced, streams that
	// failed. Default: none.
	Logger *slog.Logger
	// Registerer receives the Server's metrics. Default: a registry of the
	// Server's own, which nothing exports.
	Registerer prometheus.Registerer
	// Cluster, for a node of a cluster, says which node serves each log
	// (owners.go). Without it the Server serves every log.
	Cluster *cluster.Node

	// AppendBytes bounds the bytes of appends (unary and streamed) the
	// Server holds, from their receipt until they are durable or failed:
	// an append waits for room, and one larger than AppendBytes fails with
	// rpcerr.ErrLimit. Zero: no bound. tern serve sets it from
	// --memory-limit (MemoryBudgets).
	AppendBytes int64
	// StreamAppendBytes bounds the bytes an AppendStream has received and
	// not yet answered: past it, the stream is not read until answers go
	// out. Zero: DefaultStreamAppendBytes, or AppendBytes if smaller.
	StreamAppendBytes int64
	// MaxStreams bounds the streams (reads, subscriptions, append streams)
	// open at once on the Server, all connections together: one more fails
	// with rpcerr.ErrLimit. Each may hold a few MiB while its client does
	// not read. Zero: no bound. tern serve sets it from --max-streams, by
	// default from --memory-limit.
	MaxStreams int
	// Policy is the auth file (tern serve --auth): who may call, with what
	// grants and quotas. Nil: every call is allowed. SetPolicy replaces it.
	Policy *auth.Policy
	// Audit receives the audit log: a line for every admin operation and
	// every call refused for want of authentication, permission or quota.
	// Default: Logger.
	Audit *slog.Logger
	// NoDedup applies appends without their producers' numbers, so that a
	// batch a client sends again after a broken stream may be applied
	// twice. Unsafe: it exists for tern bench to measure what
	// deduplication costs (--dedup-cost), and tern serve has no flag for
	// it.
	NoDedup bool
}

// DefaultStreamAppendBytes is Options.StreamAppendBytes when it is zero:
// room for a client's pipeline of requests of about 4 MiB.
const DefaultStreamAppendBytes = 64 << 20

// Server implements the Tern gRPC service on a tern.Client. It is safe for
// concurrent use.
type Server struct {
	ternpb.UnimplementedTernServer

	c       *tern.Client
	log     *slog.Logger
	metrics *metrics

	ctx      context.Context // canceled by Close
	shutdown context.CancelFunc

	mu        sync.Mutex
	closed    bool
	writers   map[string]map[uint64]*writer // by log and epoch; 0: the shared producer
	reopening keyLocks                      // by log: one reopening of a session at a time
	node      *cluster.Node                 // nil outside a cluster
	served    map[uint64]string             // the logs this node serves, by ID
	ids       map[string]uint64             // and their IDs by name
	appends   *budget                       // the bytes of appends in memory
	guard     *guard                        // who may call
	// streamAppendBytes bounds an AppendStream's unanswered bytes, and
	// streamPeak is the most any ended stream had (for tests).
	streamAppendBytes int64
	streamPeak        atomic.Int64
	maxStreams        int            // Options.MaxStreams
	noDedup           bool           // Options.NoDedup
	openStreams       int            // streams open now, under mu
	takeMu            sync.Mutex     // one log taken at a time, and none while one is created (create)
	streams           sync.WaitGroup // the open streams; Add only under mu, before closed
	closing           sync.WaitGroup // writers being closed in the background
	warming           sync.WaitGroup // logs taken over being opened (warm); Add only under mu, before closed
}

// New returns a Server of c's logs. The Server does not own c: close the
// Server before c.
func New(c *tern.Client, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	s := &Server{
		c:          c,
		log:        opts.Logger,
		metrics:    newMetrics(opts.Registerer),
		writers:    map[string]map[uint64]*writer{},
		node:       opts.Cluster,
		served:     map[uint64]string{},
		ids:        map[string]uint64{},
		appends:    newBudget(opts.AppendBytes, "tern serve --memory-limit"),
		maxStreams: opts.MaxStreams,
		noDedup:    opts.NoDedup,
	}
	s.guard = newGuard(c, opts.Policy, cmp.Or(opts.Audit, opts.Logger), opts.Registerer)
	registerDamage(opts.Registerer, c)
	s.streamAppendBytes = cmp.Or(opts.StreamAppendBytes, DefaultStreamAppendBytes)
	if opts.AppendBytes > 0 {
		s.streamAppendBytes = min(s.streamAppendBytes, opts.AppendBytes)
	}
	register(opts.Registerer, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tern_append_memory_bytes",
		Help: "Bytes of appends held in memory (received, not yet durable), counted against the append budget (--memory-limit).",
	}, func() float64 { return float64(s.appends.inUse()) }))
	s.ctx, s.shutdown = context.WithCancel(context.Background())
	if s.node != nil {
		go s.balance()
	}
	return s
}

// Register registers the Tern service on g. The handlers count requests in
// tern_server_requests_total, turn a panic into an INTERNAL status instead of
// letting it end the process, and answer a request gRPC cannot decode with
// INVALID_ARGUMENT (gRPC itself says INTERNAL, which is for Tern's bugs).
// With a Policy, each call is authenticated, and each request it decodes
// authorized and counted against the caller's quotas (auth.go).
func (s *Server) Register(g *grpc.Server) {
	desc := ternpb.Tern_ServiceDesc
	desc.Methods = make([]grpc.MethodDesc, len(ternpb.Tern_ServiceDesc.Methods))
	for i, m := range ternpb.Tern_ServiceDesc.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (resp any, err error) {
			defer s.observe(m.MethodName, &err)
			c := s.guard.begin(ctx, m.MethodName)
			defer func() { c.end(err) }()
			if c.err != nil {
				return nil, c.err
			}
			return h(srv, c.ctx, func(v any) error {
				if err := malformed(dec(v)); err != nil {
					return err
				}
				return c.admit(v)
			}, ic)
		}
		desc.Methods[i] = m
	}
	desc.Streams = make([]grpc.StreamDesc, len(ternpb.Tern_ServiceDesc.Streams))
	for i, sd := range ternpb.Tern_ServiceDesc.Streams {
		h := sd.Handler
		sd.Handler = func(srv any, stream grpc.ServerStream) (err error) {
			defer s.observe(sd.StreamName, &err)
			c := s.guard.begin(stream.Context(), sd.StreamName)
			defer func() { c.end(err) }()
			if c.err != nil {
				return c.err
			}
			return h(srv, guardedStream{decodingStream{stream}, c})
		}
		desc.Streams[i] = sd
	}
	g.RegisterService(&desc, s)
}

// SetPolicy replaces the auth file's policy (nil: every call allowed), as
// tern serve does when it reloads the file. Calls already running keep the
// policy they were admitted by.
func (s *Server) SetPolicy(p *auth.Policy) { s.guard.setPolicy(p) }

// NodesOnly returns the interceptors that keep the replica service of a
// node to the other nodes (guard.nodesOnly): give them to the gRPC server
// that serves it, with tlsOn true when it serves TLS.
func (s *Server) NodesOnly(tlsOn bool) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return s.guard.nodesOnly(tlsOn)
}

// AdmitNode is replica.Server.Admit's check of an add connection: under
// TLS it must come from a node (guard.node).
func (s *Server) AdmitNode(c net.Conn) error {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil
	}
	cert := verifiedCert(tc.ConnectionState())
	if err := s.guard.node(cert); err != nil {
		s.guard.record(certName(cert), "replica add stream", "", err)
		return err
	}
	return nil
}

// malformed turns the error of decoding a request, which gRPC reports as
// INTERNAL (a message that is not the protobuf it should be, or that does
// not decompress), into ErrInvalid.
func malformed(err error) error {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Internal {
		return fmt.Errorf("%w: malformed request: %s", tern.ErrInvalid, st.Message())
	}
	return err
}

// decodingStream is a server stream whose messages that cannot be decoded
// fail with ErrInvalid. It needs the codec of grpcopts.Server.
type decodingStream struct{ grpc.ServerStream }

func (s decodingStream) RecvMsg(m any) error {
	d := grpcopts.Decoding{M: m}
	if err := s.ServerStream.RecvMsg(&d); err != nil {
		return malformed(err)
	}
	if d.Err != nil {
		return fmt.Errorf("%w: malformed request: %v", tern.ErrInvalid, d.Err)
	}
	return nil
}

// observe counts a finished request, turning a panic into an error.
func (s *Server) observe(method string, err *error) {
	if p := recover(); p != nil {
		s.log.Error("handler panicked", "method", method, "panic", p, "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "tern: internal error in %s", method)
	}
	*err = wire(*err)
	s.metrics.requests.WithLabelValues(method, status.Code(*err).String()).Inc()
}

// wire returns err as a gRPC status error; see rpcerr.Status.
func wire(err error) error { return rpcerr.Status(err).Err() }

// errInvalid is a malformed request.
func errInvalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", tern.ErrInvalid, fmt.Sprintf(format, args...))
}

// errShutdown ends the streams open when the Server closes.
var errShutdown = fmt.Errorf("%w: the server is shutting down", tern.ErrClosed)

// Close ends the open streams with UNAVAILABLE, waits for their handlers to
// return (subscribers commit their cursors) and closes the writers the
// Server opened. It does not close the tern.Client. Streams and OpenWriter
// calls that arrive later fail with UNAVAILABLE.
//
// A handler blocked sending to a client that does not read (gRPC flow
// control) returns only when the client reads or its transport ends: call
// Close before grpc.Server.GracefulStop, and if Close does not return within
// a grace period, grpc.Server.Stop ends the transports and so the wait.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.shutdown()
	writers := s.writers
	s.writers = nil
	s.mu.Unlock()

	s.streams.Wait()
	var err error
	for _, held := range writers {
		for _, w := range held {
			// Their sessions stay open for the clients to reopen on the
			// next server. A claim that cannot be released (the metadata
			// store is gone) lapses with its lease: not a failure of the
			// shutdown.
			if derr := w.detach(errShutdown); derr != nil {
				s.log.Warn("letting a writer go failed", "log", w.log, "epoch", w.Epoch(), "err", derr)
			}
		}
	}
	s.closing.Wait()
	s.warming.Wait()
	return err
}

// stream registers an open stream of the given kind and returns its context,
// canceled when the client goes or the Server closes, and the function that
// ends it.
func (s *Server) stream(ctx context.Context, kind string) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, errShutdown
	}
	if s.maxStreams > 0 && s.openStreams >= s.maxStreams {
		return nil, nil, fmt.Errorf("%w: the server has %d streams open, its most (tern serve --max-streams, by default from --memory-limit): close streams this client does not read, or raise the limit", tern.ErrLimit, s.openStreams)
	}
	s.openStreams++
	s.streams.Add(1)
	gauge := s.metrics.streams.WithLabelValues(kind)
	gauge.Inc()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		gauge.Dec()
		s.mu.Lock()
		s.openStreams--
		s.mu.Unlock()
		s.streams.Done()
	}, nil
}

// streamErr is what a stream handler returns for err: UNAVAILABLE when the
// Server closing ended the stream, err otherwise, logged at Debug unless the
// client went away.
func (s *Server) streamErr(kind string, err error) error {
	if err == nil {
		return nil
	}
	if s.ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return errShutdown
	}
	if code := status.Code(wire(err)); code != codes.Canceled && code != codes.DeadlineExceeded {
		s.log.Debug("stream failed", "kind", kind, "err", err)
	}
	return err
}
