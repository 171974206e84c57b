package objlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ternwal/tern/client/rpcerr"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/replica"
)

// Replicas puts a log in quorum mode: the fragments of its open segments
// go to an ensemble of replica nodes instead of the bucket, and reach the
// bucket once their segment is sealed.
type Replicas struct {
	Config quorum.Config
	// Log is the log's ID, which names its segments on the replicas.
	Log uint64
	// Node reaches a replica node by ID.
	Node func(id string) (replica.Node, error)
	// Live lists the IDs of the nodes a new ensemble may use.
	Live func() []string
	// LagTimeout: a replica that stays behind the acknowledged fragments
	// this long is dropped from its segment's ensemble; default 2s.
	LagTimeout time.Duration
	// CallTimeout bounds each fence, list, read and seal call; default 10s.
	CallTimeout time.Duration
}

func (r *Replicas) setDefaults() {
	if r.LagTimeout <= 0 {
		r.LagTimeout = 2 * time.Second
	}
	if r.CallTimeout <= 0 {
		r.CallTimeout = 10 * time.Second
	}
}

// avoidFor is how long a node that failed in an ensemble is left out of
// new ones, when enough others are live.
const avoidFor = 30 * time.Second

// ensemble sends the fragments of one open segment to its replicas and
// acknowledges each once the ack quorum holds it durably.
type ensemble struct {
	l         *Log
	seq       uint64
	ids       []string
	ackQuorum int
	ctx       context.Context
	end       context.CancelFunc

	mu       sync.Mutex
	senders  []replica.Sender // nil once the replica failed
	behind   []time.Time      // since when each replica lags the acknowledged count
	tracker  *quorum.Tracker
	pending  []*frag // sent, not yet acknowledged, in order
	failed   error   // set when fewer than the ack quorum are left
	degraded bool    // a replica failed: roll to a new ensemble
}

// chooseEnsemble picks the replicas of a new segment, leaving out the
// nodes that failed lately if it can.
func (l *Log) chooseEnsemble(seq uint64) ([]string, error) {
	r := l.opts.Replicas
	live := r.Live()
	l.mu.Lock()
	var avoid []string
	for id, at := range l.avoid {
		if l.opts.Now().Sub(at) < avoidFor {
			avoid = append(avoid, id)
		} else {
			delete(l.avoid, id)
		}
	}
	l.mu.Unlock()
	ids, err := quorum.Choose(r.Config.Ensemble, live, avoid, r.Log<<20^seq)
	if err != nil && len(avoid) > 0 {
		ids, err = quorum.Choose(r.Config.Ensemble, live, nil, r.Log<<20^seq)
	}
	if err != nil {
		return nil, fmt.Errorf("objlog: no ensemble for segment %d of %s among %d live nodes: %w", seq, l.opts.Prefix, len(live), err)
	}
	return ids, nil
}

// openEnsemble opens the streams of a new segment m to its replicas. It
// fails if fewer than the ack quorum could be reached.
func (l *Log) openEnsemble(m meta.Segment) (*ensemble, error) {
	r := l.opts.Replicas
	tr, err := quorum.NewTracker(quorum.Config{Ensemble: len(m.Ensemble), AckQuorum: m.AckQuorum}, 0)
	if err != nil {
		return nil, err
	}
	e := &ensemble{l: l, seq: m.Seq, ids: m.Ensemble, ackQuorum: m.AckQuorum, tracker: tr,
		senders: make([]replica.Sender, len(m.Ensemble)), behind: make([]time.Time, len(m.Ensemble))}
	e.ctx, e.end = context.WithCancel(context.Background())
	id := l.segID(m.Seq)
	var errs []error
	for i, node := range m.Ensemble {
		n, err := r.Node(node)
		var s replica.Sender
		if err == nil {
			s, err = openStream(e.ctx, n, id, m.Epoch, r.LagTimeout,
				func(count uint64) { e.durable(i, count) },
				func(err error) { e.lose(i, err) })
		}
		if err != nil {
			// The segment runs at the ack quorum of the others; a roll
			// would likely choose the node again.
			errs = append(errs, fmt.Errorf("replica %s: %w", node, err))
			l.noteFailed(node)
			continue
		}
		e.mu.Lock() // its callbacks may run already
		e.senders[i] = s
		e.mu.Unlock()
	}
	if len(m.Ensemble)-len(errs) < m.AckQuorum {
		e.close()
		return nil, fmt.Errorf("objlog: segment %d of %s: fewer than %d replicas reachable: %w", m.Seq, l.opts.Prefix, m.AckQuorum, errors.Join(errs...))
	}
	go e.watchLag(r.LagTimeout)
	return e, nil
}

