package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// SyncMode says when appends become durable.
type SyncMode int

const (
	// SyncAlways acknowledges an append after the fdatasync that covers it.
	SyncAlways SyncMode = iota
	// SyncInterval acknowledges after write(2) and syncs every SyncEvery.
	// Unsafe: a power loss can lose acknowledged entries.
	SyncInterval
	// SyncNever acknowledges after write(2) and syncs only when a segment is
	// sealed or the log closed. Unsafe.
	SyncNever
)

// Options configure a Log. Zero values take the defaults noted.
type Options struct {
	FS            vfs.FS
	Dir           string // the log's directory, holding only its segments, the closed record, the repairs file, the free directory and a merge's temporary file
	Sync          SyncMode
	SyncEvery     time.Duration // with SyncInterval; default 10ms
	SegmentBytes  int64         // roll when a segment would grow past this; default 256 MiB
	SegmentAge    time.Duration // roll a segment this old at the next append; 0: never
	MaxBatchBytes int           // a group stops growing at this size; default 4 MiB
	Codec         record.Codec  // compresses each batch
	Epoch         uint64        // the newest writer epoch, from metadata
	Start         uint64        // the truncation point, from metadata
	Disk          *Disk         // the data directory's disk, shared by its logs; nil: no reserve
	// ReuseSegments is how many files of segments that retention or a
	// truncation deletes the log keeps in Dir/free, to create new
	// segments over (see the package comment): DefaultReuseSegments if
	// zero, none if negative.
	ReuseSegments int
	// ZeroAhead is how far past its batches the active segment's file is
	// kept written with zeros while the log's rounds average ZeroRound
	// bytes per sync or fewer (segment.Writer.ZeroAhead): vfs.DefaultAhead
	// and vfs.DefaultAheadRound if zero, not at all if ZeroAhead is
	// negative.
	ZeroAhead, ZeroRound int64
	// MergeSmall is the size under which a sealed segment's file is small:
	// adjacent small sealed segments are merged into one file, in the
	// background (see the package comment). SegmentBytes/8 if zero; no
	// merging if negative.
	MergeSmall int64
	// RetentionAge is the log's retention by age, if it has one: segments
	// are merged only while their newest entries lie within an eighth of
	// it of each other, so that a merged file does not keep entries much
	// longer than their own segments would have been kept.
	RetentionAge time.Duration
	Now          func() time.Time
	Logger       *slog.Logger
}

func (o *Options) setDefaults() {
	if o.SyncEvery <= 0 {
		o.SyncEvery = 10 * time.Millisecond
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 256 << 20
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 4 << 20
	}
	if o.ZeroAhead == 0 {
		o.ZeroAhead = vfs.DefaultAhead
	}
	if o.ZeroRound <= 0 {
		o.ZeroRound = vfs.DefaultAheadRound
	}
	o.Now, o.Logger = engine.Defaults(o.Now, o.Logger)
}

// ahead has w write zeros ahead as the options say, and returns it.
func (l *Log) ahead(w *segment.Writer) *segment.Writer {
	if w != nil && l.opts.ZeroAhead > 0 {
		w.ZeroAhead(l.opts.ZeroAhead, l.opts.ZeroRound)
	}
	return w
}

// Log is one log's write and read path. It is safe for concurrent use.
type Log struct {
	opts Options

	// commitMu serialises what changes the files: commit rounds, fencing,
	// rolling, syncing, and deleting segments.
	commitMu sync.Mutex
	w        *segment.Writer // the active segment; nil until the next append creates one
	tail     uint64          // the next offset to assign
	dirty    bool            // the active segment has unsynced writes
	syncs    atomic.Uint64   // fdatasync calls, for Stats
	// The pipeline (pipeline.go).
	written  []*round      // rounds written and waiting for a flight, oldest first
	flight   *flight       // the fdatasync in the air; nil if none
	lastSync time.Duration // how long the last flight's fdatasync took
	acked    int           // appends the last flight acknowledged, until a gather waits for them
	ackTime  time.Time     // when it acknowledged them
	noShows  int           // gathers in a row that waited in vain (gather)
	alarm    *alarm        // ends a gather's wait on time (preciseGather); nil until one needs it
	spare    []*round      // settled rounds, to be used again
	free     []freeFile    // deleted segments' files to write over (free.go)
	freeMade bool          // the free directory exists, durably

	flights    chan *flight // to the syncer goroutine, with SyncAlways
	syncerDone chan struct{}

	// mu guards the state below, which readers and appenders see.
	mu    sync.Mutex
	queue engine.Queue // appends waiting for the committer
	// dedupLoad (its own lock, taken before mu) rebuilds queue.Dedup
	// from the segments at the first append with a producer.
	dedupLoad engine.DedupLoad
	epoch     uint64
	closedAt  uint64 // where the log ended at its last clean close, as recorded; 0 if not
	start     uint64
	end       uint64         // offset after the last acknowledged entry
	sealed    []segment.Info // sealed segments, oldest first
	active    segment.Info   // the active segment as acknowledged; Path "" if none
	advanced  chan struct{}  // closed when end moves, ticks arrive, or the log closes
	owned     func() bool    // the current writer's claim check; nil: always owned
	closed    bool
	ackedAt   uint64    // queue.Added() when the last rounds were acknowledged
	want      uint64    // wake the committer when queue.Added() reaches this; 0: no one waits
	backAt    time.Time // when the first append came while the committer waited (gather); zero if none

	logical logicalCache // for LogicalBytes
	readers engine.Readers
	failed  error
	damage  *Damage // the open segment's damage, while the log is degraded

	// The merger (merge.go).
	merges    uint64 // merges switched in, under mu: readers look a segment up again after one
	mergeMu   sync.Mutex
	mergeKick chan struct{}
	mergeCtx  context.Context
	mergeStop context.CancelFunc
	mergeDone chan struct{}

	wake     chan struct{}
	finished chan struct{} // closed when the committer exits
	stopSync chan struct{}
	syncDone chan struct{}
}

