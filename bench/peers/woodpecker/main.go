// Command woodpecker-driver benchmarks Woodpecker v0.1.35
// (github.com/zilliztech/woodpecker), the write-ahead log of Milvus 2.6, with
// the loadgen workloads. Woodpecker runs embedded in this process (its
// NewEmbedClientFromConfig), so the CPU time and peak memory reported are
// this process's: Woodpecker, its etcd and the load generator (not MinIO's).
//
// One program, two systems, chosen by the name it is run as:
//
//	woodpecker-driver        system "woodpecker": storage type "local",
//	                         segments are files under --dir/wp
//	woodpecker-minio-driver  system "woodpecker-minio": storage type "minio",
//	                         segments are objects in the MinIO at --addr
//	                         (or $TERN_BENCH_S3_ENDPOINT), with the
//	                         credentials in $AWS_ACCESS_KEY_ID and
//	                         $AWS_SECRET_ACCESS_KEY
//	woodpecker-service-driver  system "woodpecker-service": storage type
//	                         "service", 3 LogStore processes (wpservice)
//	                         started by the driver on its etcd and the
//	                         MinIO at --addr, 3 replicas acked at 2; the
//	                         driver must run in a private network
//	                         namespace (bench.sh makes one)
//
// Configuration is Woodpecker's shipped config/woodpecker.yaml (install.sh
// copies it out of the module; $WOODPECKER_CONFIG overrides the path) with
// only the storage type, paths, endpoints and the variant's sync tick
// changed. Metadata goes to an etcd v3.5.23 (the version Woodpecker
// requires) embedded in this process on free 127.0.0.1 ports, with its
// default fsync, its data under --dir/etcd.
//
// Durability, read from the v0.1.35 source:
//
//   - local: the segment writer buffers appends and, on every tick of
//     woodpecker.logstore.segmentSyncPolicy.maxIntervalForLocalStorage
//     (10 ms shipped), writes them as one block, calls File.Sync (fsync) and
//     only then completes them (server/storage/disk/writer_impl.go,
//     processFlushTask). An acknowledged entry is fsynced, so the shipped
//     setting is the "durable" variant; "tuned-1ms" shortens the tick to 1 ms.
//   - minio: the segment writer uploads the buffer as one object per tick of
//     segmentSyncPolicy.maxInterval (200 ms shipped) and completes the
//     appends once PutObject has returned (objectstorage/writer_impl.go).
//     The pinned MinIO, with its default settings, fdatasyncs an object's
//     data and metadata before it answers (cmd/xl-storage.go), so
//     acknowledged is on disk there too. "tuned-1ms" cuts that tick to 1 ms.
//
// Append is LogWriter.Write of each entry (a batch of several is written
// with WriteAsync and waited for as a whole: Woodpecker has no batch
// append; its client coalesces queued appends by itself). AppendAsync is
// WriteAsync with its result channel awaited in a goroutine. Read opens a
// LogReader from the earliest entry, or from just after the last entry this
// target had acknowledged (Woodpecker's "latest" position is resolved on the
// first ReadNext, too late for ready), on a log handle of its own. A reader
// that has caught up polls again every 200 ms (log_reader.go), which bounds
// end-to-end latency from below.
//
// Nothing is hidden: a failed write (including "segment is rolling", which
// Woodpecker marks retryable) is returned as an error and counted in
// Result.Errors, never retried. Writer stalls (more than a second with
// writes outstanding and none completed) are counted. With local storage
// they come at segment rolls (every 1,000 blocks shipped, and a block is at
// most one sync tick's appends): completing the old segment fences it first,
// and the local writer's Fence waits a fixed 5 s while its lock file exists
// (disk/writer_impl.go, waitForFenceCheckIntervalIfLockExists). Closing
// the writer at the end of a run waits the same 5 s, unmeasured. Stalls,
// rolls and rejections go into Result.Notes (loadgen.Noter).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zilliztech/woodpecker/common/config"
	"github.com/zilliztech/woodpecker/common/werr"
	"github.com/zilliztech/woodpecker/woodpecker"
	"github.com/zilliztech/woodpecker/woodpecker/log"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/bench/peers/woodpecker/wpservice"
)

const version = "v0.1.35"

// stallAfter is how long the writer may go with writes outstanding and
// none completed before the gap counts as a stall.
const stallAfter = time.Second

func main() {
	system, storage := "woodpecker", "local"
	switch name := filepath.Base(os.Args[0]); {
	case strings.Contains(name, "minio"):
		system, storage = "woodpecker-minio", "minio"
	case strings.Contains(name, "service"):
		system, storage = "woodpecker-service", "service"
	}
	variants := []string{"durable", "tuned-1ms"}
	if storage == "service" {
		variants = variants[:1] // its LogStores' shipped sync tick is already 1 ms
	}
	loadgen.Main(loadgen.Driver{
		System:   system,
		Version:  version,
		Variants: variants,
		Open: func(ctx context.Context, cfg loadgen.Config) (loadgen.Target, error) {
			return open(ctx, storage, cfg)
		},
	})
}

