package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/certs"
	"github.com/ternwal/tern/internal/server"
	"github.com/ternwal/tern/internal/units"
)

func (a *app) serveCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the logs of a data directory over gRPC",
		Long: `Serve the logs of a data directory over gRPC, for the tern commands (with
--server) and for clients in any language.

The metadata goes to an etcd cluster (--etcd), or, without one, to an etcd
embedded in this process, with its data in the etcd subdirectory of --data
(or --etcd-dir), which compacts its history, is defragmented when that frees
space, and has the backend quota --etcd-quota. An HTTP listener (--http)
serves Prometheus metrics on /metrics, /healthz (200 while the process runs),
/readyz (200 once it serves, the metadata store answers and has no alarm
raised, 503 otherwise) and, with --pprof, pprof on /debug/pprof/.

Security (docs/security.md): --tls-cert and --tls-key serve TLS on every
listener, and --tls-client-ca asks for client certificates (mTLS); --auth
names a file of principals (bearer-token hashes made by "tern auth
hash-token", or certificate subjects), their grants of read, append,
subscribe and admin on log-name prefixes, and their quotas; every call it
does not grant is refused and audited. The server refuses to listen beyond
loopback (--listen, --http) without TLS and --auth, unless --insecure says
so. SIGHUP reloads the certificates (also reloaded when their files change)
and the auth file.

Logs are local (segment files under --data) or, with --storage, in an object
store: an S3 bucket or a directory standing in for one. An s3:// URL speaks
HTTPS unless it says tls=false, as here for a local MinIO:

  tern serve --storage 's3://tern/wal?endpoint=127.0.0.1:9000&tls=false' --mode object

With --node-id the server is a node of a cluster: nodes that share an etcd
cluster (--etcd) and an object store (--storage) serve the logs between
them, one node per log, and move a dead node's logs to the others after
--node-ttl. Clients may call any node: it sends them to the one serving the
log. Quorum logs (--mode quorum) keep their open segments on the nodes.

  tern serve --node-id n1 --etcd 10.0.0.9:2379 --storage 's3://tern/wal?endpoint=10.0.0.9:9000' --listen :7070 --advertise 10.0.0.1:7070 \
    --tls-cert n1.pem --tls-key n1-key.pem --tls-client-ca cluster-ca.pem --auth auth.yaml

--mode sets the mode of the logs created without one. The S3 credentials are
$AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN, or
storage_access_key and storage_secret_key ($TERN_STORAGE_ACCESS_KEY,
$TERN_STORAGE_SECRET_KEY), which have no flags: a command line is visible to
every user.

Settings come from, weakest first: the defaults, a YAML file (--config), the
environment ($TERN_DATA, $TERN_LISTEN, $TERN_HTTP, $TERN_ETCD, $TERN_ETCD_ROOT,
$TERN_ETCD_QUOTA, $TERN_LOG_LEVEL, $TERN_STORAGE, $TERN_MODE, $TERN_STORAGE_ACCESS_KEY,
$TERN_STORAGE_SECRET_KEY, $TERN_STORAGE_SSEC_KEY_FILE, $TERN_NODE_ID,
$TERN_ADVERTISE, $TERN_NODE_TTL, $TERN_DISK_RESERVE, $TERN_ETCD_DIR,
$TERN_MEMORY_LIMIT; the limits' $TERN_MAX_LOGS,
$TERN_MAX_LOGS_PER_PREFIX, $TERN_MAX_SUBSCRIPTIONS_PER_LOG,
$TERN_MAX_STREAMS_PER_CONNECTION, $TERN_IDLE_CONNECTION_TIMEOUT,
$TERN_MAX_REQUEST_BYTES, $TERN_MAX_STREAMS, $TERN_LOG_IDLE_TIMEOUT;
$TERN_REUSE_SEGMENTS; the
security settings' $TERN_TLS_CERT, $TERN_TLS_KEY, $TERN_TLS_CLIENT_CA,
$TERN_AUTH, $TERN_INSECURE, $TERN_PPROF) and the flags.
--print-config prints the result in the file's format, leaving out
storage_secret_key (a comment says when it is set):

  advertise: ""
  auth: ""
  data: ./tern-data
  disk_reserve: auto
  etcd: []
  etcd_dir: ""
  etcd_quota: 2GiB
  etcd_root: /tern/
  http: 127.0.0.1:7071
  idle_connection_timeout: 15m
  insecure: false
  listen: 127.0.0.1:7070
  log_idle_timeout: 1m
  log_level: info
  max_logs: 1000000
  max_logs_per_prefix: 100000
  max_request_bytes: 64MiB
  max_streams: auto
  max_streams_per_connection: 1000
  max_subscriptions_per_log: 1000
  memory_limit: ""
  mode: local
  node_id: ""
  node_ttl: 10s
  pprof: false
  reuse_segments: 2
  storage: ""
  storage_access_key: ""
  storage_ssec_key_file: ""
  tls_cert: ""
  tls_client_ca: ""
  tls_key: ""
  zero_ahead: 1MiB

Appends to local logs leave --disk-reserve free on the data directory's disk
(auto: 256MiB, or a tenth of the filesystem if less), so that the embedded
etcd and the subscriptions' cursors keep room: when the disk is full, appends
fail with RESOURCE_EXHAUSTED and /readyz says so, reads and subscriptions go
on, and appends are taken again by themselves once space is freed. Only the
logs keep off the reserve: to keep the embedded etcd safe from a disk that
something else fills, put it on another disk with --etcd-dir.

SIGINT or SIGTERM stops the server gracefully: it stops taking calls, ends
the open streams, syncs the logs and commits the subscriptions' cursors. A
second signal stops it at once.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
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

// serve runs the server until ctx ends, then shuts it down. An interrupted
// start-up is a shutdown too: both return nil.
func (a *app) serve(ctx context.Context, cfg serveConfig) error {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return err
	}
	quota, err := cfg.etcdQuotaBytes()
	if err != nil {
		return err
	}
	handler, err := newLogHandler(a.stderr, cfg.LogFormat, level)
	if err != nil {
		return err
	}
	logger := slog.New(handler)
	limits, err := cfg.serveLimits.server()
	if err != nil {
		return err
	}
	scfg := server.Config{
		Data: cfg.Data, Listen: cfg.Listen, HTTP: cfg.HTTP, Etcd: cfg.Etcd, EtcdRoot: cfg.EtcdRoot,
		EtcdQuotaBytes: quota,
		Storage: tern.StorageOptions{
			URL: cfg.Storage, AccessKey: cfg.StorageAccessKey, SecretKey: cfg.StorageSecretKey, SSECKey: cfg.ssecKey,
		},
		DefaultMode: tern.Mode(cfg.Mode),
		NodeID:      cfg.NodeID, Advertise: cfg.Advertise,
		Logger:          logger,
		Limits:          limits,
		ShutdownTimeout: a.shutdownTimeout,

		EtcdDir:          cfg.EtcdDir,
		MemoryLimitBytes: cfg.memoryLimitBytes,

		TLS:      certs.Files{Cert: cfg.TLSCert, Key: cfg.TLSKey, ClientCA: cfg.TLSClientCA},
		AuthFile: cfg.Auth,
		Insecure: cfg.Insecure,
		Pprof:    cfg.Pprof,
	}
	if scfg.DiskReserveBytes, err = cfg.diskReserveBytes(); err != nil {
		return err
	}
	if cfg.NodeID != "" {
		if scfg.NodeTTL, err = units.ParseDuration(cfg.NodeTTL); err != nil {
			return err
		}
	}
	s, err := server.Start(ctx, scfg)
	if err != nil {
		if ctx.Err() != nil {
			logger.Info("stopped")
			return nil // interrupted
		}
		return err
	}
	addr := server.DialAddr(s.Addr())
	scheme, flags, token := "http", "", ""
	if scfg.TLS.Cert != "" {
		scheme, flags = "https", " --tls-ca CA.pem"
	}
	if scfg.AuthFile != "" {
		token = ", with $TERN_TOKEN set"
	}
	fmt.Fprintf(a.stderr, "tern: serving on %s (metrics and health on %s://%s); try: tern --server %s%s log create hello%s\n",
		s.Addr(), scheme, s.HTTPAddr(), addr, flags, token)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	stopped := make(chan struct{})
	reloads := make(chan struct{})
	go func() {
		defer close(reloads)
		for {
			select {
			case <-hup:
				s.Reload() // logs what it reloaded, or why not
			case <-stopped:
				return
			}
		}
	}()
	err = s.Wait(ctx)
	signal.Stop(hup)
	close(stopped)
	<-reloads // no reload runs while the server closes
	return errors.Join(err, s.Close())
}
