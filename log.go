package tern

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/quorumlog"
	"github.com/ternwal/tern/internal/wal"
)

// Offset is the position of an entry in its log: dense, from 0, never reused.
type Offset uint64

// Log is a handle on an open log. It is safe for concurrent use.
type Log struct {
	remote *remoteLog // set for a log of a server; the fields below are then unused

	c       *Client
	name    string
	id      uint64
	created time.Time
	opts    LogOptions
	eng     engine.Engine // the write and read path of the log's mode

	subsMu     sync.Mutex
	subs       map[string]*subState // the log's subscriptions, by name
	subsClosed bool                 // the log is closing: no more commits are scheduled
}

// LogInfo describes a log.
type LogInfo struct {
	Name     string
	ID       uint64
	Created  time.Time
	Options  LogOptions
	Start    Offset // the first offset that can be read
	End      Offset // the offset the next append gets
	Bytes    int64  // bytes of its segments, in files or objects
	Segments int
	Epoch    uint64 // the newest writer's epoch; 0 before the first writer
	// Objects is the number of objects holding a log in object mode: one
	// per upload until compaction rewrites a sealed segment's into a few
	// large ones. 0 for a local log.
	Objects int
}

func encodeOptions(o LogOptions) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("tern: encode log options: %w", err)
	}
	return b, nil
}

// openLocked opens the log m describes. The caller holds c.mu.
func (c *Client) openLocked(ctx context.Context, m meta.Log) (*Log, error) {
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
			Prefix:        fmt.Sprintf("%d/", m.ID),
			FlushBytes:    opts.FlushBytes,
			FlushInterval: opts.FlushInterval,
			MaxInFlight:   opts.UploadsInFlight,
			SegmentBytes:  opts.SegmentBytes,
			SegmentAge:    opts.SegmentAge,
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
			Logger:       c.opts.Logger.With("log", m.Name),
		})
		if err != nil {
			return nil, fmt.Errorf("tern: open log %q: %w", m.Name, err)
		}
		eng = w
	}
	l := &Log{c: c, name: m.Name, id: m.ID, created: m.Created, opts: opts, eng: eng}
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
func (l *Log) close() error {
	err := l.closeSubs()
	return errors.Join(err, l.eng.Close())
}

// Name is the log's name.
func (l *Log) Name() string {
	if l.remote != nil {
		return l.remote.Name()
	}
	return l.name
}

// Options returns the log's settings.
func (l *Log) Options() LogOptions {
	if l.remote != nil {
		return l.remote.Options()
	}
	return l.opts
}

// Info describes the log as it is now.
func (l *Log) Info(ctx context.Context) (LogInfo, error) {
	if l.remote != nil {
		return l.remote.Info(ctx)
	}
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

// OpenWriter opens the log's writer with a new epoch. Every older writer is
// fenced: once OpenWriter returns, none of their appends is acknowledged, and
// their later appends fail with ErrFenced.
//
// The writer holds a claim on its epoch in the metadata store. With etcd
// metadata the claim rides on a lease: if the lease cannot be renewed (etcd
// unreachable) the writer stops acknowledging and its appends fail with
// ErrFenced, since another process may have taken the log over.
func (l *Log) OpenWriter(ctx context.Context) (*Writer, error) {
	if l.remote != nil {
		return l.remote.OpenWriter(ctx)
	}
	claim, err := l.c.meta.ClaimWriter(ctx, l.name)
	if err != nil {
		return nil, l.c.metaErr(l.name, err)
	}
	if err := l.eng.Fence(ctx, claim.Epoch(), claim.Valid); err != nil {
		claim.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return &Writer{l: l, epoch: claim.Epoch(), claim: claim}, nil
}

// ReadOption changes how a Reader or Subscriber reads.
type ReadOption func(*readOptions)

type readOptions struct {
	ticks bool
}

// WithTicks makes the Reader or Subscriber return, besides entries, the time
// ticks appended while it is open, each in its place between the entries:
// an Entry with IsTick set. See Writer.AppendTimeTick.
func WithTicks() ReadOption { return func(o *readOptions) { o.ticks = true } }

func readOpts(opts []ReadOption) readOptions {
	var o readOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// OpenReader returns a Reader positioned at from, which must be between the
// log's Start and End (inclusive). A from below Start fails with a
// *TruncatedError.
func (l *Log) OpenReader(ctx context.Context, from Offset, opts ...ReadOption) (*Reader, error) {
	if l.remote != nil {
		return l.remote.OpenReader(ctx, from, readOpts(opts))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := l.eng.NewReader(uint64(from), readOpts(opts).ticks)
	if err != nil {
		return nil, err // says which offset, and where the log starts or ends
	}
	return &Reader{r: r}, nil
}

// Truncate declares that the entries below before are no longer needed:
// reads below it fail with ErrTruncated from now on, and the segments wholly
// below it are deleted. The start only moves forward; before may be at most
// End.
func (l *Log) Truncate(ctx context.Context, before Offset) error {
	if l.remote != nil {
		return l.remote.Truncate(ctx, before)
	}
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

func (l *Log) applyRetention() error {
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
func (l *Log) compact(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, compactTimeout)
	defer cancel()
	return l.Compact(ctx)
}

// Compact rewrites the objects of an object log's sealed segments (one per
// upload) into a few large ones now, as the client otherwise does every
// RetentionInterval. A local log, and a remote one (its server compacts
// it), have nothing to compact here.
func (l *Log) Compact(ctx context.Context) error {
	oe, ok := l.eng.(compacter)
	if l.remote != nil || !ok {
		return nil
	}
	if _, err := oe.Compact(ctx); err != nil {
		return fmt.Errorf("tern: compact %q: %w", l.name, err)
	}
	return nil
}
