package meta

// The embedded etcd
//
// StartEtcd runs a single-member etcd inside the process, listening on
// unix sockets in its data directory, or on loopback ports when the
// directory's path is too long for a socket (embed_listen.go). Its data
// directory is the dir it is given, mode 0700; besides etcd's own member/
// directory, dir holds Tern's files:
//
//	LOCK              flock(2)ed while the etcd runs, so that a second
//	                  start on dir fails at once with ErrLocked (etcd
//	                  itself would wait for ever on its database's lock)
//	client.sock       the sockets of etcd's clients and of its peer port,
//	peer.sock         mode 0600; a start replaces those a killed process
//	                  left, a stop removes them
//	tern-etcd-ports   only when the etcd listens on ports: "<client port>
//	                  <peer port>\n", the ports of the last start, asked
//	                  for again by the next start on dir, so that clients
//	                  that outlive a restart find the server again; if
//	                  either is taken, the start takes two free ports and
//	                  rewrites the file
//
// etcd keeps the member's peer URL in its data, but a single member never
// dials a peer, so a start on other sockets or ports than the data
// remembers (those of an older Tern) works and keeps the data.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ternwal/tern/internal/vfs"
)

// portsFile is the name, in the data directory, of the file described above.
const portsFile = "tern-etcd-ports"

// startAttempts bounds the starts on other ports when a port is taken: a
// saved one, or one picked as free and taken before etcd listened on it.
const startAttempts = 3

// Defaults of EmbedOptions.
const (
	// DefaultEtcdQuotaBytes is the embedded etcd's backend quota: etcd's
	// own default, set explicitly so that it is known and shown.
	DefaultEtcdQuotaBytes = 2 << 30
	// DefaultEtcdRetention is how much history the embedded etcd keeps:
	// every revision older is compacted away, within another as long.
	// Tern reads no old revision except to resume a watch, which starts
	// over from the present when its revision is gone.
	DefaultEtcdRetention = 5 * time.Minute
	// DefaultEtcdDefragFreeBytes is how much of the database file must be
	// free (DbSize - DbSizeInUse), and at least a quarter of the file,
	// before the embedded etcd is defragmented.
	DefaultEtcdDefragFreeBytes = 64 << 20
	// DefaultEtcdMaintainInterval is how often the embedded etcd's size
	// and alarms are looked at.
	DefaultEtcdMaintainInterval = time.Minute
)

// EmbedOptions configures StartEtcdWith. The zero value is the defaults.
type EmbedOptions struct {
	// Logger gets the server's start and stop, its maintenance and etcd's
	// own error logs; default discard.
	Logger *slog.Logger
	// QuotaBytes is etcd's backend quota: once its database file reaches
	// it, etcd raises the NOSPACE alarm and takes no more writes (the
	// store's writes fail with rpcerr.ErrNoSpace) until space is freed
	// and the alarm disarmed. Default DefaultEtcdQuotaBytes.
	QuotaBytes int64
	// Retention is the history the maintenance loop's compaction keeps
	// (to within a MaintainInterval); default DefaultEtcdRetention.
	Retention time.Duration
	// DefragFreeBytes: the database is defragmented when this much of its
	// file is free, and at least a quarter of it; default
	// DefaultEtcdDefragFreeBytes.
	DefragFreeBytes int64
	// MaintainInterval is how often the database's size and alarms are
	// looked at; default DefaultEtcdMaintainInterval.
	MaintainInterval time.Duration
}

func (o *EmbedOptions) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.QuotaBytes <= 0 {
		o.QuotaBytes = DefaultEtcdQuotaBytes
	}
	if o.Retention <= 0 {
		o.Retention = DefaultEtcdRetention
	}
	if o.DefragFreeBytes <= 0 {
		o.DefragFreeBytes = DefaultEtcdDefragFreeBytes
	}
	if o.MaintainInterval <= 0 {
		o.MaintainInterval = DefaultEtcdMaintainInterval
	}
}

// EmbeddedEtcd is an etcd server running in this process, for `tern serve`
// and for tests. Its methods are safe for concurrent use.
type EmbeddedEtcd struct {
	lock      io.Closer // dir/LOCK, held while etcd runs
	etcd      *embed.Etcd
	endpoints []string
	logger    *slog.Logger
	closing   *atomic.Bool // silences the errors etcd logs while it stops
	stopMaint func()       // stops the maintenance loop and waits for it
	closeOnce sync.Once
}

// StartEtcd is StartEtcdWith with the default options and logger.
func StartEtcd(ctx context.Context, dir string, logger *slog.Logger) (*EmbeddedEtcd, error) {
	return StartEtcdWith(ctx, dir, EmbedOptions{Logger: logger})
}

