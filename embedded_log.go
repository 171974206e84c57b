package tern

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/quorumlog"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/wal"
)

// embeddedLog is a log kept by this process: its metadata, its engine (the
// write and read path of its mode) and its subscriptions. It is safe for
// concurrent use.
//
// The struct is small, and goes once nothing refers to it; its engine is
// opened on first use (acquire) and closed again once nothing has used it
// for Options.LogIdleTimeout (embedded_idle.go), so that an idle log holds
// no goroutine, file or buffer. Lock order: prodMu, the client's mu, engMu,
// subsMu, the client's openMu.
type embeddedLog struct {
	c       *embeddedClient
	name    string
	id      uint64
	created time.Time
	opts    LogOptions

	engMu     sync.Mutex
	eng       engine.Engine // the write and read path of the log's mode; nil while closed
	users     int           // acquisitions not released: calls in progress, writers, readers, subscribers
	idleSince time.Time     // when users last fell to 0
	gone      bool          // closed for good: by CloseLog, DeleteLog or the client's Close
	// deleted is set by DeleteLog before it closes the log: its readers and
	// subscribers then end with ErrNotFound rather than ErrClosed.
	deleted atomic.Bool
	// fresh: created by this client and never opened since, so empty; no
	// other process shares the metadata (no cluster).
	fresh bool

	// session is the log's newest writer session as this process last
	// saw it, for Info.
	session atomic.Uint64
	// prodMu guards prod, the shared producers' session while this
	// process holds it.
	prodMu sync.Mutex
	prod   *sharedSession

	subsMu     sync.Mutex
	subs       map[string]*subState // the log's subscriptions, by name
	subsClosed bool                 // the log is closing: no more commits are scheduled
}

func encodeOptions(o LogOptions) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("tern: encode log options: %w", err)
	}
	return b, nil
}

// decodeOptions reads the options in the log m's metadata.
func decodeOptions(m meta.Log) (LogOptions, error) {
	var opts LogOptions
	if err := json.Unmarshal(m.Options, &opts); err != nil {
		return LogOptions{}, fmt.Errorf("tern: log %q has unreadable options: %w", m.Name, err)
	}
	return opts, nil
}

// openLocked makes the log m describes known to the client, with its
// subscriptions; its engine opens at first use. The caller holds c.mu.
func (c *embeddedClient) openLocked(ctx context.Context, m meta.Log) (*embeddedLog, error) {
	opts, err := decodeOptions(m)
	if err != nil {
		return nil, err
	}
	switch {
	case (opts.Mode == ModeObject || opts.Mode == ModeQuorum) && c.bucket == nil:
		return nil, errNoStorage(m.Name)
	case opts.Mode == ModeQuorum && c.opts.Cluster == nil:
		return nil, errNoCluster(m.Name)
	}
	l := &embeddedLog{c: c, name: m.Name, id: m.ID, created: m.Created, opts: opts}
	l.session.Store(sessionOf(m))
	if err := l.loadSubs(ctx); err != nil {
		return nil, err
	}
	c.rememberLocked(l)
	return l, nil
}