// Open recovers the log in opts.Dir (creating the directory if needed) and
// starts its committer. Damage to the open segment that is not a torn tail
// opens the log degraded (see Damage); other corruption fails Open with a
// *rpcerr.CorruptError.
func Open(ctx context.Context, opts Options) (*Log, error) {
	opts.setDefaults()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &Log{
		opts:     opts,
		epoch:    opts.Epoch,
		advanced: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		finished: make(chan struct{}),
	}
	l.queue.MaxBatchBytes, l.queue.Codec = opts.MaxBatchBytes, opts.Codec
	l.readers = engine.NewReaders(&l.mu)
	if err := l.recover(); err != nil {
		return nil, err
	}
	if opts.Sync == SyncAlways {
		l.flights, l.syncerDone = make(chan *flight, 1), make(chan struct{})
		go l.syncer()
	}
	go l.run()
	if opts.Sync == SyncInterval {
		l.stopSync, l.syncDone = make(chan struct{}), make(chan struct{})
		go l.syncEvery()
	}
	l.startMerges()
	return l, nil
}

func (l *Log) recover() error {
	fs, dir := l.opts.FS, l.opts.Dir
	if err := vfs.MkdirAllSync(fs, dir); err != nil {
		return fmt.Errorf("wal: create %s: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("wal: list %s: %w", dir, err)
	}
	var paths []string
	for _, name := range names {
		if _, ok := segment.ParseFileName(name); ok {
			paths = append(paths, dir+"/"+name)
		}
		if isMergeTemp(name) {
			// Not synced: a crash brings it back, and the next Open
			// removes it again.
			l.opts.Logger.Info("removing the file of a merge a crash cut short", "path", dir+"/"+name)
			if err := fs.Remove(dir + "/" + name); err != nil {
				return fmt.Errorf("wal: remove %s: %w", dir+"/"+name, err)
			}
		}
	}
	closedAt, err := l.readClosed()
	if err != nil {
		return err
	}
	l.closedAt = closedAt
	if err := l.recoverFree(); err != nil {
		return err
	}
	l.tail = l.opts.Start
	for i, path := range paths {
		if i < len(paths)-1 {
			info, err := segment.ReadSealed(fs, path)
			if err != nil {
				return err
			}
			if err := l.addSealed(info); err != nil {
				return err
			}
			continue
		}
		info, w, err := segment.Recover(fs, path, closedAt)
		switch {
		case err != nil || w == nil || w.Cut() == 0:
		case w.CutZeros():
			l.opts.Logger.Info("recovery cut the open segment after its last whole batch: zeros, written ahead of the appends (or a torn write, or zeroed batches, which read the same)",
				"path", path, "at", info.Size, "bytes", w.Cut())
		default:
			l.opts.Logger.Warn("recovery cut the open segment after its last whole batch: a crash tore the last write, or the last batches are damaged",
				"path", path, "at", info.Size, "bytes", w.Cut())
		}
		if errors.Is(err, segment.ErrUnfinished) {
			l.opts.Logger.Warn("removing a segment file whose creation a crash cut short", "path", path)
			if err := segment.Remove(fs, path); err != nil {
				return err
			}
			break
		}
		if err != nil {
			if err := l.degrade(path, err); err != nil {
				if errors.Is(err, segment.ErrCutAcknowledged) {
					err = l.closedHint(err)
				}
				return err
			}
			break
		}
		if w == nil {
			if err := l.addSealed(info); err != nil {
				return err
			}
		} else {
			l.w, l.active = l.ahead(w), info
		}
	}
	all := l.segments()
	for i := 1; i < len(all); i++ {
		if all[i-1].Next != all[i].Base {
			return &rpcerr.CorruptError{Path: all[i].Path, Pos: 0,
				Err: fmt.Errorf("segments are not contiguous: offsets %d to %d are missing", all[i-1].Next, all[i].Base)}
		}
	}
	if len(all) > 0 {
		l.tail = all[len(all)-1].Next
		l.start = max(l.opts.Start, all[0].Base)
	} else {
		l.start = l.tail
	}
	if l.tail < closedAt && l.damage == nil {
		path := dir
		if len(all) > 0 {
			path = all[len(all)-1].Path
		}
		return l.closedHint(&rpcerr.CorruptError{Path: path, Pos: 0,
			Err: fmt.Errorf("the log ends at offset %d, but it was closed at offset %d: the segments holding the rest are missing", l.tail, closedAt)})
	}
	l.end = l.tail
	l.queue.SetEnd(l.tail)
	return nil
}

// addSealed adds a sealed segment found by recovery, or removes its file
// if the segment before it covers it: a merge copied it there, and a crash
// came before the file was removed.
func (l *Log) addSealed(info segment.Info) error {
	if n := len(l.sealed); n > 0 && coveredBy(info, l.sealed[n-1]) {
		l.opts.Logger.Info("removing a segment file a merge left behind: its entries are in the segment before it",
			"path", info.Path, "merged_into", l.sealed[n-1].Path)
		return segment.Remove(l.opts.FS, info.Path)
	}
	l.sealed = append(l.sealed, info)
	return nil
}

// closedHint adds to a corruption found at recovery what a person can do
// once the closed record makes it fatal.
func (l *Log) closedHint(err error) error {
	return fmt.Errorf("%w (the log was closed cleanly at offset %d; to open it without the entries lost, remove %s)",
		err, l.closedAt, l.closedPath())
}

// recordClosed records that the log, closed cleanly with every segment
// sealed, ends at end, unless that is already recorded: recovery then knows
// every entry below end was acknowledged, and takes damage that would cut
// one off for what it is instead of a torn write.
func (l *Log) recordClosed(end uint64) error {
	if end == l.closedAt {
		return nil
	}
	if err := l.writeClosed(end); err != nil {
		return err
	}
	l.closedAt = end
	return nil
}

// segments returns the sealed segments and the active one, oldest first.
// The caller holds mu (or owns l exclusively).
func (l *Log) segments() []segment.Info {
	all := l.sealed[:len(l.sealed):len(l.sealed)]
	if l.active.Path != "" {
		all = append(all, l.active)
	}
	return all
}

// Stats returns the log's current extent. Its Bytes are those of the
// segments: the files kept in the free directory to be written over hold
// no entry of the log and are not counted.
func (l *Log) Stats() engine.Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := engine.Stats{Start: l.start, End: l.end, Epoch: l.epoch, Syncs: l.syncs.Load()}
	for _, seg := range l.segments() {
		s.Bytes += seg.Size
		s.Segments++
	}
	return s
}

