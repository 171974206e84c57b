package objlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
)

// Meta is the metadata of one log's segments: meta.Store's segment methods
// bound to the log.
type Meta interface {
	CreateSegment(ctx context.Context, s meta.Segment) error
	SealSegment(ctx context.Context, s meta.Segment) (meta.Segment, error)
	ReplaceObjects(ctx context.Context, seq uint64, old, new []meta.SegmentObject) error
	Segments(ctx context.Context) ([]meta.Segment, error)
	DeleteSegment(ctx context.Context, seq uint64) error
}

// StoreMeta binds a meta.Store's segment methods to the named log.
func StoreMeta(s meta.Store, log string) Meta { return storeMeta{s, log} }

type storeMeta struct {
	s   meta.Store
	log string
}

func (m storeMeta) CreateSegment(ctx context.Context, s meta.Segment) error {
	return m.s.CreateSegment(ctx, m.log, s)
}
func (m storeMeta) SealSegment(ctx context.Context, s meta.Segment) (meta.Segment, error) {
	return m.s.SealSegment(ctx, m.log, s)
}
func (m storeMeta) ReplaceObjects(ctx context.Context, seq uint64, old, new []meta.SegmentObject) error {
	return m.s.ReplaceObjects(ctx, m.log, seq, old, new)
}
func (m storeMeta) Segments(ctx context.Context) ([]meta.Segment, error) {
	return m.s.Segments(ctx, m.log)
}
func (m storeMeta) DeleteSegment(ctx context.Context, seq uint64) error {
	return m.s.DeleteSegment(ctx, m.log, seq)
}

// Options configure a Log. Zero values take the defaults noted.
type Options struct {
	Bucket blob.Bucket
	Meta   Meta
	// Prefix starts the keys of the log's objects; it ends in "/".
	Prefix string

	// A fragment is cut from what is queued as soon as fewer than
	// MaxInFlight uploads are under way, and takes at most FlushBytes and
	// the rest of the batch that crosses it.
	FlushBytes    int           // default 4 MiB
	MaxInFlight   int           // fragment uploads at once; default 4
	RetryTimeout  time.Duration // an upload retried this long fails the log; default 30s
	SegmentBytes  int64         // seal a segment that would grow past this; default 1 GiB
	MaxFragments  int           // or that has this many fragments; default 1000, 8192 in quorum mode
	SegmentAge    time.Duration // or this old, at the next flush; 0: never
	MaxBatchBytes int           // a group of appends stops growing at this size; default FlushBytes/16, at least 64 KiB
	Codec         record.Codec  // compresses each batch; FlushBytes counts the bytes before compression
	CacheBytes    int64         // acknowledged fragments kept in memory for tail readers; default 16 MiB
	// SharedCache, if set, also bounds those of every log that shares it.
	SharedCache  *CacheBudget
	ChunkBytes   int   // a catch-up reader's ranged GET; default 4 MiB
	ReadAhead    int   // a catch-up reader keeps this many chunks' bytes in flight; default 4
	CompactBytes int64 // compaction writes objects of about this size; default 128 MiB

	// Placement, if set, keeps the open segments' fragments off the
	// bucket until they are sealed, then moves them there: package
	// quorumlog's ensembles of replica nodes (quorum mode).
	Placement Placement

	Epoch  uint64 // the newest writer epoch, from metadata
	Start  uint64 // the truncation point, from metadata
	Now    func() time.Time
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.FlushBytes, 4<<20)
	def(&o.MaxInFlight, 4)
	def(&o.MaxFragments, 1000)
	// Small groups keep a fragment close to FlushBytes, since the last
	// group taken makes it cross.
	def(&o.MaxBatchBytes, max(o.FlushBytes/16, 64<<10))
	def(&o.ChunkBytes, 4<<20)
	def(&o.ReadAhead, 4)
	if o.RetryTimeout <= 0 {
		o.RetryTimeout = 30 * time.Second
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 1 << 30
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.CompactBytes <= 0 {
		o.CompactBytes = 128 << 20
	}
	o.Now, o.Logger = engine.Defaults(o.Now, o.Logger)
}

// DefaultCacheBytes is how much of what it acknowledged a log keeps in
// memory for its tail readers, unless Options.CacheBytes says otherwise.
const DefaultCacheBytes = 16 << 20

// metaTimeout bounds each metadata and bucket call the log makes on its own
// (not on behalf of a caller's context).
const metaTimeout = 30 * time.Second

// object is one object of a segment, as readers locate it.
type object struct {
	key   string // relative to the segment's prefix
	base  uint64 // offset of its first entry
	end   uint64 // offset after its last entry
	bytes int64
}

// seg is a segment as the log knows it.
type seg struct {
	m       meta.Segment // as stored in metadata
	objs    []object     // the objects holding its entries, in order
	end     uint64       // offset after its last known entry
	bytes   int64
	saved   int64 // by compression: LogicalBytes less bytes
	maxTime int64
	frags   int    // fragments written: the next fragment's number, for the open segment
	stream  Stream // where the current epoch's open segment goes, when placed
	ahead   bool   // the segment after it was to be created ahead (roll.go)
}

