package replica

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/vfs"
)

// DefaultMemBytes is Options.MemBytes when it is zero.
const DefaultMemBytes = 256 << 20

// DefaultReuseJournals is how many dropped journals a Store keeps to write
// over, unless Options.ReuseJournals says otherwise.
const DefaultReuseJournals = 2

// Options configure a Store.
type Options struct {
	FS  vfs.FS
	Dir string // the store's directory; created if missing
	// Bucket is where Offload uploads sealed segments.
	Bucket blob.Bucket
	// MemBytes bounds the fragment data held in memory: that of unsealed
	// segments, for tail reads, and that of sealed segments not yet
	// offloaded, which Offload uploads from there; DefaultMemBytes if zero.
	// To make room, durable fragments leave memory, those of sealed
	// segments first, oldest first in their segment, and are read from the
	// journal; an add fails with rpcerr.ErrReplicaFull only when fragments not yet
	// durable would take memory over MemBytes. The buffers of fragments
	// that left memory, kept for AddBuffer to reuse, take up to half of
	// MemBytes more.
	MemBytes int64
	// DiskBytes bounds the journals' bytes on disk; zero for no limit. An
	// add over it fails with rpcerr.ErrReplicaFull. The dropped journals kept to be
	// written over (ReuseJournals) are not counted.
	DiskBytes int64
	// ReuseJournals is how many dropped journals the store keeps to write
	// new journals over, which spares the filesystem allocating their
	// blocks: DefaultReuseJournals if zero, none if negative.
	ReuseJournals int
	// ZeroAhead is how far past its last frame each journal is kept
	// written with zeros while its syncs average ZeroRound bytes or fewer
	// (vfs.Ahead): vfs.DefaultAhead and vfs.DefaultAheadRound if zero, not
	// at all if ZeroAhead is negative.
	ZeroAhead, ZeroRound int64
	Logger               *slog.Logger // slog.DiscardHandler if nil
}

// Store is the replica side of quorum mode on one node: segments' fragments
// in memory and in one journal file per segment, made durable by one
// committer goroutine. Its methods are safe for concurrent use; see the
// package comment for what each waits for.
type Store struct {
	fs      vfs.FS
	dir     string
	bucket  blob.Bucket
	maxMem  int64
	maxDisk int64
	maxFree int // dropped journals kept to write over
	// ahead and round are Options.ZeroAhead and ZeroRound, defaulted
	ahead, round int64
	log          *slog.Logger
	lock         io.Closer
	kick         chan struct{} // wakes the committer; capacity 1
	stopped      chan struct{} // closed when the committer has exited
	bufs         bufferPool    // for Buffer and AddBuffer

	logDirs map[uint64]bool // log directories known to be durable; committer's

	mu        sync.Mutex
	segs      map[SegmentID]*segment
	queue     []op // for the committer, in the order of the calls
	spare     []op // the committer's last batch, emptied, to reuse
	memBytes  int64
	diskBytes int64
	free      []string // dropped journals to write over, in the free directory
	freeing   int      // Drops moving a journal there
	freeSeq   uint64   // numbers the last name taken there
	closed    bool
}

// segment is one segment's state in the Store.
type segment struct {
	id SegmentID
	// opMu serialises Seal and Drop, which take several steps.
	opMu sync.Mutex

	// Guarded by Store.mu; changed by the committer where noted.
	file      vfs.File   // the journal; nil until the committer creates it
	nonce     uint64     // of the journal, in its header and every frame; set once
	initEpoch uint64     // in the journal header
	fenced    uint64     // adds below are refused
	persisted uint64     // the highest fenced epoch on disk; committer
	frags     []fragment // queued and durable, by number
	durable   uint64     // fragments on disk; committer
	end       int64      // journal size once the queue is written
	memBytes  int64      // fragment data held in memory
	memFrom   uint64     // fragments before it are not in memory
	sealing   bool       // adds are refused: a Seal is under way
	sealTo    uint64     // the count Seal asks the committer to persist
	sealSet   bool       // sealTo is set
	sealed    bool       // committer
	dropping  bool       // a Drop is under way or done
	failed    error      // an I/O error; every later call fails with it
	// zeros writes zeros ahead of the journal's frames, from its first
	// write on (zerosOn), and written is where the frames end in the
	// file; committer.
	zeros   vfs.Ahead
	zerosOn bool
	written int64
}

// fragment locates one fragment.
type fragment struct {
	pos  int64   // of its frame in the journal
	size int64   // of its data
	data []byte  // nil once it has left memory
	pool *pooled // data's buffer, if AddBuffer added it; nil when data is
}

// end is the journal position after the fragment's frame.
func (f fragment) end() int64 { return f.pos + frameBytes(int(f.size)) }

// op is work for the committer: a fragment to write, or, with write unset,
// a point in the queue whose outcome done learns (a barrier, or an add of a
// fragment already stored).
type op struct {
	seg   *segment
	n     uint64
	data  []byte
	sum   uint32 // the frame's checksum, FrameSum(n, data)
	write bool
	done  func(error)
}