// StartEtcdWith starts a single-member etcd (go.etcd.io/etcd/server/v3/embed)
// with its data under dir, listening on unix sockets in dir (on loopback
// ports if dir's path is too long for a socket: a warning says so), with
// its HTTP/JSON gateway off, and returns once it serves clients. dir is
// created if it does not exist, and made mode 0700 if it is open to other
// users; a dir that an earlier start used keeps its data and its sockets'
// paths (or, if they are free, its ports).
//
// The etcd compacts its history (opts.Retention), is defragmented when that
// frees enough of its file, and has the backend quota opts.QuotaBytes; a
// NOSPACE alarm is disarmed once a defragmentation has brought the file
// back under the quota (embed_maintain.go).
//
// A database that cannot be opened or fails bbolt's check, and a WAL etcd
// cannot read, fail the start with an error that names the file and says
// what to do (ErrEtcdDamaged), not with etcd's panic or exit. A start that
// takes longer than a few seconds (etcd repairing its WAL, replaying a long
// one) is logged while it lasts.
//
// If ctx ends before the server is ready, StartEtcdWith stops it and
// returns ctx's error.
func StartEtcdWith(ctx context.Context, dir string, opts EmbedOptions) (*EmbeddedEtcd, error) {
	opts.setDefaults()
	logger := opts.Logger
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("meta: start etcd: %w: check that the directory %s can be created and written by this user", err, dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("meta: start etcd: %w", err)
	}
	if err := keepPrivate(dir, logger); err != nil {
		return nil, err
	}
	// etcd itself would wait for ever on its database's lock: fail at once.
	lock, err := vfs.OS.Lock(filepath.Join(dir, "LOCK"))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("meta: start etcd in %s: %w", dir, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("meta: start etcd: %w: check that the directory %s can be written by this user", err, dir)
	}
	started := false
	defer func() {
		if !started {
			lock.Close()
		}
	}()
	if err := checkEtcdDir(dir); err != nil {
		return nil, err
	}
	closing := new(atomic.Bool)
	defer logSlowStart(dir, logger)()
	start := func(u etcdURLs) (*embed.Etcd, error) {
		last := new(lastFatal)
		return startEmbed(dir, etcdConfig(dir, u, opts, closing, last), last)
	}
	var (
		e     *embed.Etcd
		urls  etcdURLs
		ports [2]int // to save once etcd serves, on ports other than the saved ones
	)
	if urls, err = socketURLs(abs); err == nil {
		if e, err = start(urls); err != nil {
			return nil, fmt.Errorf("meta: start etcd in %s: %w", dir, err)
		}
	} else {
		logger.Warn("meta: etcd listens on loopback ports, which every local user can reach, not on unix sockets in its directory: give it a directory with a shorter path (tern serve --etcd-dir)",
			"dir", dir, "reason", err.Error())
		if e, urls, ports, err = startOnPorts(dir, start, logger); err != nil {
			return nil, err
		}
	}
	stop := func() {
		closing.Store(true)
		e.Close()
	}
	if err := chmodSockets(urls); err != nil {
		stop()
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		stop()
		return nil, fmt.Errorf("meta: start etcd in %s: %w", dir, err)
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
	// etcd syncs the directory of its WAL files, but not the directories
	// above it, nor the one of its database: a power loss could take the
	// names of its data. It has made them all by now, and acknowledged
	// nothing yet.
	for _, d := range []string{filepath.Dir(dir), dir, filepath.Join(dir, "member"), filepath.Join(dir, "member", "snap")} {
		if err := vfs.OS.SyncDir(d); err != nil {
			stop()
			return nil, fmt.Errorf("meta: start etcd in %s: %w", dir, err)
		}
	}
	switch {
	case urls.socket:
		// The ports of a start before sockets (an older Tern) are no
		// longer where the etcd is.
		if err := os.Remove(filepath.Join(dir, portsFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			stop()
			return nil, fmt.Errorf("meta: start etcd in %s: %w", dir, err)
		}
	case ports != [2]int{}:
		if err := savePorts(dir, ports[0], ports[1]); err != nil {
			stop()
			return nil, err
		}
	}
	stopMaint, err := startMaintenance(urls.endpoints, opts)
	if err != nil {
		stop()
		return nil, fmt.Errorf("meta: start etcd in %s: %w", dir, err)
	}
	started = true
	ee := &EmbeddedEtcd{
		lock:      lock,
		etcd:      e,
		endpoints: urls.endpoints,
		logger:    logger,
		closing:   closing,
		stopMaint: stopMaint,
	}
	logger.Info("meta: etcd started", "dir", dir, "endpoints", ee.endpoints,
		"quota", opts.QuotaBytes, "retention", opts.Retention)
	return ee, nil
}

// Endpoints returns the client endpoints, for EtcdOptions and clientv3,
// which dial them as they are: "unix:///DIR/client.sock", or in the
// fallback on ports "127.0.0.1:PORT".
func (e *EmbeddedEtcd) Endpoints() []string {
	return append([]string(nil), e.endpoints...)
}

// Close stops the server and waits until it has stopped and released its
// ports and data directory. Clients still connected see it as gone. Close
// is idempotent and always returns nil; the error is there for io.Closer.
func (e *EmbeddedEtcd) Close() error {
	e.closeOnce.Do(func() {
		e.stopMaint()
		e.closing.Store(true)
		e.etcd.Close()
		<-e.etcd.Server.StopNotify()
		e.lock.Close()
		e.logger.Info("meta: etcd stopped", "endpoints", e.endpoints)
	})
	return nil
}

// etcdConfig configures a single member named "tern" with its data in dir,
// on the URLs u, with etcd's HTTP/JSON gateway off.
func etcdConfig(dir string, u etcdURLs, opts EmbedOptions, closing *atomic.Bool, last *lastFatal) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = "tern"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{u.client}
	cfg.AdvertiseClientUrls = []url.URL{u.advertiseClient}
	cfg.ListenPeerUrls = []url.URL{u.peer}
	cfg.AdvertisePeerUrls = []url.URL{u.advertisePeer}
	// The gateway serves etcd's whole KV API as HTTP/JSON (/v3/kv/...),
	// where a curl can delete a log's record; Tern's clients speak gRPC.
	cfg.EnableGRPCGateway = false
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// A single member elects itself once, at start, after a randomized
	// election timeout; it never campaigns again, as it has no peers to lose.
	// A tenth of etcd's defaults (100ms, 1s) makes starts ten times faster.
	// It lowers etcd's minimum lease TTL from 2s to 1s.
	cfg.TickMs, cfg.ElectionMs = 10, 100
	// The maintenance loop compacts the history, not etcd's periodic
	// compactor: the two would run beside the loop's defragmentations, and
	// on a busy machine etcd's was seen to stop compacting (embed_maintain.go).
	cfg.QuotaBackendBytes = opts.QuotaBytes
	cfg.LogLevel = "error"
	// etcd's fatal errors (a WAL it cannot read, say) panic rather than
	// exit, so that startEmbed can turn them into an error.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(&slogCore{logger: opts.Logger, closing: closing, fatal: last},
		zap.WithFatalHook(zapcore.WriteThenPanic)))
	return cfg
}