// openEngine opens the log's engine from its current metadata (the writer
// epoch and start may have moved since it was last open) and applies
// retention to it. The caller holds engMu.
func (l *embeddedLog) openEngine(ctx context.Context) (engine.Engine, error) {
	c := l.c
	m, err := c.meta.Log(ctx, l.name)
	if err != nil {
		return nil, c.metaErr(l.name, err)
	}
	if m.ID != l.id {
		return nil, fmt.Errorf("%w: %q was deleted", ErrNotFound, l.name)
	}
	l.session.Store(sessionOf(m))
	opts := l.opts
	var eng engine.Engine
	switch opts.Mode {
	case ModeObject, ModeQuorum:
		oo := objlog.Options{
			Bucket:       c.bucket,
			Meta:         objlog.StoreMeta(c.meta, m.Name),
			Prefix:       objectPrefix(m),
			FlushBytes:   opts.FlushBytes,
			MaxInFlight:  opts.UploadsInFlight,
			SegmentBytes: opts.SegmentBytes,
			SegmentAge:   opts.SegmentAge,
			Codec:        codecOf(opts.Compression),
			SharedCache:  c.cache,
			Epoch:        m.Epoch,
			Start:        m.Start,
			Logger:       c.opts.Logger.With("log", m.Name),
		}
		var ol *objlog.Log
		var err error
		if opts.Mode == ModeQuorum {
			ol, err = quorumlog.Open(ctx, oo, quorumlog.Replicas{
				Config: quorum.Config{Ensemble: opts.Ensemble, AckQuorum: opts.AckQuorum},
				Log:    m.ID,
				Node:   c.opts.Cluster.Node,
				Live:   c.opts.Cluster.Live,
				Lost:   c.opts.Observer.ReplicaLost,
			})
		} else {
			ol, err = objlog.Open(ctx, oo)
		}
		if err != nil {
			return nil, fmt.Errorf("tern: open log %q: %w", m.Name, err)
		}
		eng = ol
	default:
		mode := map[FsyncMode]wal.SyncMode{FsyncAlways: wal.SyncAlways, FsyncInterval: wal.SyncInterval, FsyncNever: wal.SyncNever}
		w, err := wal.Open(ctx, wal.Options{
			FS:            c.fs,
			Dir:           c.logDir(m.ID),
			Sync:          mode[opts.Fsync.Mode],
			SyncEvery:     opts.Fsync.Interval,
			SegmentBytes:  opts.SegmentBytes,
			SegmentAge:    opts.SegmentAge,
			RetentionAge:  opts.RetentionAge,
			Codec:         codecOf(opts.Compression),
			Epoch:         m.Epoch,
			Start:         m.Start,
			Disk:          c.disk,
			ReuseSegments: c.opts.ReuseSegments,
			ZeroAhead:     c.opts.ZeroAheadBytes,
			Logger:        c.opts.Logger.With("log", m.Name),
		})
		if err != nil {
			// A new log's directory may not fit on a full disk.
			return nil, fmt.Errorf("tern: open log %q: %w", m.Name, c.disk.Failed(c.logDir(m.ID), err))
		}
		eng = w
	}
	c.damaged.note(m.Name, eng)
	if err := l.applyRetention(eng); err != nil {
		eng.Close()
		return nil, err
	}
	return eng, nil
}

// close ends the log's subscribers, commits their cursors and closes the
// write path, for good: the log's handles fail with ErrClosed afterwards.
func (l *embeddedLog) close() error {
	defer l.dropShared() // after engMu is let go: lock order
	l.engMu.Lock()
	defer l.engMu.Unlock()
	l.gone = true
	err := l.closeSubs()
	if l.eng != nil {
		err = errors.Join(err, l.eng.Close())
		l.eng = nil
		l.c.setOpen(l, false)
	}
	return err
}

// sessionOf is the log's writer session (LogInfo.Epoch): the epoch in a
// record from before sessions existed.
func sessionOf(m meta.Log) uint64 {
	if m.Session == 0 {
		return m.Epoch
	}
	return m.Session
}

// closedErr is the error of a reader or subscriber that the log's closing
// ended: ErrClosed, or ErrNotFound if the log was deleted.
func (l *embeddedLog) closedErr(err error) error {
	if l.deleted.Load() && errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: log %q was deleted", ErrNotFound, l.name)
	}
	return err
}

func (l *embeddedLog) Name() string        { return l.name }
func (l *embeddedLog) Options() LogOptions { return l.opts }

// A log just created is described without opening it.
func (l *embeddedLog) Info(ctx context.Context) (LogInfo, error) {
	if info, ok := l.freshInfo(); ok {
		return info, ctx.Err()
	}
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return LogInfo{}, err
	}
	defer release()
	info := l.info(eng.Stats())
	info.LogicalBytes = eng.LogicalBytes()
	return info, nil
}

func (l *embeddedLog) info(s engine.Stats) LogInfo {
	return LogInfo{
		Name: l.name, ID: l.id, Created: l.created, Options: l.opts,
		Start: Offset(s.Start), End: Offset(s.End), Bytes: s.Bytes, Segments: s.Segments, Epoch: l.session.Load(),
		Objects: s.Objects,
	}
}

// codecOf is the record codec of a compression that LogOptions.WithDefaults
// has checked; one it does not know is none.
func codecOf(c Compression) record.Codec {
	codec, _ := record.ParseCodec(string(c))
	return codec
}

// freshInfo describes the log if it is fresh: empty.
func (l *embeddedLog) freshInfo() (LogInfo, bool) {
	l.engMu.Lock()
	defer l.engMu.Unlock()
	if !l.fresh || l.gone {
		return LogInfo{}, false
	}
	return l.info(engine.Stats{}), true
}

// infoIfOpen describes the log from its engine if that is open, without
// opening it.
func (l *embeddedLog) infoIfOpen() (LogInfo, bool) {
	l.engMu.Lock()
	defer l.engMu.Unlock()
	if l.eng == nil {
		return LogInfo{}, false
	}
	info := l.info(l.eng.Stats())
	info.LogicalBytes = l.eng.LogicalBytes()
	return info, true
}