// openStream opens n's stream of segment id, or fails if it is not open
// within timeout. Opening a gRPC stream waits while the connection is being
// made, and a connection to a node behind a partition that drops packets
// hangs until gRPC's connect timeout (20s), while the flusher holds every
// append.
func openStream(ctx context.Context, n replica.Node, id replica.SegmentID, epoch uint64, timeout time.Duration, onDurable func(uint64), onErr func(error)) (replica.Sender, error) {
	ctx, cancel := context.WithCancel(ctx) // the stream's life, cut short if it does not open in time
	timer := time.AfterFunc(timeout, cancel)
	s, err := n.Stream(ctx, id, epoch, onDurable, onErr)
	if !timer.Stop() {
		if err == nil {
			s.Close()
		}
		return nil, fmt.Errorf("objlog: the stream did not open within %v", timeout)
	}
	return s, err
}

func (l *Log) noteFailed(node string) {
	l.mu.Lock()
	l.avoid[node] = l.opts.Now()
	l.mu.Unlock()
}

// send sends f to every replica still in the ensemble. The flusher calls it
// in fragment order.
func (e *ensemble) send(f *frag) {
	e.mu.Lock()
	if e.failed != nil {
		err := e.failed
		e.mu.Unlock()
		e.resolve([]*frag{f}, err)
		return
	}
	f.sent = time.Now()
	e.pending = append(e.pending, f)
	senders := slices.Clone(e.senders)
	e.mu.Unlock()
	sum := replica.FrameSum(uint64(f.n), f.data) // once for all the replicas
	for i, s := range senders {
		if s == nil {
			continue
		}
		if err := s.Send(uint64(f.n), f.data, sum); err != nil {
			e.lose(i, err)
		}
	}
}

// durable records that replica i holds count fragments durably, and
// acknowledges the fragments the ack quorum now holds.
func (e *ensemble) durable(i int, count uint64) {
	e.mu.Lock()
	if e.senders[i] == nil {
		e.mu.Unlock()
		return
	}
	confirmed, err := e.tracker.Ack(i, count)
	if err != nil {
		e.mu.Unlock()
		e.lose(i, err)
		return
	}
	e.behind[i] = time.Time{}
	var done []*frag
	for len(e.pending) > 0 && uint64(e.pending[0].n) < confirmed {
		done = append(done, e.pending[0])
		e.pending = e.pending[1:]
	}
	e.mu.Unlock()
	e.resolve(done, nil)
}

// lose drops replica i from the ensemble. With fewer than the ack quorum
// left, the fragments not yet acknowledged fail.
func (e *ensemble) lose(i int, err error) {
	e.mu.Lock()
	s := e.senders[i]
	if s == nil {
		e.mu.Unlock()
		return
	}
	e.senders[i] = nil
	e.degraded = true
	left := 0
	for _, s := range e.senders {
		if s != nil {
			left++
		}
	}
	var failed []*frag
	switch {
	case e.failed != nil:
	case errors.Is(err, rpcerr.ErrSegmentFenced):
		// A newer writer is recovering the segment.
		e.failed = fmt.Errorf("%w: replica %s of segment %d of %s was fenced by a newer writer: %w", rpcerr.ErrFenced, e.ids[i], e.seq, e.l.opts.Prefix, err)
	case left < e.ackQuorum:
		e.failed = fmt.Errorf("objlog: %s: only %d replicas of segment %d are left, fewer than the ack quorum; the appends in flight may or may not have been stored (last error from %s: %w)",
			e.l.opts.Prefix, left, e.seq, e.ids[i], err)
	}
	if e.failed != nil {
		failed, e.pending = e.pending, nil
	}
	fail := e.failed
	e.mu.Unlock()
	go s.Close()
	e.l.opts.Logger.Warn("replica dropped from the ensemble; the segment rolls to a new one", "prefix", e.l.opts.Prefix, "segment", e.seq, "replica", e.ids[i], "err", err)
	e.l.noteFailed(e.ids[i])
	e.resolve(failed, fail)
	engine.Wake(e.l.wake)
}