// slogCore passes etcd's zap entries of level error and above to a slog
// logger, and the few of lower levels that an operator wants to see (the
// repair of a WAL), except while the server stops: etcd then logs its
// closed listeners as errors.
type slogCore struct {
	logger  *slog.Logger
	closing *atomic.Bool
	fatal   *lastFatal // keeps the fields of a fatal entry
	fields  []zapcore.Field
}

// Enabled lets Info entries through to Check, which picks the notable ones.
func (c *slogCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.InfoLevel && !c.closing.Load()
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{logger: c.logger, closing: c.closing, fatal: c.fatal, fields: append(c.fields[:len(c.fields):len(c.fields)], fields...)}
}

func (c *slogCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	_, notable := notable[ent.Message]
	if c.Enabled(ent.Level) && (ent.Level >= zapcore.ErrorLevel || notable) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *slogCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(c.fields[:len(c.fields):len(c.fields)], fields...) {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2+2*len(enc.Fields))
	attrs = append(attrs, "component", "etcd")
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		attrs = append(attrs, k, enc.Fields[k])
	}
	level := slog.LevelError
	if l, ok := notable[ent.Message]; ok {
		level = l
	}
	if _, ok := harmless[ent.Message]; ok {
		level = slog.LevelDebug
	}
	c.logger.Log(context.Background(), level, ent.Message, attrs...)
	if ent.Level >= zapcore.DPanicLevel || ent.Message == "bootstrap failed" {
		kvs := make([]string, 0, len(attrs)/2)
		for i := 2; i+1 < len(attrs); i += 2 {
			kvs = append(kvs, fmt.Sprintf("%v=%v", attrs[i], attrs[i+1]))
		}
		c.fatal.set(strings.Join(kvs, " "))
	}
	return nil
}

// notable are the messages etcd logs below error that are passed on, at
// the level given: the repair of a damaged WAL, which can hold up the start
// for a while.
var notable = map[string]slog.Level{
	"repairing":          slog.LevelWarn,
	"repaired":           slog.LevelWarn,
	"repaired WAL":       slog.LevelWarn,
	"failed to repair":   slog.LevelError,
	"failed to open WAL": slog.LevelError,
}

// harmless are the messages etcd logs as errors that are not: a fresh
// single member logs the first at every start, before its first term.
var harmless = map[string]struct{}{
	"failed to update storage version": {},
}

func (c *slogCore) Sync() error { return nil }