// target is one embedded Woodpecker with Spec.Logs logs, each with its own
// writer.
type target struct {
	storage string
	dataDir string
	etcd    *embed.Etcd
	service *wpservice.Cluster // storage "service" only
	client  woodpecker.Client
	logs    []*wlog
	notes   []string

	inflight     atomic.Int64
	lastProgress atomic.Int64 // Unix nanoseconds of the last completion
	rolling      atomic.Int64 // writes rejected with "segment is rolling"
	stall        stalls
	stop         chan struct{}
	watcher      sync.WaitGroup
}

// stalls counts gaps of more than stallAfter with writes outstanding and
// none completing.
type stalls struct {
	mu      sync.Mutex
	since   int64 // lastProgress when the current stall began, or 0
	n       int
	total   time.Duration
	longest time.Duration
}

// wlog is one log and its writer; last is the position of the last entry
// acknowledged on it, for a reader that starts at the end.
type wlog struct {
	name   string
	handle log.LogHandle
	writer log.LogWriter

	mu    sync.Mutex
	last  log.LogMessageId
	acked bool
}

func open(ctx context.Context, storage string, lc loadgen.Config) (_ loadgen.Target, err error) {
	wc, err := loadConfig(storage, lc)
	if err != nil {
		return nil, err
	}
	if err := wpservice.RedirectLog(filepath.Join(lc.Dir, "woodpecker.log")); err != nil {
		return nil, err
	}
	t := &target{storage: storage, dataDir: wc.Woodpecker.Storage.RootPath, stop: make(chan struct{})}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if t.etcd, err = startEtcd(filepath.Join(lc.Dir, "etcd")); err != nil {
		return nil, err
	}
	wc.Etcd.Endpoints = []string{t.etcd.Clients[0].Addr().String()}
	if storage == "service" {
		if t.service, t.client, err = startService(ctx, wc, lc); err != nil {
			return nil, err
		}
	} else if t.client, err = woodpecker.NewEmbedClientFromConfig(ctx, wc); err != nil {
		return nil, fmt.Errorf("start embedded woodpecker: %w", err)
	}
	for i := range lc.Spec.Logs {
		l := &wlog{name: fmt.Sprintf("bench-%d", i)}
		t.logs = append(t.logs, l)
		if err := t.client.CreateLog(ctx, l.name); err != nil {
			return nil, fmt.Errorf("create log %s: %w", l.name, err)
		}
		if l.handle, err = t.client.OpenLog(ctx, l.name); err != nil {
			return nil, fmt.Errorf("open log %s: %w", l.name, err)
		}
		if l.writer, err = l.handle.OpenLogWriter(ctx); err != nil {
			return nil, fmt.Errorf("open writer of log %s: %w", l.name, err)
		}
	}
	t.notes = append(t.notes, settingNote(wc))
	t.watcher.Go(t.watch)
	return t, nil
}

// configPath is where install.sh put the shipped configuration, or
// $WOODPECKER_CONFIG.
func configPath() string {
	if path := os.Getenv("WOODPECKER_CONFIG"); path != "" {
		return path
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "tern-bench", "woodpecker", "woodpecker.yaml")
}

// loadConfig reads the shipped configuration and points it at this run.
func loadConfig(storage string, lc loadgen.Config) (*config.Configuration, error) {
	path := configPath()
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("woodpecker's shipped configuration is missing (%v): run bench/peers/woodpecker/install.sh first", err)
	}
	wc, err := config.NewConfiguration(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	wc.Woodpecker.Storage.Type = storage
	wc.Woodpecker.Storage.RootPath = filepath.Join(lc.Dir, "wp")
	wc.Log.Level = "warn"
	switch lc.Variant {
	case "durable": // the shipped ticks
	case "tuned-1ms":
		wc.Woodpecker.Logstore.SegmentSyncPolicy.MaxIntervalForLocalStorage = config.NewDurationMillisecondsFromInt(1)
		wc.Woodpecker.Logstore.SegmentSyncPolicy.MaxInterval = config.NewDurationMillisecondsFromInt(1)
	default:
		return nil, fmt.Errorf("unknown variant %q", lc.Variant)
	}
	if storage == "minio" || storage == "service" {
		if err := pointAtMinIO(wc, lc.Addr); err != nil {
			return nil, err
		}
	}
	// Check what the durability claim in the package comment rests on.
	if storage == "local" && !wc.Woodpecker.Storage.IsStorageLocal() ||
		storage == "minio" && !wc.Woodpecker.Storage.IsStorageMinio() ||
		storage == "service" && !wc.Woodpecker.Storage.IsStorageService() {
		return nil, fmt.Errorf("storage type %q did not take", wc.Woodpecker.Storage.Type)
	}
	return wc, nil
}

