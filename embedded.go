package tern

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/vfs"
	"github.com/ternwal/tern/internal/wal"
)

// embeddedClient keeps logs in a data directory of this process. It is safe
// for concurrent use.
type embeddedClient struct {
	opts   Options
	fs     vfs.FS
	meta   meta.Store
	bucket blob.Bucket // the object store, or nil
	disk   *wal.Disk   // the data directory's disk: its reserve, and whether it is full
	// install is the metadata's installation, which owns the object
	// store's prefix (install.go).
	install meta.Installation

	damaged damageSet           // the logs that opened degraded (damage.go); has its own lock
	cache   *objlog.CacheBudget // shared by the object logs' caches; nil for no shared bound

	mu     sync.Mutex
	logs   map[string]weak.Pointer[embeddedLog] // the logs in use, by name (embedded_idle.go)
	counts map[string]logCount                  // recent counts of logs by name prefix, for the limits
	closed bool

	openMu       sync.Mutex                // guards open and noCompaction; taken last
	open         map[*embeddedLog]struct{} // the logs whose engines are open
	noCompaction map[uint64]bool           // object logs, by ID, whose segments need no compaction (embedded_retain.go)
	stop         context.Context           // canceled by Close: ends the retention loop and its work
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

// DefaultReuseSegments is Options.ReuseSegments when it is zero.
const DefaultReuseSegments = wal.DefaultReuseSegments

// DefaultZeroAheadBytes is Options.ZeroAheadBytes when it is zero.
const DefaultZeroAheadBytes = vfs.DefaultAhead

// openEmbedded opens (creating if needed) the data directory opts.Dir. It
// fails with ErrLocked if another process has it open.
func openEmbedded(ctx context.Context, opts Options) (*embeddedClient, error) {
	if opts.CommitInterval <= 0 {
		opts.CommitInterval = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RetentionInterval <= 0 {
		opts.RetentionInterval = time.Minute
	}
	if opts.LogIdleTimeout <= 0 {
		opts.LogIdleTimeout = DefaultLogIdleTimeout
	}
	opts.MaxLogs = limitOrDefault(opts.MaxLogs, DefaultMaxLogs)
	opts.MaxLogsPerPrefix = limitOrDefault(opts.MaxLogsPerPrefix, DefaultMaxLogsPerPrefix)
	opts.MaxSubscriptionsPerLog = limitOrDefault(opts.MaxSubscriptionsPerLog, DefaultMaxSubscriptionsPerLog)
	fs := opts.fs
	if fs == nil {
		fs = vfs.OS
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The metadata is a bbolt file or etcd, which do their own I/O; only the
	// segments go through fs.
	if err := vfs.MkdirAllSync(vfs.OS, opts.Dir); err != nil {
		return nil, fmt.Errorf("tern: create data directory: %w", err)
	}
	if _, err := ParseMode(string(opts.DefaultMode)); err != nil {
		return nil, err
	}
	if opts.DefaultMode == ModeObject && opts.Storage.URL == "" {
		return nil, fmt.Errorf("%w: the default mode is object, and Options.Storage names no object store", ErrInvalid)
	}
	bucket, err := opts.Storage.open(ctx)
	if err != nil {
		return nil, err
	}
	bucket = opts.Observer.Bucket(bucket)
	store, err := openMeta(ctx, opts)
	if err != nil {
		if bucket != nil {
			bucket.Close()
		}
		return nil, err
	}
	c := &embeddedClient{opts: opts, fs: fs, meta: store, bucket: bucket, logs: map[string]weak.Pointer[embeddedLog]{},
		counts: map[string]logCount{}, open: map[*embeddedLog]struct{}{}, noCompaction: map[uint64]bool{},
		disk: wal.NewDisk(fs, opts.Dir, opts.DiskReserveBytes, opts.Logger)}
	c.disk.ObserveSync(opts.Observer.Sync)
	if c.install, err = installation(ctx, bucket, store, opts); err != nil {
		c.closeStores()
		return nil, err
	}
	if opts.ObjectCacheBytes > 0 {
		c.cache = objlog.NewCacheBudget(opts.ObjectCacheBytes)
	}
	c.stop, c.cancel = context.WithCancel(context.Background())
	live, err := c.removeOrphans(ctx)
	if err != nil {
		c.closeStores()
		return nil, err
	}
	c.wg.Add(3)
	go c.retainLoop()
	go c.idleLoop()
	go c.recoverUnclean(live)
	return c, nil
}

// etcdMark is the file that says a data directory's metadata is in etcd:
// opening it with the bbolt file would start an empty, second metadata
// store whose log IDs collide with etcd's.
const etcdMark = "meta.etcd"

// openMeta locks the data directory and opens the metadata store opts ask
// for: etcd, or the bbolt file in the data directory. A directory whose
// metadata is in the other kind of store is refused.
func openMeta(ctx context.Context, opts Options) (_ meta.Store, err error) {
	lock, err := vfs.OS.Lock(filepath.Join(opts.Dir, "LOCK"))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s (stop the other process, or use another directory; if it is tern serve, use --server)", ErrLocked, opts.Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("tern: lock data directory: %w", err)
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	bolt, etcd := filepath.Join(opts.Dir, "meta.db"), filepath.Join(opts.Dir, etcdMark)
	exists := func(path string) bool { _, err := os.Stat(path); return err == nil }
	var store meta.Store
	if len(opts.Etcd) == 0 {
		if exists(etcd) {
			return nil, fmt.Errorf("tern: the metadata of %s is in etcd (%s): open it with Options.Etcd, or reach its server with Options.Server (tern --server)", opts.Dir, etcd)
		}
		b, err := meta.OpenBolt(bolt)
		if errors.Is(err, meta.ErrLocked) {
			return nil, fmt.Errorf("%w: %s (stop the other process, or use another directory)", ErrLocked, opts.Dir)
		}
		if err != nil {
			return nil, fmt.Errorf("tern: open metadata: %w", err)
		}
		store = b
	} else {
		if exists(bolt) && !opts.MoveMetadata {
			return nil, fmt.Errorf("tern: the metadata of %s is in its bbolt file (%s), not in etcd: open it without Options.Etcd, or with Options.MoveMetadata to move it into etcd (as tern serve does)", opts.Dir, bolt)
		}
		e, err := meta.OpenEtcd(ctx, meta.EtcdOptions{Endpoints: opts.Etcd, Root: opts.EtcdRoot, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("tern: open metadata: %w", err)
		}
		if exists(bolt) {
			err = moveMetadata(ctx, bolt, e, opts)
		}
		if err == nil {
			err = markEtcd(etcd, opts)
		}
		if err == nil && exists(bolt) {
			err = retireBolt(bolt)
		}
		if err != nil {
			e.Close()
			return nil, err
		}
		store = e
	}
	return &lockedStore{Store: store, lock: lock}, nil
}

// moveMetadata loads the metadata of the bbolt file at path into e (see
// Options.MoveMetadata). The caller holds the directory's lock, so no other
// process changes the file meanwhile; a move cut short is done again, whole,
// by the next Open.
func moveMetadata(ctx context.Context, path string, e *meta.Etcd, opts Options) error {
	b, err := meta.OpenBolt(path)
	if err != nil {
		return fmt.Errorf("tern: move metadata into etcd: %w", err)
	}
	contents, err := b.Contents(ctx)
	b.Close()
	if err == nil {
		err = e.Load(ctx, contents)
	}
	if errors.Is(err, meta.ErrOtherInstallation) {
		return fmt.Errorf("tern: cannot move the metadata of %s (%s) into etcd root %q: %w; give it a root of its own (--etcd-root), or an etcd of its own", opts.Dir, path, cmp.Or(opts.EtcdRoot, "/tern/"), err)
	}
	if err != nil {
		return fmt.Errorf("tern: move the metadata of %s into etcd: %w", opts.Dir, err)
	}
	subs := 0
	for _, l := range contents.Logs {
		subs += len(l.Subs)
	}
	if opts.Logger != nil {
		opts.Logger.Info("moved the metadata of the data directory from its bbolt file into etcd; the file is kept as "+filepath.Base(path)+movedSuffix,
			"dir", opts.Dir, "logs", len(contents.Logs), "subscriptions", subs, "installation", contents.Installation.ID)
	}
	return nil
}

// movedSuffix is added to the name of a bbolt file whose metadata was moved
// into etcd: it stays, as a record, but is never opened again.
const movedSuffix = ".moved"

// retireBolt renames the bbolt file at path once its metadata is in etcd
// and the directory is marked so.
func retireBolt(path string) error {
	if err := os.Rename(path, path+movedSuffix); err != nil {
		return fmt.Errorf("tern: move metadata into etcd: %w", err)
	}
	return vfs.OS.SyncDir(filepath.Dir(path))
}

// markEtcd records, durably, that the directory's metadata is in etcd.
func markEtcd(path string, opts Options) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	body := fmt.Sprintf("the metadata of this data directory is in etcd at %s, root %q\n", strings.Join(opts.Etcd, ","), cmp.Or(opts.EtcdRoot, "/tern/"))
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return fmt.Errorf("tern: mark data directory: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("tern: mark data directory: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("tern: mark data directory: %w", err)
	}
	return vfs.OS.SyncDir(filepath.Dir(path))
}

// lockedStore is a metadata store that holds the data directory's lock
// until it is closed.
type lockedStore struct {
	meta.Store
	lock io.Closer
}

func (s *lockedStore) Close() error {
	return errors.Join(s.Store.Close(), s.lock.Close())
}

func (c *embeddedClient) exists(path string) bool {
	_, err := c.fs.Stat(path)
	return err == nil
}

func (c *embeddedClient) logsDir() string { return filepath.Join(c.opts.Dir, "logs") }

func (c *embeddedClient) logDir(id uint64) string {
	return filepath.Join(c.logsDir(), strconv.FormatUint(id, 10))
}

// deletedMark is the file DeleteLog puts in a log's directory before it
// removes the log's metadata: only a directory so marked is data that may be
// removed at Open when its log is gone from the metadata.
const deletedMark = "DELETED"

// objectsMark, next to deletedMark, says the deleted log was in object
// storage: its objects go before its directory, and a client with no object
// store leaves both.
const objectsMark = "OBJECTS"

// removeOrphans finishes the deletions a crash interrupted: it removes the
// directories of deleted logs (marked, and gone from the metadata). A
// directory of no known log that is not marked is kept and reported: it may
// belong to another metadata store (a wrong --etcd or root), and data is
// never removed on a guess.
//
// It returns the names of the logs that have a directory, by directory.
func (c *embeddedClient) removeOrphans(ctx context.Context) (map[string]string, error) {
	if err := vfs.MkdirAllSync(c.fs, c.logsDir()); err != nil {
		return nil, fmt.Errorf("tern: create %s: %w", c.logsDir(), err)
	}
	names, err := c.fs.List(c.logsDir())
	if err != nil {
		return nil, fmt.Errorf("tern: list %s: %w", c.logsDir(), err)
	}
	if len(names) == 0 {
		return nil, nil // no log has data here yet: nothing to compare with the metadata
	}
	logNames := map[string]string{}
	for after := ""; ; {
		logs, err := c.meta.ListLogsPage(ctx, "", after, MaxListPageSize)
		if err != nil {
			return nil, fmt.Errorf("tern: list logs: %w", err)
		}
		for _, l := range logs {
			logNames[strconv.FormatUint(l.ID, 10)] = l.Name
		}
		if len(logs) < MaxListPageSize {
			break
		}
		after = logs[len(logs)-1].Name
	}
	dirs := map[string]string{}
	for _, name := range names {
		dir := filepath.Join(c.logsDir(), name)
		_, err := c.fs.Stat(filepath.Join(dir, deletedMark))
		marked := err == nil
		live := logNames[name] != ""
		if live {
			dirs[name] = logNames[name]
		}
		switch {
		case live && marked:
			// The deletion did not reach the metadata: the log lives on.
			if err := c.fs.Remove(filepath.Join(dir, deletedMark)); err != nil {
				return nil, fmt.Errorf("tern: %w", err)
			}
			if err := c.fs.SyncDir(dir); err != nil {
				return nil, fmt.Errorf("tern: %w", err)
			}
		case !live && marked && c.bucket == nil && c.exists(filepath.Join(dir, objectsMark)):
			c.opts.Logger.Warn("keeping a deleted log's directory until a client with its object store removes its objects", "dir", dir)
		case !live && marked:
			c.opts.Logger.Info("removing the data of a deleted log", "dir", dir)
			id, err := strconv.ParseUint(name, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("tern: %s is marked deleted but is not a log's directory", dir)
			}
			if err := c.removeData(ctx, id); err != nil {
				return nil, err
			}
		case !live:
			c.opts.Logger.Warn("keeping a log directory that the metadata does not know; remove it by hand if it is not needed", "dir", dir)
		}
	}
	return dirs, nil
}

func (c *embeddedClient) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	logs := c.logs
	c.logs = nil
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	var err error
	for _, p := range logs {
		if l := p.Value(); l != nil {
			err = errors.Join(err, l.close())
		}
	}
	return errors.Join(err, c.closeStores())
}

// Health reports the full disk and the degraded logs this client knows of.
func (c *embeddedClient) Health() (Health, error) {
	return Health{NoSpace: c.disk.Full(), Degraded: c.damaged.list()}, nil
}

func (c *embeddedClient) closeStores() error {
	err := c.meta.Close()
	if c.bucket != nil {
		err = errors.Join(err, c.bucket.Close())
	}
	return err
}

func (c *embeddedClient) CreateLog(ctx context.Context, name string, opts LogOptions) (logImpl, error) {
	if opts.Mode == "" {
		opts.Mode = cmp.Or(c.opts.DefaultMode, ModeLocal)
	}
	opts, err := opts.WithDefaults()
	if err != nil {
		return nil, err
	}
	if (opts.Mode == ModeObject || opts.Mode == ModeQuorum) && c.bucket == nil {
		return nil, errNoStorage(name)
	}
	if opts.Mode == ModeQuorum && c.opts.Cluster == nil {
		return nil, errNoCluster(name)
	}
	enc, err := encodeOptions(opts)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if err := c.checkLogLimits(ctx, name); err != nil {
		return nil, err
	}
	m, err := c.meta.CreateLog(ctx, meta.Log{Name: name, Options: enc, Installation: c.install.ID})
	if errors.Is(err, meta.ErrExist) {
		return nil, fmt.Errorf("%w: %q", ErrExist, name)
	}
	if err != nil {
		return nil, fmt.Errorf("tern: create log %q: %w", name, err)
	}
	c.countedLocked(name, +1)
	l, err := c.openLocked(ctx, m)
	if err != nil {
		return nil, err
	}
	l.fresh = c.opts.Cluster == nil
	return l, nil
}

// OpenLog opens the log's engine, recovering it if it was closed, so that
// damage shows here; it closes again when idle.
func (c *embeddedClient) OpenLog(ctx context.Context, name string) (logImpl, error) {
	l, err := c.openLog(ctx, name)
	if err != nil {
		return nil, err
	}
	_, release, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	release()
	return l, nil
}

// openLog opens an existing log, recovering it if this is its first open in
// this process. Every call returns the same log while the client is open.
func (c *embeddedClient) openLog(ctx context.Context, name string) (*embeddedLog, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if l := c.logLocked(name); l != nil {
		return l, nil
	}
	m, err := c.meta.Log(ctx, name)
	if err != nil {
		return nil, c.metaErr(name, err)
	}
	return c.openLocked(ctx, m)
}

func errNoCluster(name string) error {
	return fmt.Errorf("%w: log %q is a quorum log, which only a cluster of tern serve nodes serves", ErrInvalid, name)
}

func (c *embeddedClient) LogID(ctx context.Context, name string) (uint64, error) {
	m, err := c.meta.Log(ctx, name)
	if err != nil {
		return 0, c.metaErr(name, err)
	}
	return m.ID, nil
}

func (c *embeddedClient) CloseLog(name string) error {
	c.mu.Lock()
	l := c.logLocked(name)
	delete(c.logs, name)
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.close()
}

// errNoStorage refuses to create, open or delete an object log on a client
// with no object store.
func errNoStorage(name string) error {
	return fmt.Errorf("%w: log %q is in object storage, and this client has no object store: set Options.Storage (tern --storage, tern serve --storage)", ErrInvalid, name)
}

func (c *embeddedClient) metaErr(name string, err error) error {
	if errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return fmt.Errorf("tern: log %q: %w", name, err)
}

func (c *embeddedClient) DeleteLog(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	m, err := c.meta.Log(ctx, name)
	if err != nil {
		return c.metaErr(name, err)
	}
	opts, err := decodeOptions(m)
	object := err == nil && (opts.Mode == ModeObject || opts.Mode == ModeQuorum)
	if object && c.bucket == nil {
		return errNoStorage(name) // its objects would stay behind, unknown to anyone
	}
	if l := c.logLocked(name); l != nil {
		delete(c.logs, name)
		l.deleted.Store(true) // its readers end with ErrNotFound
		l.close()
	}
	var prefix string // of its objects, if any
	if object {
		prefix = objectPrefix(m)
	}
	if err := c.markDeleted(m.ID, prefix); err != nil {
		return err
	}
	if err := c.meta.DeleteLog(ctx, name); err != nil {
		return c.metaErr(name, err)
	}
	c.damaged.forget(name)
	c.countedLocked(name, -1)
	// A crash from here on leaves an orphan directory, whose data is
	// removed at next Open.
	return c.removeData(ctx, m.ID)
}

// removeData removes the data of a deleted log: its objects, if the client
// has an object store, then its directory and the mark in it.
func (c *embeddedClient) removeData(ctx context.Context, id uint64) error {
	if keep, err := c.removeObjects(ctx, id); err != nil || keep {
		return err
	}
	if err := c.fs.RemoveAll(c.logDir(id)); err != nil {
		return fmt.Errorf("tern: delete the data of log %d: %w", id, err)
	}
	// Else a crash brings the directory back, marked, for the next Open.
	if err := c.fs.SyncDir(c.logsDir()); err != nil {
		return fmt.Errorf("tern: delete the data of log %d: %w", id, err)
	}
	return nil
}

// markDeleted durably marks a log's directory as data to remove, and, for
// a log in object storage (objects names its prefix), as one whose objects
// are to be removed too.
func (c *embeddedClient) markDeleted(id uint64, objects string) error {
	dir := c.logDir(id)
	if err := vfs.MkdirAllSync(c.fs, dir); err != nil {
		return fmt.Errorf("tern: mark log %d deleted: %w", id, err)
	}
	marks := []string{deletedMark}
	if objects != "" {
		marks = []string{objectsMark, deletedMark}
	}
	for _, mark := range marks {
		f, err := c.fs.Create(filepath.Join(dir, mark))
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("tern: mark log %d deleted: %w", id, err)
		}
		if err == nil {
			if mark == objectsMark {
				_, err = io.WriteString(f, objects)
			}
			if err := errors.Join(err, f.Sync(), f.Close()); err != nil {
				return fmt.Errorf("tern: mark log %d deleted: %w", id, err)
			}
		}
	}
	if err := c.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("tern: mark log %d deleted: %w", id, err)
	}
	return nil
}