// OpenWriter claims the session o asks for in the metadata store, with a
// new epoch, and fences the engine with that epoch; a shared producer joins
// the log's shared session if this process holds it. The writer holds the
// engine open until it is closed.
func (l *embeddedLog) OpenWriter(ctx context.Context, o client.WriterOptions) (writerImpl, error) {
	if o.Shared {
		if o.Epoch != 0 {
			return nil, fmt.Errorf("%w: a shared producer has no epoch of its own (WithEpoch with Shared)", ErrInvalid)
		}
		return l.openShared(ctx)
	}
	w, err := l.claim(ctx, meta.ClaimOptions{Session: o.Epoch, Reopen: o.Reopen})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// claim opens a writer of the session co asks for.
func (l *embeddedLog) claim(ctx context.Context, co meta.ClaimOptions) (*embeddedWriter, error) {
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	claim, err := l.c.meta.ClaimWriter(ctx, l.name, co)
	if err != nil {
		release()
		return nil, l.claimErr(co, err)
	}
	l.session.Store(claim.Session())
	if err := eng.Fence(ctx, claim.Epoch(), claim.Valid); err != nil {
		claim.Release(context.WithoutCancel(ctx))
		release()
		return nil, err
	}
	return &embeddedWriter{l: l, eng: eng, release: release, epoch: claim.Epoch(), session: claim.Session(), claim: claim}, nil
}

// claimErr is the error of a ClaimWriter that failed with err.
func (l *embeddedLog) claimErr(co meta.ClaimOptions, err error) error {
	switch {
	case errors.Is(err, meta.ErrSessionHeld) && co.Shared:
		return fmt.Errorf("%w: log %q is held by an exclusive writer (%v); shared producers may append once it closes, or open an exclusive writer (tern append --exclusive) to take it over", ErrFenced, l.name, err)
	case errors.Is(err, meta.ErrStaleEpoch), errors.Is(err, meta.ErrSessionHeld):
		return fmt.Errorf("%w: log %q: %v", ErrFenced, l.name, err)
	}
	return l.c.metaErr(l.name, err)
}

// sharedSession is the shared producers' session of a log while this
// process holds it: one claim for all of them, which fenced eng, the
// engine instance they append to. It outlives its last producer while that
// engine stays open, so that one Log.Append after another does not claim
// (and start a segment) each time; the engine's closing lets it go.
// Guarded by the log's prodMu.
type sharedSession struct {
	claim meta.Claim
	eng   engine.Engine
	users int // shared writers open on it
}

// openShared opens a shared producer on the log's shared session: the one
// this process holds, if its claim still holds and fenced the engine open
// now, or a new claim of it. Lock order: prodMu, then engMu (acquire).
func (l *embeddedLog) openShared(ctx context.Context) (*embeddedWriter, error) {
	l.prodMu.Lock()
	defer l.prodMu.Unlock()
	if p := l.prod; p != nil {
		eng, release, err := l.acquire(ctx)
		if err != nil {
			return nil, err
		}
		if p.claim.Valid() && p.eng == eng {
			p.users++
			return &embeddedWriter{l: l, eng: eng, release: release, epoch: p.claim.Epoch(), claim: p.claim, shared: p}, nil
		}
		release()
		if p.users == 0 { // else its producers let it go as they close
			l.releaseShared(p)
		}
		l.prod = nil
	}
	w, err := l.claim(ctx, meta.ClaimOptions{Shared: true})
	if err != nil {
		return nil, err
	}
	w.session = 0
	w.shared = &sharedSession{claim: w.claim, eng: w.eng, users: 1}
	l.prod = w.shared
	return w, nil
}

// leaveShared takes a closing shared producer off its session, and reports
// whether its close releases the claim: the session was replaced, and it
// was the last producer on it. The log's session stays for the next
// producer while its engine is open (dropShared).
func (l *embeddedLog) leaveShared(p *sharedSession) bool {
	l.prodMu.Lock()
	defer l.prodMu.Unlock()
	p.users--
	return p.users == 0 && l.prod != p
}

// dropShared releases the log's shared session once its engine has closed
// (idle, or the log closing). The caller holds neither prodMu nor engMu.
func (l *embeddedLog) dropShared() {
	l.prodMu.Lock()
	defer l.prodMu.Unlock()
	if p := l.prod; p != nil && p.users == 0 {
		l.prod = nil
		l.releaseShared(p)
	}
}

// releaseShared gives up a shared session's claim, bounded as a writer's
// close is. The caller holds prodMu.
func (l *embeddedLog) releaseShared(p *sharedSession) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.claim.Release(ctx); err != nil {
		l.c.opts.Logger.Warn("releasing the shared producers' claim failed; it lapses with its lease", "log", l.name, "err", err)
	}
}

