package tern

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/quorumlog"
	"github.com/ternwal/tern/internal/wal"
)

// embeddedLog is a log kept by this process: its metadata, its engine (the
// write and read path of its mode) and its subscriptions. It is safe for
// concurrent use.
type embeddedLog struct {
	c       *embeddedClient
	name    string
	id      uint64
	created time.Time
	opts    LogOptions
	eng     engine.Engine // the write and read path of the log's mode

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

// openLocked opens the log m describes. The caller holds c.mu.
func (c *embeddedClient) openLocked(ctx context.Context, m meta.Log) (*embeddedLog, error) {
	var opts LogOptions
	if err := json.Unmarshal(m.Options, &opts); err != nil {
		return nil, fmt.Errorf("tern: log %q has unreadable options: %w", m.Name, err)
	}
	var eng engine.Engine
	switch opts.Mode {
	case ModeObject, ModeQuorum:
		if c.bucket == nil {
			return nil, errNoStorage(m.Name)
		}
		oo := objlog.Options{
			Bucket:        c.bucket,
			Meta:          objlog.StoreMeta(c.meta, m.Name),
			Prefix:        objectPrefix(m),
			FlushBytes:    opts.FlushBytes,
			FlushInterval: opts.FlushInterval,
			MaxInFlight:   opts.UploadsInFlight,
			SegmentBytes:  opts.SegmentBytes,
			SegmentAge:    opts.SegmentAge,
			SharedCache:   c.cache,
			Epoch:         m.Epoch,
			Start:         m.Start,
			Logger:        c.opts.Logger.With("log", m.Name),
		}
		var ol *objlog.Log
		var err error
		if opts.Mode == ModeQuorum {
			if c.opts.Cluster == nil {
				return nil, errNoCluster(m.Name)
			}
			ol, err = quorumlog.Open(ctx, oo, quorumlog.Replicas{
				Config: quorum.Config{Ensemble: opts.Ensemble, AckQuorum: opts.AckQuorum},
				Log:    m.ID,
				Node:   c.opts.Cluster.Node,
				Live:   c.opts.Cluster.Live,
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
			FS:           c.fs,
			Dir:          c.logDir(m.ID),
			Sync:         mode[opts.Fsync.Mode],
			SyncEvery:    opts.Fsync.Interval,
			SegmentBytes: opts.SegmentBytes,
			SegmentAge:   opts.SegmentAge,
			Epoch:        m.Epoch,
			Start:        m.Start,
			Disk:         c.disk,
			Logger:       c.opts.Logger.With("log", m.Name),
		})
		if err != nil {
			// A new log's directory may not fit on a full disk.
			return nil, fmt.Errorf("tern: open log %q: %w", m.Name, c.disk.Failed(c.logDir(m.ID), err))
		}
		eng = w
	}
	c.damaged.note(m.Name, eng)
	l := &embeddedLog{c: c, name: m.Name, id: m.ID, created: m.Created, opts: opts, eng: eng}
	if err := l.loadSubs(ctx); err != nil {
		eng.Close()
		return nil, err
	}
	if err := l.applyRetention(); err != nil {
		eng.Close()
		return nil, err
	}
	c.logs[m.Name] = l
	return l, nil
}

// close ends the log's subscribers, commits their cursors and closes the
// write path.
func (l *embeddedLog) close() error {
	err := l.closeSubs()
	return errors.Join(err, l.eng.Close())
}

func (l *embeddedLog) Name() string        { return l.name }
func (l *embeddedLog) Options() LogOptions { return l.opts }

func (l *embeddedLog) Info(ctx context.Context) (LogInfo, error) {
	if err := ctx.Err(); err != nil {
		return LogInfo{}, err
	}
	s := l.eng.Stats()
	return LogInfo{
		Name: l.name, ID: l.id, Created: l.created, Options: l.opts,
		Start: Offset(s.Start), End: Offset(s.End), Bytes: s.Bytes, Segments: s.Segments, Epoch: s.Epoch,
		Objects: s.Objects,
	}, nil
}

// OpenWriter claims a new epoch in the metadata store and fences the engine
// with it.
func (l *embeddedLog) OpenWriter(ctx context.Context) (writerImpl, error) {
	claim, err := l.c.meta.ClaimWriter(ctx, l.name)
	if err != nil {
		return nil, l.c.metaErr(l.name, err)
	}
	if err := l.eng.Fence(ctx, claim.Epoch(), claim.Valid); err != nil {
		claim.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return &embeddedWriter{l: l, epoch: claim.Epoch(), claim: claim}, nil
}

func (l *embeddedLog) OpenReader(ctx context.Context, from Offset, opts ...ReadOption) (readerImpl, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o := client.NewReadOptions(opts...)
	r, err := l.eng.NewReader(uint64(from), o.Ticks)
	if err != nil {
		return nil, err // says which offset, and where the log starts or ends
	}
	return embeddedReader{r: r, maxBytes: o.MaxBatchBytes}, nil
}

// embeddedReader is a Reader of an engine.
type embeddedReader struct {
	r        engine.Reader
	maxBytes int // of one NextBatch (WithMaxBatchBytes)
}

func (r embeddedReader) Next(ctx context.Context) (Entry, error) {
	e, err := r.r.Next(ctx)
	if err != nil {
		return Entry{}, err
	}
	return entry(e), nil
}

func (r embeddedReader) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	es, err := r.r.NextBatch(ctx, max, r.maxBytes)
	if err != nil {
		return nil, err
	}
	return entries(es), nil
}

func (r embeddedReader) Close() error { return r.r.Close() }

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
	if end := l.eng.Stats().End; uint64(before) > end {
		return fmt.Errorf("%w: cannot truncate %q before offset %d, the log ends at %d", ErrOutOfRange, l.name, before, end)
	}
	if _, err := l.c.meta.AdvanceStart(ctx, l.name, uint64(before)); err != nil {
		return l.c.metaErr(l.name, err)
	}
	if err := l.eng.Truncate(uint64(before)); err != nil {
		return fmt.Errorf("tern: truncate %q: %w", l.name, err)
	}
	return nil
}

func (l *embeddedLog) applyRetention() error {
	if l.opts.RetentionAge == 0 && l.opts.RetentionBytes == 0 && l.opts.RetentionEntries == 0 {
		return nil
	}
	err := l.eng.ApplyRetention(time.Now(), engine.Retention{
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
	c, ok := l.eng.(compacter)
	if !ok {
		return nil
	}
	if _, err := c.Compact(ctx); err != nil {
		return fmt.Errorf("tern: compact %q: %w", l.name, err)
	}
	return nil
}