func pointAtMinIO(wc *config.Configuration, addr string) error {
	if addr == "" {
		addr = os.Getenv("TERN_BENCH_S3_ENDPOINT")
	}
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("woodpecker-minio needs --addr HOST:PORT of a MinIO (or $TERN_BENCH_S3_ENDPOINT), got %q: start one with scripts/minio-server DIR", addr)
	}
	access, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if access == "" || secret == "" {
		return errors.New("woodpecker-minio needs the MinIO credentials in $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (scripts/minio-server prints them)")
	}
	wc.Minio.Address = host
	if wc.Minio.Port, err = strconv.Atoi(port); err != nil {
		return fmt.Errorf("bad MinIO port in %q", addr)
	}
	wc.Minio.AccessKeyID, wc.Minio.SecretAccessKey = access, secret
	wc.Minio.UseSSL = false
	wc.Minio.BucketName = "woodpecker-bench"
	wc.Minio.CreateBucket = true
	return nil
}

func settingNote(wc *config.Configuration) string {
	sp := wc.Woodpecker.Logstore.SegmentSyncPolicy
	rp := wc.Woodpecker.Client.SegmentRollingPolicy
	tick := fmt.Sprintf("local storage, sync tick %d ms (maxIntervalForLocalStorage): acknowledged after the block is written and fsynced",
		sp.MaxIntervalForLocalStorage.Milliseconds())
	if wc.Woodpecker.Storage.IsStorageService() {
		tick = fmt.Sprintf("service storage, %d LogStores, ensemble %d, ack quorum %d, sync tick %d ms (maxIntervalForService): acknowledged once %d LogStores have written and fsynced the block; CPU and memory are the driver's (client and etcd), not the LogStores'",
			wpservice.Replicas, wc.Woodpecker.Client.Quorum.GetEnsembleSize(), wc.Woodpecker.Client.Quorum.GetAckQuorumSize(),
			sp.MaxIntervalForService.Milliseconds(), wc.Woodpecker.Client.Quorum.GetAckQuorumSize())
	} else if wc.Woodpecker.Storage.IsStorageMinio() {
		tick = fmt.Sprintf("minio storage, sync tick %d ms (maxInterval): acknowledged after PutObject of the block returned",
			sp.MaxInterval.Milliseconds())
	}
	return fmt.Sprintf("%s; a segment rolls every %d blocks or %d MB", tick, rp.MaxBlocks, rp.MaxSize.Int64()/1e6)
}

// startEtcd starts a one-member etcd in dir on free loopback ports.
func startEtcd(dir string) (*embed.Etcd, error) {
	client, err := freeURL()
	if err != nil {
		return nil, err
	}
	peer, err := freeURL()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{dir + ".log"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, errors.New("embedded etcd not ready after 30s")
	}
}

// freeURL returns an http URL on a loopback port that was free a moment ago.
func freeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

func (t *target) Append(ctx context.Context, i int, entries [][]byte) error {
	l := t.logs[i]
	t.begin(int64(len(entries)))
	if len(entries) == 1 {
		// Write copies the payload into its own encoding before returning.
		return t.finish(l, l.writer.Write(ctx, &log.WriteMessage{Payload: entries[0]}))
	}
	results := make([]<-chan *log.WriteResult, len(entries))
	for j, e := range entries {
		results[j] = l.writer.WriteAsync(ctx, &log.WriteMessage{Payload: e})
	}
	var first error
	for _, r := range results {
		if err := t.finish(l, <-r); first == nil {
			first = err
		}
	}
	return first
}

func (t *target) AppendAsync(ctx context.Context, i int, entry []byte, done func(error)) {
	l := t.logs[i]
	t.begin(1)
	// WriteAsync encodes (copies) the payload before it returns.
	r := l.writer.WriteAsync(ctx, &log.WriteMessage{Payload: entry})
	go func() { done(t.finish(l, <-r)) }()
}

func (t *target) begin(n int64) {
	if t.inflight.Add(n) == n {
		t.lastProgress.Store(time.Now().UnixNano()) // idle until now: no stall
	}
}

// finish accounts for one completed write and returns its error.
func (t *target) finish(l *wlog, r *log.WriteResult) error {
	t.lastProgress.Store(time.Now().UnixNano())
	t.inflight.Add(-1)
	if r.Err != nil {
		if werr.ErrSegmentHandleSegmentRolling.Is(r.Err) {
			t.rolling.Add(1)
		}
		return fmt.Errorf("woodpecker: write to %s: %w", l.name, r.Err)
	}
	id := *r.LogMessageId
	l.mu.Lock()
	if !l.acked || id.SegmentId > l.last.SegmentId || id.SegmentId == l.last.SegmentId && id.EntryId > l.last.EntryId {
		l.last, l.acked = id, true
	}
	l.mu.Unlock()
	return nil
}