func (s *seg) sealed() bool { return s.m.Sealed }

// sealedMeta is s as metadata records it sealed: sealedSeg's inverse.
func (s *seg) sealedMeta() meta.Segment {
	m := s.m
	m.Sealed, m.End, m.Bytes, m.MaxTime = true, s.end, s.bytes, s.maxTime
	m.LogicalBytes = s.bytes + s.saved
	m.Objects = make([]meta.SegmentObject, len(s.objs))
	for i, o := range s.objs {
		m.Objects[i] = meta.SegmentObject{Key: o.key, Base: o.base, Bytes: o.bytes}
	}
	return m
}

// parallel calls fn for 0 to n-1, at most limit at a time, and returns
// their errors joined.
func parallel(n, limit int, fn func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Log is one log in object storage. It is safe for concurrent use.
type Log struct {
	opts Options

	gcMu sync.Mutex // one truncation, retention pass or compaction at a time

	mu         sync.Mutex
	closed     bool
	failed     error // set when an upload failed for good; cleared by Fence
	epoch      uint64
	owned      func() bool
	start, end uint64 // end: the offset after the last acknowledged entry
	// unsettled: the last segment is a placed one that an earlier writer
	// left open, read without fencing: end is where the ack quorum of the
	// replicas that answered reaches, and that writer may have
	// acknowledged more (on a replica that is gone). Fence settles it.
	unsettled  bool
	segs       []*seg // oldest first; the last may be open
	open       *seg   // the current epoch's open segment, or nil
	advanced   chan struct{}
	readers    engine.Readers
	cache      []cached // acknowledged fragments, oldest first
	cacheBytes int64

	queue engine.Queue // appended, not yet cut into a fragment
	// dedupLoad (its own lock, taken before mu) rebuilds queue.Dedup
	// from the log at the first append with a producer.
	dedupLoad engine.DedupLoad
	next      uint64  // the offset the next entry cut into a fragment gets
	inflight  []*frag // cut, not yet acknowledged, in order
	fencing   bool    // Fence is under way: the flusher waits
	busy      bool    // the flusher is creating or sealing a segment
	// Without a Placement (roll.go): the segment created pending after
	// the open one, ready for the roll; whether a goroutine is creating
	// it; the rolled segment a goroutine is sealing; and how many such
	// goroutines run (Fence waits for them; Close too, with bgWG).
	spare    *seg
	creating bool
	sealing  *seg
	bg       int
	bgWG     sync.WaitGroup
	wake     chan struct{}
	flushed  chan struct{} // closed when the flusher has exited
	uploads  sync.WaitGroup

	// Quorum mode:
	// With a Placement:
	offloadCtx  context.Context // ends at Close
	stopOffload context.CancelFunc
	offloadWake chan struct{}
	offloaded   chan struct{} // closed when the offloader has exited
}

// cached is an acknowledged fragment kept for tail readers.
type cached struct {
	base, end uint64
	data      []byte
}

// Open opens the log: it loads its segments from metadata and finds how far
// an open segment left by an earlier writer reaches, without fencing it.
func Open(ctx context.Context, opts Options) (*Log, error) {
	opts.setDefaults()
	l := &Log{
		opts:        opts,
		epoch:       opts.Epoch,
		advanced:    make(chan struct{}),
		wake:        make(chan struct{}, 1),
		flushed:     make(chan struct{}),
		offloadWake: make(chan struct{}, 1),
		offloaded:   make(chan struct{}),
	}
	l.queue.MaxBatchBytes, l.queue.Codec = opts.MaxBatchBytes, opts.Codec
	l.readers = engine.NewReaders(&l.mu)
	if err := l.load(ctx, false); err != nil {
		return nil, err
	}
	go l.flusher()
	l.offloadCtx, l.stopOffload = context.WithCancel(context.Background())
	if opts.Placement != nil {
		go l.offloader()
		l.offloadSoon()
	} else {
		close(l.offloaded)
	}
	return l, nil
}

// load reads the segments from metadata and, for an open last segment, the
// bucket; with fence it fences and seals that segment first. The caller
// owns the log's segment state (Open, or Fence with the flusher paused).
func (l *Log) load(ctx context.Context, fence bool) error {
	ms, err := l.opts.Meta.Segments(ctx)
	if err != nil {
		return fmt.Errorf("objlog: read the segments of %s: %w", l.opts.Prefix, err)
	}
	segs := make([]*seg, 0, len(ms))
	unsettled := false
	for i, m := range ms {
		var s *seg
		switch {
		case m.Sealed:
			s = sealedSeg(m)
		case m.Pending:
			if i != len(ms)-1 || i == 0 || ms[i-1].Sealed || ms[i-1].Pending {
				return fmt.Errorf("objlog: segment %d of %s is pending but does not follow the open segment", m.Seq, l.opts.Prefix)
			}
			if !fence {
				// Its entries are readable once the one before is sealed.
				continue
			}
			// Fencing sealed the one before, which gave this one its Base.
			m.Base, m.Pending = segs[len(segs)-1].end, false
			sealed, err := l.fenceFollower(ctx, m)
			if err != nil {
				return err
			}
			s = sealedSeg(sealed)
		case i != len(ms)-1 && (i != len(ms)-2 || !ms[i+1].Pending):
			return fmt.Errorf("objlog: segment %d of %s is open but not the last", m.Seq, l.opts.Prefix)
		case fence:
			fenceSeg := l.fenceSegment
			if len(m.Ensemble) > 0 {
				fenceSeg = l.recoverPlaced
			}
			sealed, err := fenceSeg(ctx, m)
			if err != nil {
				return err
			}
			s = sealedSeg(sealed)
		case len(m.Ensemble) > 0:
			if l.opts.Placement == nil {
				return errUnplaced(l.opts.Prefix, m.Seq)
			}
			v, err := l.opts.Placement.Open(ctx, m)
			if err != nil {
				return err
			}
			if s, _, err = l.scan(ctx, m, v); err != nil {
				return err
			}
			unsettled = true
		default:
			if s, _, err = l.scan(ctx, m, l.opts.Bucket); err != nil {
				return err
			}
		}
		if len(segs) > 0 && segs[len(segs)-1].end != s.m.Base {
			return fmt.Errorf("objlog: segments of %s are not contiguous: segment %d starts at offset %d, the one before ends at %d", l.opts.Prefix, s.m.Seq, s.m.Base, segs[len(segs)-1].end)
		}
		segs = append(segs, s)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.segs, l.open, l.unsettled = segs, nil, unsettled
	l.spare, l.sealing = nil, nil
	// A truncation since Open has moved the start past opts.Start.
	l.start = max(l.start, l.opts.Start)
	l.end = l.opts.Start
	if len(segs) > 0 {
		l.end = segs[len(segs)-1].end
		l.start = max(l.start, segs[0].m.Base)
	}
	l.start = min(l.start, l.end)
	l.next = l.end
	l.dropCache()
	l.queue.SetEnd(l.next)
	return nil
}

// dropCache forgets the fragments kept for tail readers. The caller holds
// mu.
func (l *Log) dropCache() {
	l.opts.SharedCache.add(-l.cacheBytes)
	l.cache, l.cacheBytes = nil, 0
}

func sealedSeg(m meta.Segment) *seg {
	s := &seg{m: m, end: m.End, bytes: m.Bytes, saved: max(m.LogicalBytes-m.Bytes, 0), maxTime: m.MaxTime, frags: len(m.Objects)}
	for i, o := range m.Objects {
		end := m.End
		if i+1 < len(m.Objects) {
			end = m.Objects[i+1].Base
		}
		s.objs = append(s.objs, object{key: o.Key, base: o.Base, end: end, bytes: o.Bytes})
	}
	return s
}

// Stats returns the log's current extent.
func (l *Log) Stats() engine.Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := engine.Stats{Start: l.start, End: l.end, Epoch: l.epoch, Segments: len(l.segs)}
	for _, sg := range l.segs {
		s.Bytes += sg.bytes
		s.Objects += len(sg.objs)
	}
	return s
}

// LogicalBytes is engine.Engine's: the bytes of the segments with their
// batches counted uncompressed, as sealed segments record it in metadata
// (meta.Segment.LogicalBytes). Compressed batches count as stored in a
// segment sealed before metadata kept the figure, and in the fragments
// but the last of an open segment another writer left (scan reads only the
// last one whole).
func (l *Log) LogicalBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, sg := range l.segs {
		n += sg.bytes + sg.saved
	}
	return n
}

