package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/internal/certs"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/replica"
)

// Time limits of a running server.
const (
	// readyWatchInterval is how often the server asks itself what /readyz
	// would answer, to log the changes.
	readyWatchInterval = 5 * time.Second
	// readyTimeout bounds the metadata check of /readyz.
	readyTimeout = 2 * time.Second
	// streamGrace is how long a shutdown lets unary calls finish before it
	// ends the open streams, which (following a log, or a subscription)
	// never end by themselves.
	streamGrace = 2 * time.Second
	// drainTimeout bounds the wait for the calls still running after the
	// streams were ended; the rest are cut.
	drainTimeout = 10 * time.Second
	// httpShutdownTimeout bounds the wait for HTTP requests (a pprof
	// profile can take 30s) at shutdown.
	httpShutdownTimeout = 2 * time.Second
	// DefaultShutdownTimeout bounds the whole shutdown, unless
	// Config.ShutdownTimeout is set.
	DefaultShutdownTimeout = 30 * time.Second
)

// Config is what Start assembles a server from: tern serve's settings
// (docs/server.md), checked by the caller.
type Config struct {
	// Data is the data directory: the logs, the embedded etcd's data in
	// Data/etcd when Etcd is empty, and a node's replica store in
	// Data/replica.
	Data string
	// Listen and HTTP are the addresses (host:port; port 0 for one the
	// system picks) of the gRPC service and of /metrics, /healthz, /readyz
	// and /debug/pprof/.
	Listen, HTTP string
	// Etcd lists the endpoints of an external etcd cluster; empty starts
	// an embedded etcd in Data/etcd.
	Etcd []string
	// EtcdRoot is the key prefix of Tern's metadata in etcd.
	EtcdRoot string
	// EtcdQuotaBytes is the embedded etcd's backend quota; zero is
	// meta.DefaultEtcdQuotaBytes. An external etcd has its own.
	EtcdQuotaBytes int64
	// Storage is the object store of object logs, and of a node's sealed
	// segments; its URL is empty for none.
	Storage tern.StorageOptions
	// DefaultMode is the mode of the logs created without one.
	DefaultMode tern.Mode
	// NodeID makes the server a node of a cluster that shares Etcd and
	// Storage; empty, a standalone server. Advertise is the address the
	// other nodes and the clients reach it at (empty: the gRPC listener's),
	// and NodeTTL its lease.
	NodeID, Advertise string
	NodeTTL           time.Duration
	// EtcdDir is the embedded etcd's data directory, when Etcd is empty:
	// empty for Data/etcd. On a disk of its own, etcd is safe from a full
	// data disk whatever fills it.
	EtcdDir string
	// DiskReserveBytes is the free space on Data's filesystem that
	// appends leave for the embedded etcd and the subscriptions' cursors
	// (tern.Options.DiskReserveBytes): 0 the default, negative none.
	DiskReserveBytes int64
	// Limits bound what clients can make the server hold.
	Limits Limits
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// ShutdownTimeout bounds Close; zero is DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// TLS names the files of the server's certificate and key, and of the
	// CA of its clients' certificates (mTLS); Cert empty: no TLS. Every
	// listener serves TLS with them: gRPC, HTTP and, on a node, the
	// replica traffic, which the nodes send each other with the same
	// certificate (the cluster's CA is ClientCA). The files are reloaded
	// when they change, and by Reload.
	TLS certs.Files
	// AuthFile is the auth file (docs/auth-file.md): the principals, their
	// grants and quotas; empty: every call is allowed. Reload reads it
	// again.
	AuthFile string
	// Insecure lets Listen and HTTP be beyond loopback without TLS and an
	// auth file. The server warns at start and exports
	// tern_server_insecure 1.
	Insecure bool
	// Pprof serves /debug/pprof/ on the HTTP listener (to principals with
	// admin on every log, with an auth file).
	Pprof bool
	// Audit receives the audit log; nil: Logger.
	Audit *slog.Logger

	// MemoryLimitBytes is what the server's memory is held to: Go's soft
	// memory limit (debug.SetMemoryLimit, process-wide), and the budgets of
	// appends held in memory and of a node's replica store, shares of it
	// (memoryBudgets). Zero is DefaultMemoryLimit(); at least
	// MinMemoryLimit.
	MemoryLimitBytes int64
}