// watch checks for stalls until the target closes.
func (t *target) watch() {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			t.checkStall(now)
		}
	}
}

// checkStall starts a stall when writes have been outstanding with none
// completing for stallAfter, and ends one when a write completes. It
// returns how long a stall still going on has lasted, or 0.
func (t *target) checkStall(now time.Time) time.Duration {
	st := &t.stall
	st.mu.Lock()
	defer st.mu.Unlock()
	last := t.lastProgress.Load()
	switch {
	case st.since != 0 && last != st.since:
		d := time.Duration(last - st.since)
		st.n, st.total, st.longest = st.n+1, st.total+d, max(st.longest, d)
		st.since = 0
	case st.since == 0 && t.inflight.Load() > 0 && now.UnixNano()-last > int64(stallAfter):
		st.since = last
	}
	if st.since != 0 {
		return time.Duration(now.UnixNano() - st.since)
	}
	return 0
}

func (t *target) Read(ctx context.Context, i int, fromStart bool, ready func(), fn func(entry []byte) error) error {
	l := t.logs[i]
	from := log.EarliestLogMessageID()
	if !fromStart {
		l.mu.Lock()
		if l.acked {
			from = log.LogMessageId{SegmentId: l.last.SegmentId, EntryId: l.last.EntryId + 1}
		}
		l.mu.Unlock()
	}
	h, err := t.client.OpenLog(ctx, l.name)
	if err != nil {
		return fmt.Errorf("open log %s to read: %w", l.name, err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	r, err := h.OpenLogReader(ctx, &from, "bench")
	if err != nil {
		return fmt.Errorf("open reader of log %s: %w", l.name, err)
	}
	defer r.Close(context.WithoutCancel(ctx))
	ready()
	for {
		m, err := r.ReadNext(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("woodpecker: read log %s: %w", l.name, err)
		}
		if err := fn(m.Payload); err != nil {
			return err
		}
	}
}

// Notes says what a reader of the figures should know: the setting, the
// segment rolls, stalls and rejected writes. Run calls it when the load is
// over, before Close.
func (t *target) Notes() []string {
	notes := append([]string(nil), t.notes...)
	var rolls int64
	for _, l := range t.logs {
		l.mu.Lock()
		rolls += l.last.SegmentId // segments are numbered from 0 per log
		l.mu.Unlock()
	}
	notes = append(notes, fmt.Sprintf("segments rolled: %d", rolls))
	ongoing := t.checkStall(time.Now())
	st := &t.stall
	st.mu.Lock()
	if st.n > 0 {
		s := fmt.Sprintf("writer stalls (over %v with writes outstanding and none completing): %d, longest %v, %v in all",
			stallAfter, st.n, st.longest.Round(time.Millisecond), st.total.Round(time.Millisecond))
		if t.storage == "local" {
			s += "; a roll fences the old segment, and the local writer's Fence waits a fixed 5 s (disk/writer_impl.go)"
		}
		notes = append(notes, s)
	}
	st.mu.Unlock()
	if ongoing > 0 {
		notes = append(notes, fmt.Sprintf("writer stalled for the last %v of the run, with writes still outstanding", ongoing.Round(time.Millisecond)))
	}
	if n := t.rolling.Load(); n > 0 {
		notes = append(notes, fmt.Sprintf("%d writes rejected with \"segment is rolling\" (retryable; counted as errors, not retried)", n))
	}
	return notes
}

// Close stops everything open stopped and checks that the data went where
// the configuration says.
func (t *target) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	close(t.stop)
	t.watcher.Wait()
	var errs []error
	var acked bool
	for _, l := range t.logs {
		l.mu.Lock()
		acked = acked || l.acked
		l.mu.Unlock()
		if l.writer != nil {
			errs = append(errs, l.writer.Close(ctx))
		}
		if l.handle != nil {
			errs = append(errs, l.handle.Close(ctx))
		}
	}
	if t.client != nil {
		errs = append(errs, t.client.Close(ctx))
		if t.service == nil {
			errs = append(errs, woodpecker.StopEmbedLogStore())
		}
	}
	if t.service != nil {
		errs = append(errs, t.service.Close())
	}
	if t.etcd != nil {
		t.etcd.Close()
	}
	if t.storage == "local" && acked && loadgen.DirBytes(t.dataDir) == 0 {
		errs = append(errs, fmt.Errorf("woodpecker acknowledged writes but wrote nothing under %s: the local storage setting did not take", t.dataDir))
	}
	return errors.Join(errs...)
}
