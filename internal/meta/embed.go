package meta

// The embedded etcd
//
// StartEtcd runs a single-member etcd inside the process, listening on
// loopback only. Its data directory is the dir it is given; besides etcd's
// own member/ directory, dir holds two files of Tern's:
//
//	LOCK              flock(2)ed while the etcd runs, so that a second
//	                  start on dir fails at once with ErrLocked (etcd
//	                  itself would wait for ever on its database's lock)
//	tern-etcd-ports   "<client port> <peer port>\n": the ports of the last
//	                  start, asked for again by the next start on dir, so
//	                  that clients that outlive a restart find the server
//	                  again; if either is taken, the start takes two free
//	                  ports and rewrites the file
//
// etcd keeps the member's peer URL in its data, but a single member never
// dials a peer, so a start on other ports than the data remembers works and
// keeps the data.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

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

// EmbeddedEtcd is an etcd server running in this process, for `tern serve`
// and for tests. Its methods are safe for concurrent use.
type EmbeddedEtcd struct {
	lock      io.Closer // dir/LOCK, held while etcd runs
	etcd      *embed.Etcd
	endpoints []string
	logger    *slog.Logger
	closing   *atomic.Bool // silences the errors etcd logs while it stops
	closeOnce sync.Once
}

// StartEtcd starts a single-member etcd (go.etcd.io/etcd/server/v3/embed) with
// its data under dir, listening on loopback only, and returns once it serves
// clients. dir is created if it does not exist; a dir that an earlier
// StartEtcd used keeps its data and, if they are free, its ports.
//
// logger, which may be nil, gets the server's start and stop and etcd's own
// error logs. If ctx ends before the server is ready, StartEtcd stops it and
// returns ctx's error.
func StartEtcd(ctx context.Context, dir string, logger *slog.Logger) (*EmbeddedEtcd, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("meta: start etcd: %w", err)
	}
	// etcd itself would wait for ever on its database's lock: fail at once.
	lock, err := vfs.OS.Lock(filepath.Join(dir, "LOCK"))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("meta: start etcd in %s: %w", dir, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("meta: start etcd: %w", err)
	}
	started := false
	defer func() {
		if !started {
			lock.Close()
		}
	}()
	client, peer, err := loadPorts(dir)
	if err != nil {
		return nil, err
	}
	saved := client
	closing := new(atomic.Bool)
	var e *embed.Etcd
	for range startAttempts {
		if client == 0 {
			if client, peer, err = freePorts(); err != nil {
				return nil, fmt.Errorf("meta: start etcd: %w", err)
			}
		}
		e, err = embed.StartEtcd(etcdConfig(dir, client, peer, logger, closing))
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		if client == saved {
			logger.Warn("meta: etcd ports of the last start are taken, taking new ones", "client", client, "peer", peer)
		}
		client, peer = 0, 0 // a port picked as free was taken since
	}
	if err != nil {
		return nil, fmt.Errorf("meta: start etcd in %s: %w", dir, err)
	}
	stop := func() {
		closing.Store(true)
		e.Close()
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
	if client != saved {
		if err := savePorts(dir, client, peer); err != nil {
			stop()
			return nil, err
		}
	}
	started = true
	ee := &EmbeddedEtcd{
		lock:      lock,
		etcd:      e,
		endpoints: []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(client))},
		logger:    logger,
		closing:   closing,
	}
	logger.Info("meta: etcd started", "dir", dir, "endpoints", ee.endpoints)
	return ee, nil
}

// Endpoints returns the client endpoints, as host:port, for EtcdOptions.
func (e *EmbeddedEtcd) Endpoints() []string {
	return append([]string(nil), e.endpoints...)
}

// Close stops the server and waits until it has stopped and released its
// ports and data directory. Clients still connected see it as gone. Close
// is idempotent and always returns nil; the error is there for io.Closer.
func (e *EmbeddedEtcd) Close() error {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.etcd.Close()
		<-e.etcd.Server.StopNotify()
		e.lock.Close()
		e.logger.Info("meta: etcd stopped", "endpoints", e.endpoints)
	})
	return nil
}

// etcdConfig configures a single member named "tern" with its data in dir,
// on the given loopback ports.
func etcdConfig(dir string, client, peer int, logger *slog.Logger, closing *atomic.Bool) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = "tern"
	cfg.Dir = dir
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(client))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(peer))}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// A single member elects itself once, at start, after a randomized
	// election timeout; it never campaigns again, as it has no peers to lose.
	// A tenth of etcd's defaults (100ms, 1s) makes starts ten times faster.
	// It lowers etcd's minimum lease TTL from 2s to 1s.
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(&slogCore{logger: logger, closing: closing}))
	return cfg
}

// loadPorts reads the ports file in dir; it returns zeros if there is none.
func loadPorts(dir string) (client, peer int, err error) {
	path := filepath.Join(dir, portsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("meta: start etcd: %w", err)
	}
	_, err = fmt.Sscanf(string(b), "%d %d\n", &client, &peer)
	if err != nil || !validPort(client) || !validPort(peer) {
		return 0, 0, fmt.Errorf("meta: start etcd: %s: want \"<client port> <peer port>\", have %q", path, b)
	}
	return client, peer, nil
}

func validPort(p int) bool { return p > 0 && p < 1<<16 }

// savePorts replaces the ports file in dir.
func savePorts(dir string, client, peer int) error {
	path := filepath.Join(dir, portsFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d\n", client, peer), 0o600); err != nil {
		return fmt.Errorf("meta: start etcd: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("meta: start etcd: %w", err)
	}
	return nil
}

// freePorts returns two loopback ports that were free a moment ago.
func freePorts() (client, peer int, err error) {
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, err
		}
		defer l.Close() // both open at once, so they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}

// slogCore passes etcd's zap entries of level error and above to a slog
// logger, except while the server stops: etcd then logs its closed listeners
// as errors.
type slogCore struct {
	logger  *slog.Logger
	closing *atomic.Bool
	fields  []zapcore.Field
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.ErrorLevel && !c.closing.Load()
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{logger: c.logger, closing: c.closing, fields: append(c.fields[:len(c.fields):len(c.fields)], fields...)}
}

func (c *slogCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
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
	if _, ok := harmless[ent.Message]; ok {
		level = slog.LevelDebug
	}
	c.logger.Log(context.Background(), level, ent.Message, attrs...)
	return nil
}

// harmless are the messages etcd logs as errors that are not: a fresh
// single member logs the first at every start, before its first term.
var harmless = map[string]struct{}{
	"failed to update storage version": {},
}

func (c *slogCore) Sync() error { return nil }
