package replica

import (
	"bytes"
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
	Logger        *slog.Logger // slog.DiscardHandler if nil
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
	log     *slog.Logger
	lock    io.Closer
	kick    chan struct{} // wakes the committer; capacity 1
	stopped chan struct{} // closed when the committer has exited
	bufs    bufferPool    // for Buffer and AddBuffer

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

// Add queues fragment n of seg, sent by a writer (or recoverer) of epoch,
// with sum its frame's checksum (FrameSum), and returns without waiting:
// done is called once, from the committer goroutine, with nil when the
// fragment is durable or the error that failed it; it may be nil. For one
// segment, done calls come in the order of the Adds. done must not block
// nor call a method of the Store that waits (Fence, Seal, Drop, Offload,
// Close). If Add returns an error, done is not called.
//
// The Store keeps data as the fragment's in-memory copy: the caller must not
// modify it afterwards. It writes sum into the journal as it is, without
// checking it against data: a sum that does not match fails the frame's
// check when it is read from the journal. Adding a fragment already stored
// with the same bytes succeeds; done reports when the stored one is
// durable.
func (s *Store) Add(id SegmentID, epoch, n uint64, data []byte, sum uint32, done func(error)) error {
	return s.add(id, epoch, n, data, nil, sum, done)
}

// Buffer returns a buffer of n bytes for a fragment's data, to give to
// AddBuffer: one of a fragment that has left memory, when the Store has
// one of about that size, and otherwise a new one.
func (s *Store) Buffer(n int) []byte { return s.bufs.get(n) }

// AddBuffer is Add for data in a buffer from Buffer, which the Store then
// owns, whatever the outcome: it reuses the buffer once the fragment has
// left memory and no read uses it, or at once if it does not keep it.
func (s *Store) AddBuffer(id SegmentID, epoch, n uint64, data []byte, sum uint32, done func(error)) error {
	return s.add(id, epoch, n, data, &pooled{b: data, refs: 1}, sum, done)
}

// add is Add, for data in b if b is not nil, with one hold on b that it
// releases; a fragment that keeps data takes a hold of its own.
func (s *Store) add(id SegmentID, epoch, n uint64, data []byte, b *pooled, sum uint32, done func(error)) error {
	if len(data) > MaxFragmentBytes {
		return fmt.Errorf("%w: fragment of %d bytes, the limit is %d", rpcerr.ErrInvalid, len(data), MaxFragmentBytes)
	}
	if done == nil {
		done = func(error) {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.release(b)
	if s.closed {
		return rpcerr.ErrReplicaClosed
	}
	seg := s.segs[id]
	if seg == nil {
		if n > 0 {
			return fmt.Errorf("%w: fragment %d of %v, which has none", rpcerr.ErrFragmentGap, n, id)
		}
		if !s.makeRoom(int64(len(data)), headerBytes+frameBytes(len(data))) {
			return fmt.Errorf("%w: no room for a new segment %v", rpcerr.ErrReplicaFull, id)
		}
		seg = s.newSegment(id, epoch)
	}
	if err := seg.usable(); err != nil {
		return err
	}
	switch {
	case epoch < seg.fenced:
		return fmt.Errorf("%w: epoch %d is below %d on %v", rpcerr.ErrSegmentFenced, epoch, seg.fenced, id)
	case seg.sealed || seg.sealing:
		return fmt.Errorf("%w: %v", rpcerr.ErrSegmentSealed, id)
	}
	queued := uint64(len(seg.frags))
	switch {
	case n < queued:
		same, err := sameData(seg, n, data)
		if err != nil {
			return err
		}
		if !same {
			return fmt.Errorf("%w: fragment %d of %v", rpcerr.ErrFragmentMismatch, n, id)
		}
		s.enqueue(op{seg: seg, n: n, done: done})
		return nil
	case n > queued:
		return fmt.Errorf("%w: fragment %d of %v, which has %d", rpcerr.ErrFragmentGap, n, id, queued)
	}
	size := frameBytes(len(data))
	if !s.makeRoom(int64(len(data)), size) {
		return fmt.Errorf("%w: fragment %d of %v", rpcerr.ErrReplicaFull, n, id)
	}
	if n == 0 {
		// The first add's epoch fences older writers, as Fence would.
		seg.fenced = max(seg.fenced, epoch)
	}
	f := fragment{pos: seg.end, size: int64(len(data)), data: data, pool: b}
	f.hold()
	seg.frags = append(seg.frags, f)
	seg.end += size
	seg.memBytes += int64(len(data))
	s.memBytes += int64(len(data))
	s.diskBytes += size
	s.enqueue(op{seg: seg, n: n, data: data, sum: sum, write: true, done: done})
	return nil
}

// makeRoom reports, with s.mu held, whether mem more bytes in memory and
// disk more on disk stay within the limits, once durable fragments have left
// memory to make room: those of sealed segments first, which only an
// offload still reads, oldest first in their segment.
func (s *Store) makeRoom(mem, disk int64) bool {
	if s.maxDisk != 0 && s.diskBytes+disk > s.maxDisk {
		return false
	}
	for _, sealed := range []bool{true, false} {
		for _, seg := range s.segs {
			if seg.sealed != sealed {
				continue
			}
			for s.memBytes+mem > s.maxMem && seg.memFrom < seg.durable {
				s.forget(seg, seg.memFrom)
				seg.memFrom++
			}
			if s.memBytes+mem <= s.maxMem {
				return true
			}
		}
	}
	return s.memBytes+mem <= s.maxMem
}

// forget takes fragment n of seg out of memory, with s.mu held.
func (s *Store) forget(seg *segment, n uint64) {
	f := &seg.frags[n]
	if f.data != nil {
		s.release(f.pool)
		f.data, f.pool = nil, nil
		seg.memBytes -= f.size
		s.memBytes -= f.size
	}
}

// sameData reports whether fragment n of seg, queued or durable, holds
// data; it reads a fragment that has left memory from the journal. The
// caller holds s.mu.
func sameData(seg *segment, n uint64, data []byte) (bool, error) {
	f := seg.frags[n]
	switch {
	case f.size != int64(len(data)):
		return false, nil
	case f.data != nil || f.size == 0:
		return bytes.Equal(f.data, data), nil
	}
	stored := make([]byte, f.size)
	if err := readAt(seg.file, stored, f.pos+frameHeaderBytes); err != nil {
		return false, fmt.Errorf("replica: read fragment %d of %v: %w", n, seg.id, err)
	}
	return bytes.Equal(stored, data), nil
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

// Fence refuses, from now on, adds to seg with an epoch below epoch, and
// returns the durable fragment count once every add queued before it is
// durable or failed and the new fenced epoch is durable. Fencing at the
// fenced epoch again only waits; below it fails with rpcerr.ErrSegmentFenced. An unknown
// segment is created, empty. Adds at epoch or above are still accepted.
func (s *Store) Fence(id SegmentID, epoch uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, rpcerr.ErrReplicaClosed
	}
	seg := s.segs[id]
	if seg == nil {
		seg = s.newSegment(id, epoch)
	}
	if err := seg.usable(); err != nil {
		return 0, err
	}
	if epoch < seg.fenced {
		return 0, fmt.Errorf("%w: epoch %d is below %d on %v", rpcerr.ErrSegmentFenced, epoch, seg.fenced, id)
	}
	raised := epoch > seg.fenced
	seg.fenced = epoch
	if err := s.barrier(seg); err != nil {
		return 0, err
	}
	if raised {
		s.log.Info("replica: segment fenced", "segment", id, "epoch", epoch, "count", seg.durable)
	}
	return seg.durable, nil
}

// List returns the sizes of seg's durable fragments, in order.
func (s *Store) List(id SegmentID) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seg, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	sizes := make([]int64, seg.durable)
	for i := range sizes {
		sizes[i] = seg.frags[i].size
	}
	return sizes, nil
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

// Read reads durable fragment n of seg from off into p, as io.ReaderAt
// does: it returns fewer than len(p) bytes only at the fragment's end, and
// then io.EOF. It fails with rpcerr.ErrSegmentNotFound if the segment is unknown or the
// fragment not durable. It reads from memory while the fragment is held
// there, and otherwise from the journal: the whole frame, even for part of
// the fragment, which is checked first. A frame that fails its check gives
// a *CorruptError and no bytes: the caller must read another replica.
func (s *Store) Read(id SegmentID, n uint64, off int64, p []byte) (int, error) {
	s.mu.Lock()
	seg, err := s.lookup(id)
	if err == nil && n >= seg.durable {
		err = fmt.Errorf("%w: fragment %d of %v, which has %d durable", rpcerr.ErrSegmentNotFound, n, id, seg.durable)
	}
	if err != nil {
		s.mu.Unlock()
		return 0, err
	}
	f, file := seg.frags[n], seg.file
	if held := f.hold(); held != nil {
		defer s.releaseAll(held) // once copied from
	}
	s.mu.Unlock()
	if testHookRead != nil {
		testHookRead()
	}
	if off < 0 {
		return 0, fmt.Errorf("%w: read at offset %d", rpcerr.ErrInvalid, off)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := int(min(int64(len(p)), f.size-off))
	if f.data != nil {
		copy(p, f.data[off:])
	} else {
		data, err := s.readFrame(seg, file, n, f)
		if err != nil {
			return 0, err
		}
		copy(p, data[off:])
	}
	if want < len(p) {
		return want, io.EOF
	}
	return want, nil
}

// readFrame reads fragment n of seg, located by f, from its journal file,
// whole, and returns its data once the frame is checked. A frame that fails
// its check, or holds another fragment, gives a *CorruptError.
func (s *Store) readFrame(seg *segment, file vfs.File, n uint64, f fragment) ([]byte, error) {
	id := seg.id
	frame := make([]byte, frameBytes(int(f.size)))
	if err := readAt(file, frame, f.pos); err != nil {
		if _, lerr := s.lookupLocked(id); lerr != nil {
			return nil, lerr // dropped while reading
		}
		return nil, fmt.Errorf("replica: read fragment %d of %v: %w", n, id, err)
	}
	got, data, err := decodeFrame(frame, seg.nonce)
	if err == nil && (got != n || int64(len(data)) != f.size) {
		err = fmt.Errorf("%w: frame of fragment %d holds fragment %d, %d bytes", errBadFrame, n, got, len(data))
	}
	if err != nil {
		return nil, &CorruptError{Path: journalPath(s.dir, id), Pos: f.pos, Err: err}
	}
	return data, nil
}

// testHookRead, if set, runs in each Read between taking the fragment and
// copying from it.
var testHookRead func()

func (s *Store) lookupLocked(id SegmentID) (*segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookup(id)
}

// Seal discards seg's fragments from count on and closes the segment to
// adds (rpcerr.ErrSegmentSealed), durably: the fragments beyond count are cut from the
// journal. count must not exceed the durable count. Sealing again at the
// same count succeeds; at another count it fails with rpcerr.ErrSegmentSealed. A sealed
// segment's fragments stay in memory, for Offload, until it is offloaded or
// dropped or memory is needed.
func (s *Store) Seal(id SegmentID, count uint64) error {
	seg, err := s.lookupLocked(id)
	if err != nil {
		return err
	}
	seg.opMu.Lock()
	defer seg.opMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := seg.usable(); err != nil {
		return err
	}
	if seg.sealed {
		if count != seg.durable {
			return fmt.Errorf("%w: %v is sealed at %d fragments, not %d", rpcerr.ErrSegmentSealed, id, seg.durable, count)
		}
		return nil
	}
	if count > uint64(len(seg.frags)) {
		return fmt.Errorf("%w: seal %v at %d fragments, it has %d", rpcerr.ErrInvalid, id, count, len(seg.frags))
	}
	// Refuse adds, and let those queued finish.
	seg.sealing = true
	if err := s.barrier(seg); err != nil {
		seg.sealing = false
		return err
	}
	if count > seg.durable {
		seg.sealing = false
		return fmt.Errorf("%w: seal %v at %d fragments, %d are durable", rpcerr.ErrInvalid, id, count, seg.durable)
	}
	seg.sealTo, seg.sealSet = count, true
	if err := s.barrier(seg); err != nil {
		return err
	}
	s.log.Info("replica: segment sealed", "segment", id, "count", count)
	return nil
}

// Drop removes seg's files and memory. Dropping an unknown segment is no
// error. It waits for the adds queued for seg to finish.
func (s *Store) Drop(id SegmentID) error {
	s.mu.Lock()
	seg, closed := s.segs[id], s.closed
	s.mu.Unlock()
	if closed {
		return rpcerr.ErrReplicaClosed
	}
	if seg == nil {
		return nil
	}
	seg.opMu.Lock()
	defer seg.opMu.Unlock()
	s.mu.Lock()
	if s.segs[id] != seg {
		s.mu.Unlock()
		return nil // a concurrent Drop won
	}
	if !seg.dropping {
		// Only the first attempt waits for the queue: it emptied it, and
		// a retry must not send the committer a segment whose journal is
		// gone, which it would create again.
		seg.dropping = true
		if err := s.barrier(seg); errors.Is(err, rpcerr.ErrReplicaClosed) {
			s.mu.Unlock()
			return err
		}
	}
	// An error of a failed segment is no reason to keep its files.
	file := seg.file
	seg.file = nil
	s.mu.Unlock()

	if file != nil {
		file.Close()
	}
	// The journal goes first and durably: a state file without its journal
	// is a Drop cut short, which Open finishes.
	if err := s.dropJournal(id); err != nil {
		return fmt.Errorf("replica: drop %v: %w", id, err)
	}
	if err := s.fs.Remove(statePath(s.dir, id)); err != nil && !isNotExist(err) {
		return fmt.Errorf("replica: drop %v: %w", id, err)
	}
	if err := s.fs.SyncDir(logDir(s.dir, id.Log)); err != nil && !isNotExist(err) {
		return fmt.Errorf("replica: drop %v: %w", id, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.segs, id)
	for n := range seg.frags {
		s.forget(seg, uint64(n)) // which gives back their buffers
	}
	s.diskBytes -= seg.end
	seg.end = 0
	s.log.Info("replica: segment dropped", "segment", id)
	return nil
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

// dropJournal takes a dropped segment's journal out of its log directory,
// durably: into the free directory, to be written over, while fewer than
// maxFree are kept there, and otherwise away. The log directory is synced
// before the free one, so that no crash leaves the journal under both
// names.
func (s *Store) dropJournal(id SegmentID) error {
	path, dir := journalPath(s.dir, id), logDir(s.dir, id.Log)
	to := ""
	s.mu.Lock()
	if len(s.free)+s.freeing < s.maxFree {
		s.freeSeq++
		s.freeing++
		to = s.freePath(s.freeSeq)
	}
	s.mu.Unlock()

	var err error
	if to != "" {
		err = s.fs.Rename(path, to)
	} else {
		err = s.fs.Remove(path)
	}
	moved := to != "" && err == nil
	if err == nil || isNotExist(err) { // not there: a Drop that failed after it went
		err = s.fs.SyncDir(dir)
	}
	if err == nil && moved {
		err = s.fs.SyncDir(s.freeDir())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if to != "" {
		s.freeing--
		if moved && err == nil {
			s.free = append(s.free, to)
		}
	}
	if isNotExist(err) {
		return nil
	}
	return err
}

// freeDir is the directory of the dropped journals kept to write over.
func (s *Store) freeDir() string { return filepath.Join(s.dir, freeDir) }

// freePath is the name of the n-th journal moved to the free directory.
func (s *Store) freePath(n uint64) string {
	return filepath.Join(s.freeDir(), fmt.Sprintf("%020d%s", n, journalSuffix))
}

// takeFree returns a dropped journal to write over, no longer kept, or ""
// if none is.
func (s *Store) takeFree() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) == 0 {
		return ""
	}
	path := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return path
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