// resolve completes fragments, in order.
func (e *ensemble) resolve(fs []*frag, err error) {
	for _, f := range fs {
		f.err = err
		e.l.complete(f)
		e.l.uploads.Done()
	}
}

// watchLag drops a replica that stays behind the acknowledged fragments for
// timeout, until the ensemble closes.
func (e *ensemble) watchLag(timeout time.Duration) {
	t := time.NewTicker(timeout / 4)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var slow []int
		e.mu.Lock()
		confirmed := e.tracker.Confirmed()
		// The oldest fragment waiting that long: the replicas that lack
		// it stopped, even if too many stopped for any to lag the others.
		stalled := len(e.pending) > 0 && now.Sub(e.pending[0].sent) > timeout
		for i, s := range e.senders {
			switch {
			case s == nil:
			case stalled && e.tracker.End(i) <= uint64(e.pending[0].n):
				slow = append(slow, i)
			case e.tracker.End(i) >= confirmed:
				e.behind[i] = time.Time{}
			case e.behind[i].IsZero():
				e.behind[i] = now
			case now.Sub(e.behind[i]) > timeout:
				slow = append(slow, i)
			}
		}
		e.mu.Unlock()
		for _, i := range slow {
			e.lose(i, fmt.Errorf("lagged behind the ack quorum for over %v", timeout))
		}
	}
}

// mustRoll reports whether a replica left the ensemble.
func (e *ensemble) mustRoll() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.degraded
}

// close ends the streams; the fragments still pending fail.
func (e *ensemble) close() {
	e.end()
	e.mu.Lock()
	senders := e.senders
	e.senders = make([]replica.Sender, len(senders))
	pending := e.pending
	e.pending = nil
	e.mu.Unlock()
	for _, s := range senders {
		if s != nil {
			s.Close()
		}
	}
	e.resolve(pending, fmt.Errorf("%w: the segment's streams were closed", rpcerr.ErrClosed))
}

// segID names segment seq of the log on its replicas.
func (l *Log) segID(seq uint64) replica.SegmentID {
	return replica.SegmentID{Log: l.opts.Replicas.Log, Seq: seq}
}

// call runs fn on each replica of ids at once, with the call timeout, and
// returns the replicas' errors.
func (l *Log) call(ctx context.Context, ids []string, fn func(ctx context.Context, i int, n replica.Node) error) []error {
	errs := make([]error, len(ids))
	parallel(len(ids), len(ids), func(i int) error {
		ctx, cancel := context.WithTimeout(ctx, l.opts.Replicas.CallTimeout)
		defer cancel()
		n, err := l.opts.Replicas.Node(ids[i])
		if err == nil {
			err = fn(ctx, i, n)
		}
		if err != nil {
			errs[i] = fmt.Errorf("replica %s: %w", ids[i], err)
		}
		return nil
	})
	return errs
}