// Append appends es as a shared producer of the log's shared session, which
// it opens if this process holds none, and keeps while the log's engine is
// open.
func (l *embeddedLog) Append(ctx context.Context, es []Entry, o client.AppendOptions) (Offset, error) {
	w, err := l.openShared(ctx)
	if err != nil {
		return 0, err
	}
	off, err := w.AppendBatchAsync(es, o).Wait(ctx)
	if cerr := w.Close(); err == nil && cerr != nil && !errors.Is(cerr, ErrFenced) {
		err = cerr
	}
	return off, err
}

// maxStartAttempts bounds the tries to open a reader at FromStart of a log
// that is truncated as fast as the reader opens.
const maxStartAttempts = 10

// The reader holds the engine open until it is closed.
func (l *embeddedLog) OpenReader(ctx context.Context, from Offset, opts ...ReadOption) (readerImpl, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o := client.NewReadOptions(opts...)
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		at := uint64(from)
		switch from {
		case FromStart:
			at = eng.Stats().Start
		case FromEnd:
			at = eng.Stats().End
		}
		r, err := eng.NewReader(at, o.Ticks)
		if from == FromStart && errors.Is(err, ErrTruncated) && attempt < maxStartAttempts {
			continue // truncated since Stats: the start moved on
		}
		if err != nil {
			release()
			return nil, err // says which offset, and where the log starts or ends
		}
		return embeddedReader{r: r, l: l, maxBytes: o.MaxBatchBytes, release: release}, nil
	}
}

// embeddedReader is a Reader of an engine, which it holds open.
type embeddedReader struct {
	r        engine.Reader
	l        *embeddedLog
	maxBytes int    // of one NextBatch (WithMaxBatchBytes)
	release  func() // idempotent
}

func (r embeddedReader) Next(ctx context.Context) (Entry, error) {
	e, err := r.r.Next(ctx)
	if err != nil {
		return Entry{}, r.l.closedErr(err)
	}
	return entry(e), nil
}

func (r embeddedReader) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	es, err := r.r.NextBatch(ctx, max, r.maxBytes)
	if err != nil {
		return nil, r.l.closedErr(err)
	}
	return entries(es), nil
}

func (r embeddedReader) Close() error {
	defer r.release()
	return r.r.Close()
}

func entry(e engine.Entry) Entry {
	if e.IsTick {
		return Entry{Offset: Offset(e.Offset), IsTick: true, Tick: e.Tick}
	}
	return Entry{Offset: Offset(e.Offset), Payload: e.Payload, Properties: e.Properties, Time: time.Unix(0, e.Time)}
}

func entries(es []engine.Entry) []Entry {
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = entry(e)
	}
	return out
}

func (l *embeddedLog) Truncate(ctx context.Context, before Offset) error {
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	if end := eng.Stats().End; uint64(before) > end {
		return fmt.Errorf("%w: cannot truncate %q before offset %d, the log ends at %d", ErrOutOfRange, l.name, before, end)
	}
	if _, err := l.c.meta.AdvanceStart(ctx, l.name, uint64(before)); err != nil {
		return l.c.metaErr(l.name, err)
	}
	if err := eng.Truncate(uint64(before)); err != nil {
		return fmt.Errorf("tern: truncate %q: %w", l.name, err)
	}
	return nil
}

// hasRetention reports whether the options set a retention bound.
func hasRetention(o LogOptions) bool {
	return o.RetentionAge != 0 || o.RetentionBytes != 0 || o.RetentionEntries != 0
}

// applyRetention applies the log's retention to eng, its open engine.
func (l *embeddedLog) applyRetention(eng engine.Engine) error {
	if !hasRetention(l.opts) {
		return nil
	}
	err := eng.ApplyRetention(time.Now(), engine.Retention{
		Age: l.opts.RetentionAge, Bytes: l.opts.RetentionBytes, Entries: uint64(l.opts.RetentionEntries),
		Keep: l.pinnedFrom(),
	})
	if err != nil {
		return fmt.Errorf("tern: apply retention to %q: %w", l.name, err)
	}
	return nil
}

// compactTimeout bounds one compaction pass of a log in the background.
const compactTimeout = 10 * time.Minute

// compact is Compact in the client's retention loop, which ctx stops.
func (l *embeddedLog) compact(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, compactTimeout)
	defer cancel()
	return l.Compact(ctx)
}

// Compact compacts an object log's sealed segments; a local log has none to
// compact.
func (l *embeddedLog) Compact(ctx context.Context) error {
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	c, ok := eng.(compacter)
	if !ok {
		return nil
	}
	if _, err := c.Compact(ctx); err != nil {
		return fmt.Errorf("tern: compact %q: %w", l.name, err)
	}
	return nil
}