// Running is a server started by Start: etcd (embedded or a client of an
// external one), the data directory, the cluster membership of a node, the
// gRPC service and the HTTP listener. Close stops it.
type Running struct {
	cfg      Config
	logger   *slog.Logger
	grpcAddr net.Addr
	httpAddr net.Addr
	ready    *readiness
	certs    *certs.Store // nil without TLS
	srv      *Server
	served   chan error      // the gRPC server's end
	lost     <-chan struct{} // closed when a node loses its lease; nil outside a cluster
	undo     undoStack
	once     sync.Once
	closeErr error
}

// Start assembles and starts a server, and returns once it serves and is
// ready: the listeners come first, so that a port in use fails before the
// data directory is touched. On an error everything started is stopped
// again; an error after ctx ended means the start-up was interrupted. ctx
// bounds only the start-up.
func Start(ctx context.Context, cfg Config) (_ *Running, err error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MemoryLimitBytes == 0 {
		cfg.MemoryLimitBytes = DefaultMemoryLimit()
	}
	if cfg.MemoryLimitBytes < MinMemoryLimit {
		return nil, fmt.Errorf("memory limit %d bytes is under the least a server needs, %d: raise --memory-limit", cfg.MemoryLimitBytes, MinMemoryLimit)
	}
	debug.SetMemoryLimit(cfg.MemoryLimitBytes)
	budgets := budgetsOf(cfg.MemoryLimitBytes)
	r := &Running{cfg: cfg, logger: logger, served: make(chan error, 1), ready: &readiness{reason: "starting"}}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.undo.run(cmp.Or(cfg.ShutdownTimeout, DefaultShutdownTimeout)))
		}
	}()

	policy, err := loadSecurity(cfg, r)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := checkExposure(cfg, r.certs != nil, policy != nil, logger, reg); err != nil {
		return nil, err
	}

	grpcLis, err := listen(cfg.Listen, "--listen")
	if err != nil {
		return nil, err
	}
	r.undo.push("", func() error { grpcLis.Close(); return nil }) // after grpc.Server.Stop, a no-op
	httpLis, err := listen(cfg.HTTP, "--http")
	if err != nil {
		return nil, err
	}
	r.grpcAddr, r.httpAddr = grpcLis.Addr(), httpLis.Addr()
	if r.certs != nil {
		failed := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tern_tls_handshake_failures_total",
			Help: "TLS handshakes on the gRPC listener that failed: a client without TLS, with a certificate the server does not trust, or that gave up.",
		})
		reg.MustRegister(failed)
		grpcLis = newTLSListener(grpcLis, listenerTLS(r.certs, policy != nil), logger, failed.Inc)
		httpLis = tls.NewListener(httpLis, httpTLS(r.certs))
		watchCerts(r, reg, logger)
	}

	hg := &httpGuard{mutual: r.certs != nil && r.certs.Mutual() && policy == nil}
	httpSrv := &http.Server{Handler: httpMux(reg, r.ready, cfg.Pprof, hg), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)} // failed TLS handshakes, at Debug as gRPC's
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		if err := httpSrv.Serve(httpLis); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server failed", "addr", httpLis.Addr(), "err", err)
		}
	}()
	logger.Info("http listening", "addr", httpLis.Addr().String())
	r.undo.push("stop the HTTP server", func() error {
		sctx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		defer cancel()
		if httpSrv.Shutdown(sctx) != nil {
			httpSrv.Close()
		}
		<-httpDone
		return nil
	})

	endpoints := cfg.Etcd
	if len(endpoints) == 0 {
		dir := cmp.Or(cfg.EtcdDir, filepath.Join(cfg.Data, "etcd"))
		if err := checkEtcdDir(cfg.Data, dir); err != nil {
			return nil, err
		}
		etcd, err := meta.StartEtcdWith(ctx, dir, meta.EmbedOptions{Logger: logger, QuotaBytes: cfg.EtcdQuotaBytes})
		if err != nil {
			return nil, fmt.Errorf("start the embedded etcd in %s: %w", dir, err)
		}
		r.undo.push("stop the embedded etcd", etcd.Close)
		endpoints = etcd.Endpoints()
		logger.Info("etcd embedded", "dir", dir, "endpoints", strings.Join(endpoints, ","))
	} else {
		logger.Info("etcd external", "endpoints", strings.Join(endpoints, ","))
	}
	etcdCli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: etcdTimeout, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(meta.Reconnect)}})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(endpoints, ","), err)
	}
	r.undo.push("", func() error { etcdCli.Close(); return nil })
	probe := func(ctx context.Context) error {
		_, err := etcdCli.Get(ctx, cfg.EtcdRoot+"readyz", clientv3.WithCountOnly())
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, etcdTimeout) // bounds the first answer too
	err = probe(pctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("etcd at %s did not answer within %s (%v): is it running, and reachable from here? check --etcd (or $TERN_ETCD, or etcd: in the config file)",
			strings.Join(endpoints, ","), etcdTimeout, err)
	}
	if len(cfg.Etcd) > 0 {
		warnUncompacted(ctx, etcdCli, endpoints, logger)
	}
	etcdHealth := newEtcdHealth(etcdCli, probe)
	reg.MustRegister(etcdHealth)
	registerMemory(reg, cfg.MemoryLimitBytes, budgets)
	observer := newEngineMetrics(reg).observer()

	var node *clusterNode
	var clusterOpt tern.Cluster
	if cfg.NodeID != "" {
		addr := cmp.Or(cfg.Advertise, DialAddr(grpcLis.Addr()))
		if node, err = startNode(ctx, cfg, etcdCli, addr, r.certs, policy, logger, observer); err != nil {
			return nil, err
		}
		r.undo.push("leave the cluster", node.close)
		clusterOpt = node.set
		r.lost = node.node.Lost()
		registerCluster(reg, node)
		logger.Info("cluster node", "id", cfg.NodeID, "addr", addr, "ttl", cfg.NodeTTL)
	}

	c, err := tern.Open(ctx, tern.Options{
		Dir: cfg.Data, Etcd: endpoints, EtcdRoot: cfg.EtcdRoot, MoveMetadata: true, Logger: logger,
		Storage:     cfg.Storage,
		DefaultMode: cfg.DefaultMode,
		Cluster:     clusterOpt,

		DiskReserveBytes:       cfg.DiskReserveBytes,
		ObjectCacheBytes:       budgets.cacheBytes,
		Observer:               observer,
		MaxLogs:                cfg.Limits.MaxLogs,
		MaxLogsPerPrefix:       cfg.Limits.MaxLogsPerPrefix,
		MaxSubscriptionsPerLog: cfg.Limits.MaxSubscriptionsPerLog,
		LogIdleTimeout:         cfg.Limits.LogIdleTimeout,
		ReuseSegments:          cfg.Limits.ReuseSegments,
		ZeroAheadBytes:         cfg.Limits.ZeroAheadBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("open data directory %s: %w", cfg.Data, err)
	}
	r.undo.push("close data directory "+cfg.Data, c.Close) // syncs the logs, commits the cursors, releases the writers
	registerDisk(reg, cfg.Data, c)

	sopts := Options{Logger: logger, Registerer: reg, AppendBytes: budgets.appendBytes, MaxStreams: limitOr(cfg.Limits.MaxStreams, budgets.streams),
		Policy: policy, Audit: cfg.Audit}
	gopts := append(grpcopts.Server(), cfg.Limits.serverOptions()...)
	if node != nil {
		sopts.Cluster = node.node
		gopts = append(gopts, replica.ServerOptions()...)
	}
	srv := New(c, sopts)
	r.srv = srv
	hg.g.Store(srv.guard)
	if r.certs != nil {
		gopts = append(gopts, grpc.Creds(handshakenCreds{}))
	}
	unary, stream := srv.NodesOnly(r.certs != nil)
	gopts = append(gopts, grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	gs := grpc.NewServer(gopts...)
	srv.Register(gs)
	lis := grpcLis
	if node != nil {
		rs := replica.NewServer(node.store)
		rs.Admit(srv.AdmitNode)
		rs.Register(gs)
		lis = rs.Listen(grpcLis)  // the add streams come to the same port
		r.undo.push("", rs.Close) // after the gRPC service has stopped
	}
	go func() { r.served <- gs.Serve(lis) }()
	r.undo.push("stop the gRPC service", func() error { return stopGRPC(gs, srv, logger) })
	if err := writeServeFile(cfg.Data, ServeInfo{PID: os.Getpid(), Addr: cmp.Or(cfg.Advertise, DialAddr(grpcLis.Addr())), TLS: r.certs != nil}); err != nil {
		return nil, err
	}
	r.undo.push("remove "+ServeFile, func() error { return removeServeFile(cfg.Data) })
	if node != nil {
		r.undo.push("", node.leave) // first: the others must not evict a node that stops answering them on purpose
	}
	logger.Info("memory limit", "bytes", cfg.MemoryLimitBytes, "append_bytes", budgets.appendBytes, "max_streams", sopts.MaxStreams)
	logger.Info("grpc listening", "addr", grpcLis.Addr().String(), "tls", r.certs != nil, "mtls", r.certs != nil && r.certs.Mutual(), "auth", cmp.Or(cfg.AuthFile, "none"), "data", cfg.Data, "storage", storageForLog(cfg.Storage.URL), "default_mode", cmp.Or(string(cfg.DefaultMode), string(tern.ModeLocal)))
	r.ready.set("", etcdHealth.check, leaseCheck(r.lost, cfg.NodeID), healthCheck(c))
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { defer close(watched); r.ready.watch(watchCtx, logger, readyWatchInterval) }()
	r.undo.push("", func() error { stopWatch(); <-watched; return nil })
	return r, nil
}

// Addr is the address the gRPC service listens on.
func (r *Running) Addr() net.Addr { return r.grpcAddr }

// HTTPAddr is the address of /metrics, /healthz, /readyz and /debug/pprof/.
func (r *Running) HTTPAddr() net.Addr { return r.httpAddr }

// Wait returns nil when ctx ends, or an error once the server can serve no
// more: its gRPC listener failed, or, on a node of a cluster, it lost its
// lease and the other nodes have taken its logs over. Either way the
// server still runs until Close.
func (r *Running) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		r.logger.Info("shutting down", "reason", "interrupted")
		return nil
	case <-r.lost:
		r.logger.Error("this node lost its cluster lease; shutting down so that it can be restarted")
		return fmt.Errorf("node %s lost its cluster lease (etcd unreachable for longer than --node-ttl %s, or evicted by the other nodes, which could not connect to it): restart it", r.cfg.NodeID, r.cfg.NodeTTL)
	case err := <-r.served:
		r.logger.Error("grpc server failed; shutting down", "err", err)
		return fmt.Errorf("serve gRPC on %s: %w", r.grpcAddr, err)
	}
}