// Truncate is engine.Engine's: the start is raised at once, and the
// segments below it deleted after the commit round in flight.
func (l *Log) Truncate(before uint64) error {
	return engine.Truncate(&l.mu, &l.start, &l.end, before, l.ApplyRetention)
}

// Close finishes the queued appends, seals the active segment (or, if the
// log has failed, syncs what it can), and closes the files. Readers waiting
// at the tail return rpcerr.ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	already := l.closed
	l.closed = true
	l.mu.Unlock()
	if already {
		return nil
	}
	l.stopMerges()
	engine.Wake(l.wake)
	<-l.finished
	if l.alarm != nil {
		l.alarm.close()
	}
	if l.flights != nil {
		close(l.flights)
		<-l.syncerDone
	}
	if l.stopSync != nil {
		close(l.stopSync)
		<-l.syncDone
	}
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	l.mu.Lock()
	failed, tail := l.failed, l.tail
	l.mu.Unlock()
	var err error
	switch {
	case l.w == nil:
		if failed == nil {
			err = l.recordClosed(tail)
		}
	case failed == nil && l.w.Info().Next > l.w.Info().Base:
		// Sealed, the segment needs no recovery scan at the next Open.
		var info segment.Info
		if info, err = l.w.Seal(); err == nil {
			err = l.recordClosed(info.Next)
		}
		l.w = nil
	default:
		if l.dirty {
			err = l.w.Sync()
		}
		err = errors.Join(err, l.w.Close())
		l.w = nil
	}
	l.mu.Lock()
	close(l.advanced)
	l.mu.Unlock()
	return err
}
