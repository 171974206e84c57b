package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/replica"
	"github.com/ternwal/tern/internal/server"
)

// Time limits of tern serve.
const (
	// etcdTimeout bounds the first answer of an external etcd at start-up.
	etcdTimeout = 5 * time.Second
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
	// shutdownTimeout bounds the whole shutdown, unless app.shutdownTimeout
	// is set.
	shutdownTimeout = 30 * time.Second
)

func (a *app) serveCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the logs of a data directory over gRPC",
		Long: `Serve the logs of a data directory over gRPC, for the tern commands (with
--server) and for clients in any language.

The metadata goes to an etcd cluster (--etcd), or, without one, to an etcd
embedded in this process, with its data in the etcd subdirectory of --data. An HTTP listener (--http)
serves Prometheus metrics on /metrics, /healthz (200 while the process runs),
/readyz (200 once it serves and the metadata store answers, 503 otherwise) and
pprof on /debug/pprof/.

Logs are local (segment files under --data) or, with --storage, in an object
store: an S3 bucket or a directory standing in for one.

  tern serve --storage 's3://tern/wal?endpoint=127.0.0.1:9000' --mode object

With --node-id the server is a node of a cluster: nodes that share an etcd
cluster (--etcd) and an object store (--storage) serve the logs between
them, one node per log, and move a dead node's logs to the others after
--node-ttl. Clients may call any node: it sends them to the one serving the
log. Quorum logs (--mode quorum) keep their open segments on the nodes.

  tern serve --node-id n1 --etcd 10.0.0.9:2379 --storage 's3://tern/wal?endpoint=10.0.0.9:9000' --listen :7070 --advertise 10.0.0.1:7070

--mode sets the mode of the logs created without one. The S3 credentials are
$AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN, or
storage_access_key and storage_secret_key ($TERN_STORAGE_ACCESS_KEY,
$TERN_STORAGE_SECRET_KEY), which have no flags: a command line is visible to
every user.

Settings come from, weakest first: the defaults, a YAML file (--config), the
environment ($TERN_DATA, $TERN_LISTEN, $TERN_HTTP, $TERN_ETCD, $TERN_ETCD_ROOT,
$TERN_LOG_LEVEL, $TERN_STORAGE, $TERN_MODE, $TERN_STORAGE_ACCESS_KEY,
$TERN_STORAGE_SECRET_KEY, $TERN_STORAGE_SSEC_KEY_FILE, $TERN_NODE_ID,
$TERN_ADVERTISE, $TERN_NODE_TTL) and the flags.
--print-config prints the result in the file's format, leaving out
storage_secret_key (a comment says when it is set):

  advertise: ""
  data: ./tern-data
  etcd: []
  etcd_root: /tern/
  http: 127.0.0.1:7071
  listen: 127.0.0.1:7070
  log_level: info
  mode: local
  node_id: ""
  node_ttl: 10s
  storage: ""
  storage_access_key: ""
  storage_ssec_key_file: ""

SIGINT or SIGTERM stops the server gracefully: it stops taking calls, ends
the open streams, syncs the logs and commits the subscriptions' cursors. A
second signal stops it at once.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case cmd.Flags().Changed("dir"):
				return usagef(cmd, "tern serve takes its data directory from --data, not --dir")
			case cmd.Flags().Changed("server"):
				return usagef(cmd, "tern serve takes no --server: it is the server; set its address with --listen")
			}
			cfg, err := f.resolve(cmd.Flags(), a.getenv)
			if err != nil {
				return err
			}
			if f.printConfig {
				b, err := cfg.marshal()
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(b)
				return err
			}
			return a.serve(cmd.Context(), cfg)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// readiness is what /readyz reports: why the server is not ready, or, when
// it is, whether the metadata store answers.
type readiness struct {
	mu     sync.Mutex
	reason string                          // why not ready; empty when ready
	probe  func(ctx context.Context) error // checks the metadata store; set when ready
}

func (r *readiness) set(reason string, probe func(context.Context) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reason, r.probe = reason, probe
}

func (r *readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	reason, probe := r.reason, r.probe
	r.mu.Unlock()
	if reason == "" {
		ctx, cancel := context.WithTimeout(req.Context(), readyTimeout)
		defer cancel()
		if err := probe(ctx); err != nil {
			reason = "metadata store does not answer: " + err.Error()
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if reason != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, reason+"\n")
		return
	}
	io.WriteString(w, "ok\n")
}

// serve runs the server until ctx ends, then shuts it down. An interrupted
// start-up is a shutdown too: both return nil.
func (a *app) serve(ctx context.Context, cfg serveConfig) (err error) {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
	var undo undoStack
	defer func() {
		timeout := cmp.Or(a.shutdownTimeout, shutdownTimeout)
		uerr := undo.run(timeout)
		if err == nil && uerr == nil {
			logger.Info("stopped")
		}
		err = errors.Join(err, uerr)
	}()

	// The listeners come first: a port in use fails at once, before the
	// data directory is touched.
	grpcLis, err := listen(cfg.Listen, "--listen")
	if err != nil {
		return err
	}
	undo.push("", func() error { grpcLis.Close(); return nil }) // after grpc.Server.Stop, a no-op
	httpLis, err := listen(cfg.HTTP, "--http")
	if err != nil {
		return err
	}

	ready := &readiness{reason: "starting"}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	httpSrv := &http.Server{Handler: httpMux(reg, ready), ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		if err := httpSrv.Serve(httpLis); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server failed", "addr", httpLis.Addr(), "err", err)
		}
	}()
	logger.Info("http listening", "addr", httpLis.Addr().String())
	undo.push("stop the HTTP server", func() error {
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
		dir := filepath.Join(cfg.Data, "etcd")
		etcd, err := meta.StartEtcd(ctx, dir, logger)
		if err != nil {
			return startErr(ctx, fmt.Errorf("start the embedded etcd in %s: %w", dir, err))
		}
		undo.push("stop the embedded etcd", etcd.Close)
		endpoints = etcd.Endpoints()
		logger.Info("etcd embedded", "dir", dir, "endpoints", strings.Join(endpoints, ","))
	} else {
		logger.Info("etcd external", "endpoints", strings.Join(endpoints, ","))
	}
	etcdCli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: etcdTimeout, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd client for %s: %w", strings.Join(endpoints, ","), err)
	}
	undo.push("", func() error { etcdCli.Close(); return nil })
	probe := func(ctx context.Context) error {
		_, err := etcdCli.Get(ctx, cfg.EtcdRoot+"readyz", clientv3.WithCountOnly())
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	err = probe(pctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return startErr(ctx, err)
		}
		return fmt.Errorf("etcd at %s did not answer within %s (%v): is it running, and reachable from here? check --etcd (or $TERN_ETCD, or etcd: in the config file)",
			strings.Join(endpoints, ","), etcdTimeout, err)
	}

	var node *clusterNode
	var clusterOpt tern.Cluster
	if cfg.NodeID != "" {
		addr := cmp.Or(cfg.Advertise, dialAddr(grpcLis.Addr()))
		if node, err = startNode(ctx, cfg, etcdCli, addr, logger); err != nil {
			return startErr(ctx, err)
		}
		undo.push("leave the cluster", node.close)
		clusterOpt = node.set
		logger.Info("cluster node", "id", cfg.NodeID, "addr", addr, "ttl", cfg.NodeTTL)
	}

	c, err := tern.Open(ctx, tern.Options{
		Dir: cfg.Data, Etcd: endpoints, EtcdRoot: cfg.EtcdRoot, Logger: logger,
		Storage: tern.StorageOptions{
			URL: cfg.Storage, AccessKey: cfg.StorageAccessKey, SecretKey: cfg.StorageSecretKey, SSECKey: cfg.ssecKey,
		},
		DefaultMode: tern.Mode(cfg.Mode),
		Cluster:     clusterOpt,
	})
	if err != nil {
		return startErr(ctx, fmt.Errorf("open data directory %s: %w", cfg.Data, err))
	}
	undo.push("close data directory "+cfg.Data, c.Close) // syncs the logs, commits the cursors, releases the writers

	sopts := server.Options{Logger: logger, Registerer: reg}
	gopts := grpcopts.Server()
	if node != nil {
		sopts.Cluster = node.node
		gopts = append(gopts, replica.ServerOptions()...)
	}
	srv := server.New(c, sopts)
	gs := grpc.NewServer(gopts...)
	srv.Register(gs)
	lis := grpcLis
	if node != nil {
		rs := replica.NewServer(node.store)
		rs.Register(gs)
		lis = rs.Listen(grpcLis) // the add streams come to the same port
		undo.push("", rs.Close)  // after the gRPC service has stopped
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	undo.push("stop the gRPC service", func() error { return stopGRPC(gs, srv, logger) })
	addr := grpcLis.Addr().String()
	logger.Info("grpc listening", "addr", addr, "data", cfg.Data, "storage", storageForLog(cfg.Storage), "default_mode", cmp.Or(cfg.Mode, string(tern.ModeLocal)))
	ready.set("", probe)
	fmt.Fprintf(a.stderr, "tern: serving on %s (metrics and health on http://%s); try: tern --server %s log create hello\n",
		addr, httpLis.Addr(), dialAddr(grpcLis.Addr()))

	var lost <-chan struct{} // stays nil outside a cluster
	if node != nil {
		lost = node.node.Lost()
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "reason", "interrupted")
	case <-lost:
		// Other nodes have taken its logs over; it can serve none.
		logger.Error("this node lost its cluster lease; shutting down so that it can be restarted")
		err = fmt.Errorf("node %s lost its cluster lease (etcd unreachable for longer than --node-ttl %s): restart it", cfg.NodeID, cfg.NodeTTL)
	case err = <-served:
		logger.Error("grpc server failed; shutting down", "err", err)
		err = fmt.Errorf("serve gRPC on %s: %w", addr, err)
	}
	ready.set("shutting down", nil)
	return err
}

// undoStack is what serve has started, to be stopped in reverse order.
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
func stopGRPC(gs *grpc.Server, srv *server.Server, logger *slog.Logger) error {
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

// startErr is err, or nil if ctx ended: an interrupted start-up stops the
// server as asked.
func startErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
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

// dialAddr is an address to reach a listener at: its own, or loopback for a
// listener on every interface.
func dialAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return a.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port))
}

// httpMux serves the metrics of reg, the health checks and pprof.
func httpMux(reg *prometheus.Registry, ready http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.Handle("/readyz", ready)
	mux.HandleFunc("/debug/pprof/", pprof.Index) // and the profiles by name: heap, goroutine, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