// Close shuts the server down gracefully, within Config.ShutdownTimeout:
// it stops taking calls, ends the open streams, closes the data directory
// (syncing the logs and committing the subscriptions' cursors), leaves the
// cluster and stops etcd. It logs "stopped" when all went well. Later calls
// return the first's result.
func (r *Running) Close() error {
	r.once.Do(func() {
		r.ready.set("shutting down")
		r.closeErr = r.undo.run(cmp.Or(r.cfg.ShutdownTimeout, DefaultShutdownTimeout))
		if r.closeErr == nil {
			r.logger.Info("stopped")
		}
	})
	return r.closeErr
}

// readiness is what /readyz reports: why the server is not ready, or, when
// it is, what its checks find (the metadata store answers, ...).
type readiness struct {
	mu     sync.Mutex
	reason string  // why not ready; empty when ready
	checks []check // asked in order once ready
}

// check is one question /readyz asks of a ready server: fail, when not
// empty, makes it answer 503 with that reason; notes are listed without
// failing it (a degraded log, say). A check must answer within ctx.
type check func(ctx context.Context) (fail string, notes []string)

func (r *readiness) set(reason string, checks ...check) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reason, r.checks = reason, checks
}

// evaluate asks the checks: what /readyz answers now.
func (r *readiness) evaluate(ctx context.Context) (fails, notes []string) {
	r.mu.Lock()
	reason, checks := r.reason, r.checks
	r.mu.Unlock()
	if reason != "" {
		return []string{reason}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for _, c := range checks {
		fail, n := c(ctx)
		if fail != "" {
			fails = append(fails, fail)
		}
		notes = append(notes, n...)
	}
	return fails, notes
}

// watch logs, until ctx ends, one line each time what /readyz answers
// changes: "ready", "not ready" with the reasons (the metadata store does
// not answer, the disk is full, the node lost its lease), and "readiness
// notes" when they change (a log degraded or repaired). It asks every
// interval, as a load balancer would.
func (r *readiness) watch(ctx context.Context, logger *slog.Logger, interval time.Duration) {
	var last string
	first := true
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fails, notes := r.evaluate(ctx)
		if ctx.Err() != nil {
			return
		}
		state := strings.Join(fails, "\n") + "\x00" + strings.Join(notes, "\n")
		if first || state != last {
			switch {
			case len(fails) > 0:
				logger.Warn("not ready", "reasons", fails, "notes", notes)
			case first || !strings.HasPrefix(last, "\x00"):
				logger.Info("ready", "notes", notes)
			default:
				logger.Warn("readiness notes changed", "notes", notes)
			}
			first, last = false, state
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	fails, notes := r.evaluate(req.Context())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(fails) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	} else {
		io.WriteString(w, "ok\n")
	}
	for _, f := range fails {
		io.WriteString(w, f+"\n")
	}
	for _, n := range notes {
		io.WriteString(w, n+"\n")
	}
}

// leaseCheck fails once a node of a cluster has lost its lease (lost is
// closed): the other nodes take its logs over, and Wait ends the server.
// A standalone server (lost nil) always passes.
func leaseCheck(lost <-chan struct{}, node string) check {
	return func(context.Context) (string, []string) {
		select {
		case <-lost:
			return fmt.Sprintf("node %s lost its cluster lease (etcd unreachable for longer than --node-ttl, or evicted by the other nodes, which could not connect to it): the other nodes serve its logs; restart it", node), nil
		default:
			return "", nil
		}
	}
}

// healthCheck reports what the data directory's client knows is wrong: a
// full disk fails the check, degraded logs are listed.
func healthCheck(c *tern.Client) check {
	return func(context.Context) (string, []string) {
		h, err := c.Health()
		if err != nil {
			return "health of the data directory: " + err.Error(), nil
		}
		var fail string
		if h.NoSpace != "" {
			fail = "no space left on the disk of " + h.NoSpace + ": appends are refused until space is freed"
		}
		notes := make([]string, 0, len(h.Degraded))
		for _, d := range h.Degraded {
			notes = append(notes, fmt.Sprintf("degraded log %q: %v (tern log repair %s)", d.Name, d.Err, d.Name))
		}
		return fail, notes
	}
}

// undoStack is what Start has started, to be stopped in reverse order.
type undoStack []undoStep

type undoStep struct {
	what string // for the error; empty for a step that cannot fail
	fn   func() error
}

func (u *undoStack) push(what string, fn func() error) { *u = append(*u, undoStep{what, fn}) }

// run stops everything, newest first, within timeout: a step that hangs (a
// metadata store that does not answer) must not keep the process from
// exiting.
func (u undoStack) run(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		var err error
		for i := len(u) - 1; i >= 0; i-- {
			if serr := u[i].fn(); serr != nil {
				err = errors.Join(err, fmt.Errorf("%s: %w", u[i].what, serr))
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("shutdown did not finish within %s: the metadata store may not answer; acknowledged entries are durable, the last subscription acknowledgements may be delivered again", timeout)
	}
}

// stopGRPC stops gs gracefully within bounds, and srv with it.
func stopGRPC(gs *grpc.Server, srv *Server, logger *slog.Logger) error {
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop() // refuses new calls at once, then waits for the running ones
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(streamGrace):
	}
	err := srv.Close() // ends the streams with UNAVAILABLE, closes the writers
	select {
	case <-stopped:
	case <-time.After(drainTimeout):
		logger.Warn("calls still running; cutting them", "waited", streamGrace+drainTimeout)
		gs.Stop()
		<-stopped
	}
	if err != nil {
		return fmt.Errorf("stop the gRPC service: %w", err)
	}
	return nil
}

// storageForLog is an object store's URL as logged: "none" when empty, and
// without a password in case one was put in it (tern.Open refuses those).
func storageForLog(raw string) string {
	if raw == "" {
		return "none"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// listen listens on addr, which flag sets, saying what to do if the port is
// taken.
func listen(addr, flag string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("listen %s: address already in use: is another tern serve running? use %s", addr, flag)
	case err != nil:
		return nil, fmt.Errorf("listen %s: %w: check %s", addr, err, flag)
	}
	return l, nil
}

// DialAddr is an address to reach a listener at: its own, or loopback for
// a listener on every interface.
func DialAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return a.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port))
}

// checkEtcdDir refuses to start an embedded etcd with no data in dir for a
// data directory whose metadata was in etcd (it has the mark tern.Open
// leaves, meta.etcd) or that holds logs: their metadata is elsewhere
// (another --etcd-dir, a wiped one, or an external etcd), and a fresh etcd
// would give new logs the IDs, and so the directories, of the old ones.
func checkEtcdDir(data, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "member")); err == nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(data, "meta.db")); err == nil {
		return nil // an embedded program's directory: tern.Open says so
	}
	_, err := os.Stat(filepath.Join(data, "meta.etcd"))
	marked := err == nil
	logs, err := os.ReadDir(filepath.Join(data, "logs"))
	if !marked && (err != nil || len(logs) == 0) {
		return nil // a new data directory, or one tern.Open reports on
	}
	return fmt.Errorf("the data directory %s has its metadata in etcd, and the embedded etcd's directory %s holds no etcd data: the metadata is elsewhere; start with the --etcd-dir that holds it (by default %s), or the --etcd it was in, or with a new --data",
		data, dir, filepath.Join(data, "etcd"))
}