// recoverSegment recovers the open quorum segment m left by an earlier
// writer, as BookKeeper recovers a ledger: it fences the ensemble with the
// current epoch, so that no older writer's fragment can be acknowledged any
// more, learns from RecoveryQuorum replicas how far each reaches, copies the
// longest prefix to enough of them that the ack quorum holds it, and seals
// the segment there in metadata. Every fragment the old writer acknowledged
// is in that prefix: the ack quorum held it, and any ack quorum meets any
// RecoveryQuorum replicas.
func (l *Log) recoverSegment(ctx context.Context, m meta.Segment) (meta.Segment, error) {
	epoch := l.epochNow()
	id := l.segID(m.Seq)
	cfg := quorum.Config{Ensemble: len(m.Ensemble), AckQuorum: m.AckQuorum}
	counts := make([]uint64, len(m.Ensemble))
	errs := l.call(ctx, m.Ensemble, func(ctx context.Context, i int, n replica.Node) (err error) {
		counts[i], err = n.Fence(ctx, id, epoch)
		return err
	})
	var answers []quorum.Response
	for i, err := range errs {
		if err == nil {
			answers = append(answers, quorum.Response{Replica: i, End: counts[i]})
		}
	}
	rec, err := quorum.Recover(cfg, 0, answers)
	if err != nil {
		return meta.Segment{}, fmt.Errorf("objlog: recover segment %d of %s: %w (%w)", m.Seq, l.opts.Prefix, err, errors.Join(errs...))
	}
	if err := l.copyForward(ctx, m, epoch, rec); err != nil {
		return meta.Segment{}, err
	}
	v := &ensembleView{l: l, m: m, count: rec.End, prefer: rec.Source}
	s, _, err := l.scan(ctx, m, v)
	if err != nil {
		return meta.Segment{}, err
	}
	stored, err := l.opts.Meta.SealSegment(ctx, s.sealedMeta())
	if err != nil {
		return meta.Segment{}, fmt.Errorf("objlog: seal segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
	}
	return stored, nil
}

// copyForward copies fragments from rec.Source to each of rec.Copies up to
// rec.End, with the recovering writer's epoch, and waits until they hold
// them durably. A fragment whose copy on rec.Source is damaged is read from
// another replica that holds it.
func (l *Log) copyForward(ctx context.Context, m meta.Segment, epoch uint64, rec quorum.Recovery) error {
	if len(rec.Copies) == 0 {
		return nil
	}
	id := l.segID(m.Seq)
	src, err := l.opts.Replicas.Node(m.Ensemble[rec.Source])
	if err != nil {
		return fmt.Errorf("objlog: recover segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
	}
	from := rec.End
	for _, c := range rec.Copies {
		from = min(from, c.End)
	}
	sizes, err := src.List(ctx, id)
	if err == nil && uint64(len(sizes)) < rec.End {
		err = fmt.Errorf("it holds %d fragments, not %d", len(sizes), rec.End)
	}
	if err != nil {
		return fmt.Errorf("objlog: recover segment %d of %s: list replica %s: %w", m.Seq, l.opts.Prefix, m.Ensemble[rec.Source], err)
	}
	frags := make([][]byte, rec.End-from)
	sums := make([]uint32, rec.End-from)
	v := &ensembleView{l: l, m: m, prefer: rec.Source}
	for n := from; n < rec.End; n++ {
		p := make([]byte, sizes[n])
		if _, err := v.GetRange(ctx, l.segPrefix(m.Seq)+fragKey(int(n)), 0, p); err != nil {
			return fmt.Errorf("objlog: recover segment %d of %s: read fragment %d: %w", m.Seq, l.opts.Prefix, n, err)
		}
		frags[n-from], sums[n-from] = p, replica.FrameSum(n, p)
	}
	targets := make([]string, len(rec.Copies))
	for i, c := range rec.Copies {
		targets[i] = m.Ensemble[c.Replica]
	}
	errs := l.call(ctx, targets, func(ctx context.Context, i int, n replica.Node) error {
		have := rec.Copies[i].End
		done := make(chan error, 1)
		s, err := n.Stream(ctx, id, epoch, func(count uint64) {
			if count >= rec.End {
				select {
				case done <- nil:
				default:
				}
			}
		}, func(err error) {
			select {
			case done <- err:
			default:
			}
		})
		if err != nil {
			return err
		}
		defer s.Close()
		for n := have; n < rec.End; n++ {
			if err := s.Send(n, frags[n-from], sums[n-from]); err != nil {
				return err
			}
		}
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("objlog: recover segment %d of %s: copy forward: %w", m.Seq, l.opts.Prefix, err)
	}
	return nil
}

// openView is the view of an open quorum segment m that a log opened
// without fencing reads: the fragments that AckQuorum replicas hold, which
// any recovery keeps.
func (l *Log) openView(ctx context.Context, m meta.Segment) (*ensembleView, error) {
	id := l.segID(m.Seq)
	lists := make([][]int64, len(m.Ensemble))
	errs := l.call(ctx, m.Ensemble, func(ctx context.Context, i int, n replica.Node) (err error) {
		lists[i], err = n.List(ctx, id)
		if errors.Is(err, rpcerr.ErrSegmentNotFound) {
			// Never sent a fragment of the segment: its writer died
			// between creating it in metadata and the first send.
			return nil
		}
		return err
	})
	var counts []uint64
	for i, err := range errs {
		if err == nil {
			counts = append(counts, uint64(len(lists[i])))
		}
	}
	if len(counts) < m.AckQuorum {
		return nil, fmt.Errorf("objlog: read segment %d of %s: %d of its replicas answered, fewer than %d: %w", m.Seq, l.opts.Prefix, len(counts), m.AckQuorum, errors.Join(errs...))
	}
	slices.Sort(counts)
	count := counts[len(counts)-m.AckQuorum]
	prefer := 0
	for i, err := range errs {
		if err == nil && uint64(len(lists[i])) >= count {
			prefer = i
			break
		}
	}
	return &ensembleView{l: l, m: m, count: count, prefer: prefer}, nil
}

// ensembleView reads a quorum segment's fragments from its replicas, with
// the bucket's methods that scan and the readers use. Keys are the bucket
// keys the fragments have once offloaded.
type ensembleView struct {
	l      *Log
	m      meta.Segment
	count  uint64 // fragments listed; 0 for a reader's view, which lists none
	prefer int    // the replica to ask first
}

// List lists the view's fragments, with their sizes from the preferred
// replica.
func (v *ensembleView) List(ctx context.Context, prefix string) ([]blob.Info, error) {
	if v.count == 0 {
		return nil, nil // and the preferred replica may not know the segment
	}
	n, err := v.l.opts.Replicas.Node(v.m.Ensemble[v.prefer])
	if err != nil {
		return nil, err
	}
	sizes, err := n.List(ctx, v.l.segID(v.m.Seq))
	if err != nil {
		return nil, err
	}
	if uint64(len(sizes)) < v.count {
		return nil, fmt.Errorf("objlog: replica %s holds %d fragments of segment %d, not %d", v.m.Ensemble[v.prefer], len(sizes), v.m.Seq, v.count)
	}
	out := make([]blob.Info, v.count)
	for i := range out {
		out[i] = blob.Info{Key: v.l.segPrefix(v.m.Seq) + fragKey(i), Size: sizes[i]}
	}
	return out, nil
}

// GetRange reads from the first replica that holds the fragment. A replica
// whose copy fails its check (rpcerr.ErrJournalCorrupt) is passed over, and
// logged once another has served the read. It fails with blob.ErrNotFound
// when none holds the fragment: the segment was offloaded or deleted
// meanwhile, and the reader looks again; and with a *rpcerr.CorruptError
// when every copy is damaged.
func (v *ensembleView) GetRange(ctx context.Context, key string, off int64, p []byte) (int, error) {
	frag, err := strconv.ParseUint(key[len(key)-8:], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("objlog: %s is not a fragment key", key)
	}
	id := v.l.segID(v.m.Seq)
	var errs, damaged []error
	notFound := 0
	for k := range v.m.Ensemble {
		node := v.m.Ensemble[(v.prefer+k)%len(v.m.Ensemble)]
		n, err := v.l.opts.Replicas.Node(node)
		if err == nil {
			var got int
			got, err = n.Read(ctx, id, frag, off, p)
			if err == nil || got > 0 {
				for _, d := range damaged {
					v.l.opts.Logger.Warn("a replica's copy of a fragment is damaged; read it from another replica",
						"prefix", v.l.opts.Prefix, "key", key, "from", node, "err", d)
				}
				return got, err
			}
		}
		err = fmt.Errorf("replica %s: %w", node, err)
		switch {
		case errors.Is(err, rpcerr.ErrSegmentNotFound):
			notFound++
		case errors.Is(err, rpcerr.ErrJournalCorrupt):
			damaged = append(damaged, err)
		}
		errs = append(errs, err)
	}
	switch {
	case notFound > 0:
		// Those that have it cannot be reached, or it was offloaded.
		return 0, fmt.Errorf("%w: %s: %w", blob.ErrNotFound, key, errors.Join(errs...))
	case len(errs) > 0 && len(damaged) == len(errs):
		return 0, &rpcerr.CorruptError{Path: key, Pos: off, Err: fmt.Errorf("every replica's copy is damaged: %w", errors.Join(errs...))}
	}
	return 0, fmt.Errorf("objlog: read %s from its replicas: %w", key, errors.Join(errs...))
}

// Get reads a whole fragment.
func (v *ensembleView) Get(ctx context.Context, key string) ([]byte, error) {
	infos, err := v.List(ctx, "")
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(infos, func(in blob.Info) bool { return in.Key == key })
	if i < 0 {
		return nil, fmt.Errorf("%w: %s", blob.ErrNotFound, key)
	}
	p := make([]byte, infos[i].Size)
	if _, err := v.GetRange(ctx, key, 0, p); err != nil {
		return nil, err
	}
	return p, nil
}

// source returns where a reader reads segment s's objects from. The caller
// holds mu.
func (l *Log) source(s *seg) ranger {
	if len(s.m.Ensemble) == 0 {
		return l.opts.Bucket
	}
	return &ensembleView{l: l, m: s.m}
}

// ranger reads part of an object.
type ranger interface {
	GetRange(ctx context.Context, key string, off int64, p []byte) (int, error)
}

// offloader moves the sealed quorum segments to the bucket, one at a time,
// oldest first, until the log closes. A segment that fails is tried again
// later.
func (l *Log) offloader() {
	defer close(l.offloaded)
	backoff := time.Second
	for {
		select {
		case <-l.offloadCtx.Done():
			return
		case <-l.offloadWake:
		case <-time.After(backoff):
		}
		if _, err := l.Offload(l.offloadCtx); err != nil {
			if l.offloadCtx.Err() == nil {
				l.opts.Logger.Warn("offload failed; retrying", "prefix", l.opts.Prefix, "err", err, "in", backoff)
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Minute
	}
}

// Offload moves every sealed quorum segment to the bucket now, oldest
// first, and reports how many it moved. The log does it by itself after
// each seal; Offload is for tests and tools that want it done.
func (l *Log) Offload(ctx context.Context) (int, error) {
	l.gcMu.Lock() // no truncation deletes a segment under it
	defer l.gcMu.Unlock()
	// Another process (an earlier owner) may have offloaded a segment: its
	// replicas have dropped it.
	if err := l.refreshOffloaded(ctx); err != nil {
		return 0, err
	}
	done := 0
	for {
		l.mu.Lock()
		i := slices.IndexFunc(l.segs, func(s *seg) bool { return s.sealed() && len(s.m.Ensemble) > 0 })
		var s *seg
		if i >= 0 {
			s = l.segs[i]
		}
		l.mu.Unlock()
		if s == nil {
			return done, nil
		}
		if err := l.offload(ctx, s); err != nil {
			return done, err
		}
		done++
	}
}

func (l *Log) offloadSoon() {
	select {
	case l.offloadWake <- struct{}{}:
	default:
	}
}

// offload has a replica of the sealed segment s upload its fragments, in
// objects of about CompactBytes, records them in metadata, which clears the
// ensemble, and has the replicas drop their copies. The caller holds gcMu.
func (l *Log) offload(ctx context.Context, s *seg) error {
	l.mu.Lock()
	m := s.m
	objs := slices.Clone(s.objs)
	l.mu.Unlock()
	if len(m.Ensemble) == 0 {
		return nil // deleted or offloaded meanwhile
	}
	id := l.segID(m.Seq)
	count := uint64(len(objs))
	if count == 0 {
		// Sealed empty: nothing to move, and replicas that never got a
		// fragment may not know the segment.
		return l.recordOffload(ctx, m, nil)
	}
	var out []meta.SegmentObject
	var plan []replica.Object
	for _, r := range runs(objs, l.opts.CompactBytes) {
		key := "c" + objs[r.from].key
		plan = append(plan, replica.Object{Key: l.segPrefix(m.Seq) + key, From: uint64(r.from), To: uint64(r.to)})
		out = append(out, meta.SegmentObject{Key: key, Base: objs[r.from].base, Bytes: r.bytes})
	}
	// Seal the replicas at the segment's end: fragments past it, of a
	// writer that was fenced, are dropped.
	sealErrs := l.call(ctx, m.Ensemble, func(ctx context.Context, _ int, n replica.Node) error {
		return n.Seal(ctx, id, count)
	})
	var err, failed error // failed: the offloads that failed, not the seals
	uploaded := false
	for i, node := range m.Ensemble {
		if sealErrs[i] != nil {
			err = errors.Join(err, sealErrs[i])
			continue
		}
		n, nerr := l.opts.Replicas.Node(node)
		if nerr == nil {
			nerr = n.Offload(ctx, id, plan)
		}
		if nerr == nil {
			uploaded = true
			if failed != nil {
				// The others' failures, such as a damaged copy
				// (rpcerr.ErrJournalCorrupt), are worth knowing.
				l.opts.Logger.Warn("a replica could not offload a segment; another did", "prefix", l.opts.Prefix,
					"segment", m.Seq, "from", node, "err", failed)
			}
			break
		}
		nerr = fmt.Errorf("replica %s: %w", node, nerr)
		err, failed = errors.Join(err, nerr), errors.Join(failed, nerr)
	}
	if !uploaded {
		return fmt.Errorf("objlog: offload segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
	}
	return l.recordOffload(ctx, m, out)
}

// recordOffload records that segment m is in the bucket as out, and
// has its replicas drop their copies.
func (l *Log) recordOffload(ctx context.Context, m meta.Segment, out []meta.SegmentObject) error {
	if err := l.opts.Meta.ReplaceObjects(ctx, m.Seq, m.Objects, out); err != nil {
		return fmt.Errorf("objlog: offload segment %d of %s: %w", m.Seq, l.opts.Prefix, err)
	}
	l.setObjects(m.Seq, out)
	l.dropReplicas(ctx, m)
	return nil
}

// refreshOffloaded reloads from metadata the sealed quorum segments that
// the log still believes are on their replicas: another process (an
// earlier owner) may have offloaded them, and the replicas dropped them.
func (l *Log) refreshOffloaded(ctx context.Context) error {
	l.mu.Lock()
	stale := slices.ContainsFunc(l.segs, func(s *seg) bool { return s.sealed() && len(s.m.Ensemble) > 0 })
	l.mu.Unlock()
	if !stale {
		return nil
	}
	ms, err := l.opts.Meta.Segments(ctx)
	if err != nil {
		return fmt.Errorf("objlog: read the segments of %s: %w", l.opts.Prefix, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		if !s.sealed() || len(s.m.Ensemble) == 0 {
			continue
		}
		i := slices.IndexFunc(ms, func(m meta.Segment) bool { return m.Seq == s.m.Seq })
		if i >= 0 && ms[i].Sealed && len(ms[i].Ensemble) == 0 {
			fresh := sealedSeg(ms[i])
			s.m, s.objs, s.bytes = fresh.m, fresh.objs, fresh.bytes
		}
	}
	return nil
}

// dropReplicas has the replicas of m drop their copies, as far as they can
// be reached: what one keeps is only disk space.
func (l *Log) dropReplicas(ctx context.Context, m meta.Segment) {
	// Once the segment is recorded in the bucket, nothing asks again: a
	// closing log still finishes this, within the call timeout.
	errs := l.call(context.WithoutCancel(ctx), m.Ensemble, func(ctx context.Context, _ int, n replica.Node) error {
		return n.Drop(ctx, l.segID(m.Seq))
	})
	if err := errors.Join(errs...); err != nil {
		l.opts.Logger.Warn("a replica kept its copy of an offloaded segment", "prefix", l.opts.Prefix, "segment", m.Seq, "err", err)
	}
}