// Close uploads what is queued, waits for the uploads, seals the open segment
// in metadata, and wakes the readers waiting at the tail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	engine.Wake(l.wake)
	<-l.flushed
	l.uploads.Wait()
	l.bgWG.Wait() // the seal of a rolled segment comes before the open one's
	ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
	l.dropSpare(ctx)
	cancel()
	var err error
	l.mu.Lock()
	open, failed := l.open, l.failed
	l.mu.Unlock()
	if open != nil && failed == nil && open.frags > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
		err = l.seal(ctx, open)
		cancel()
	}
	if st := l.takeStream(open); st != nil {
		st.Close()
	}
	l.stopOffload()
	<-l.offloaded
	l.mu.Lock()
	close(l.advanced)
	l.dropCache() // readers of a closed log read nothing more
	l.mu.Unlock()
	return err
}

// locate returns the segment and the index of the object holding off, as
// acknowledged. The caller holds mu.
func (l *Log) locate(off uint64) (*seg, int, bool) {
	k := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].end > off })
	if k == len(l.segs) || off < l.segs[k].m.Base {
		return nil, 0, false
	}
	s := l.segs[k]
	i := sort.Search(len(s.objs), func(i int) bool { return s.objs[i].end > off })
	if i == len(s.objs) {
		return nil, 0, false
	}
	return s, i, true
}

// isNotFound reports whether err says an object or segment is gone.
func isNotFound(err error) bool {
	return errors.Is(err, blob.ErrNotFound)
}