// Open opens the store in opts.Dir, creating the directory if needed, and
// recovers every segment found there (see the package comment); it fails
// with a *CorruptError on damage it will not repair. The Store holds a lock
// on the directory until Close.
func Open(opts Options) (*Store, error) {
	if opts.FS == nil || opts.Dir == "" {
		return nil, fmt.Errorf("%w: options need FS and Dir", rpcerr.ErrInvalid)
	}
	s := &Store{
		fs:      opts.FS,
		dir:     opts.Dir,
		bucket:  opts.Bucket,
		maxMem:  cmp.Or(opts.MemBytes, DefaultMemBytes),
		maxDisk: opts.DiskBytes,
		maxFree: max(cmp.Or(opts.ReuseJournals, DefaultReuseJournals), 0),
		ahead:   cmp.Or(opts.ZeroAhead, vfs.DefaultAhead),
		round:   cmp.Or(max(opts.ZeroRound, 0), vfs.DefaultAheadRound),
		log:     opts.Logger,
		kick:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		logDirs: make(map[uint64]bool),
		segs:    make(map[SegmentID]*segment),
	}
	s.bufs.max = s.maxMem / 2
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := vfs.MkdirAllSync(s.fs, s.dir); err != nil {
		return nil, fmt.Errorf("replica: create %s: %w", s.dir, err)
	}
	lock, err := s.fs.Lock(filepath.Join(s.dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("replica: lock %s: %w", s.dir, err)
	}
	s.lock = lock
	err = s.recover()
	if err == nil {
		err = s.recoverFree()
	}
	if err != nil {
		s.closeFiles()
		lock.Close()
		return nil, err
	}
	go s.run()
	return s, nil
}

// newSegment adds an empty segment, with s.mu held. The committer creates
// its journal when it first sees it.
func (s *Store) newSegment(id SegmentID, epoch uint64) *segment {
	seg := &segment{id: id, nonce: newNonce(), initEpoch: epoch, fenced: epoch, end: headerBytes}
	s.segs[id] = seg
	s.diskBytes += headerBytes
	return seg
}

// usable returns the error that refuses every call on a failed or dropped
// segment, with Store.mu held.
func (seg *segment) usable() error {
	switch {
	case seg.failed != nil:
		return seg.failed
	case seg.dropping:
		return fmt.Errorf("%w: segment %v is dropped", rpcerr.ErrSegmentNotFound, seg.id)
	}
	return nil
}

// enqueue hands o to the committer, with s.mu held.
func (s *Store) enqueue(o op) {
	s.queue = append(s.queue, o)
	signal(s.kick)
}

// barrier waits until everything queued for seg before it has been
// committed (or failed), along with any change of seg's state made before
// it, with s.mu held when called; it returns with s.mu held.
func (s *Store) barrier(seg *segment) error {
	if s.closed {
		return rpcerr.ErrReplicaClosed
	}
	ch := make(chan error, 1)
	s.enqueue(op{seg: seg, done: func(err error) { ch <- err }})
	s.mu.Unlock()
	err := <-ch
	s.mu.Lock()
	return err
}

// lookup returns the segment, with s.mu held, or rpcerr.ErrSegmentNotFound.
func (s *Store) lookup(id SegmentID) (*segment, error) {
	if s.closed {
		return nil, rpcerr.ErrReplicaClosed
	}
	seg := s.segs[id]
	if seg == nil || seg.dropping {
		return nil, fmt.Errorf("%w: segment %v", rpcerr.ErrSegmentNotFound, id)
	}
	return seg, nil
}

func (s *Store) lookupLocked(id SegmentID) (*segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookup(id)
}

// SegmentInfo describes a segment, for diagnostics.
type SegmentInfo struct {
	ID       SegmentID
	Count    uint64 // durable fragments
	Queued   uint64 // fragments added, durable or not
	Sealed   bool
	Epoch    uint64 // fenced epoch
	Bytes    int64  // data of the durable fragments
	MemBytes int64  // fragment data held in memory
	Failed   error  // the I/O error that failed the segment
}

// Segments describes every segment, sorted by ID.
func (s *Store) Segments() []SegmentInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	infos := make([]SegmentInfo, 0, len(s.segs))
	for id, seg := range s.segs {
		if seg.dropping {
			continue
		}
		info := SegmentInfo{ID: id, Count: seg.durable, Queued: uint64(len(seg.frags)), Sealed: seg.sealed,
			Epoch: seg.fenced, MemBytes: seg.memBytes, Failed: seg.failed}
		for _, f := range seg.frags[:seg.durable] {
			info.Bytes += f.size
		}
		infos = append(infos, info)
	}
	slices.SortFunc(infos, func(a, b SegmentInfo) int {
		return cmp.Or(cmp.Compare(a.ID.Log, b.ID.Log), cmp.Compare(a.ID.Seq, b.ID.Seq))
	})
	return infos
}

// Close lets the committer finish what is queued, then closes the journals
// and releases the directory. Calls after Close fail with rpcerr.ErrReplicaClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	signal(s.kick)
	<-s.stopped
	s.closeFiles()
	return s.lock.Close()
}

func (s *Store) closeFiles() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segs {
		if seg.file != nil {
			seg.file.Close()
			seg.file = nil
		}
	}
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
