package quorumlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/replica"
)

// avoidFor is how long a node that failed in an ensemble is left out of
// new ones, when enough others are live.
const avoidFor = 30 * time.Second

// ensemble sends the fragments of one open segment to its replicas and
// acknowledges each once the ack quorum holds it durably.
type ensemble struct {
	p         *placement
	wake      func() // tells the log the ensemble degraded
	seq       uint64
	ids       []string
	ackQuorum int
	ctx       context.Context
	end       context.CancelFunc

	mu       sync.Mutex
	senders  []replica.Sender // nil once the replica failed
	behind   []time.Time      // since when each replica lags the acknowledged count
	tracker  *quorum.Tracker
	pending  []*sent // sent, not yet acknowledged, in order
	failed   error   // set when fewer than the ack quorum are left
	degraded bool    // a replica failed: roll to a new ensemble
}

// chooseEnsemble picks the replicas of a new segment, leaving out the
// nodes that failed lately if it can.
func (p *placement) chooseEnsemble(seq uint64) ([]string, error) {
	r := p.r
	live := r.Live()
	p.mu.Lock()
	var avoid []string
	for id, at := range p.avoid {
		if p.now().Sub(at) < avoidFor {
			avoid = append(avoid, id)
		} else {
			delete(p.avoid, id)
		}
	}
	p.mu.Unlock()
	ids, err := quorum.Choose(r.Config.Ensemble, live, avoid, r.Log<<20^seq)
	if err != nil && len(avoid) > 0 {
		ids, err = quorum.Choose(r.Config.Ensemble, live, nil, r.Log<<20^seq)
	}
	if err != nil {
		// Unavailable, not a bug: a node that comes back (a restart) makes
		// an ensemble again, and clients retry.
		return nil, fmt.Errorf("%w: quorumlog: no ensemble for segment %d of %s among %d live nodes: %w", rpcerr.ErrUnavailable, seq, p.prefix, len(live), err)
	}
	return ids, nil
}

// openEnsemble opens the streams of a new segment m to its replicas. It
// fails if fewer than the ack quorum could be reached.
func (p *placement) openEnsemble(m meta.Segment, wake func()) (*ensemble, error) {
	r := p.r
	tr, err := quorum.NewTracker(quorum.Config{Ensemble: len(m.Ensemble), AckQuorum: m.AckQuorum}, 0)
	if err != nil {
		return nil, err
	}
	e := &ensemble{p: p, wake: wake, seq: m.Seq, ids: m.Ensemble, ackQuorum: m.AckQuorum, tracker: tr,
		senders: make([]replica.Sender, len(m.Ensemble)), behind: make([]time.Time, len(m.Ensemble))}
	e.ctx, e.end = context.WithCancel(context.Background())
	id := p.segID(m.Seq)
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
			p.noteFailed(node)
			// Fewer copies than the ensemble asks for: say so, or a node
			// that the others cannot reach (down, or refusing their
			// certificates) goes unnoticed.
			p.logger.Warn("replica unreachable for a new segment; the segment runs without it", "prefix", p.prefix, "segment", m.Seq, "replica", node, "err", err)
			continue
		}
		e.mu.Lock() // its callbacks may run already
		e.senders[i] = s
		e.mu.Unlock()
	}
	if len(m.Ensemble)-len(errs) < m.AckQuorum {
		e.Close()
		return nil, fmt.Errorf("quorumlog: segment %d of %s: fewer than %d replicas reachable: %w", m.Seq, p.prefix, m.AckQuorum, errors.Join(errs...))
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
		return nil, fmt.Errorf("quorumlog: the stream did not open within %v", timeout)
	}
	return s, err
}

func (p *placement) noteFailed(node string) {
	p.mu.Lock()
	p.avoid[node] = p.now()
	p.mu.Unlock()
}

// sent is a fragment sent to the replicas and not yet acknowledged.
type sent struct {
	n    int
	at   time.Time
	done func(error)
}

// Send sends fragment n to every replica still in the ensemble. The
// flusher calls it in fragment order.
func (e *ensemble) Send(n int, data []byte, done func(error)) {
	f := &sent{n: n, done: done}
	e.mu.Lock()
	if e.failed != nil {
		err := e.failed
		e.mu.Unlock()
		e.resolve([]*sent{f}, err)
		return
	}
	f.at = time.Now()
	e.pending = append(e.pending, f)
	senders := slices.Clone(e.senders)
	e.mu.Unlock()
	sum := replica.FrameSum(uint64(n), data) // once for all the replicas
	for i, s := range senders {
		if s == nil {
			continue
		}
		if err := s.Send(uint64(n), data, sum); err != nil {
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
	var done []*sent
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
	var failed []*sent
	switch {
	case e.failed != nil:
	case errors.Is(err, rpcerr.ErrSegmentFenced):
		// A newer writer is recovering the segment.
		e.failed = fmt.Errorf("%w: replica %s of segment %d of %s was fenced by a newer writer: %w", rpcerr.ErrFenced, e.ids[i], e.seq, e.p.prefix, err)
	case left < e.ackQuorum:
		// Unavailable: a new writer recovers the segment from what its
		// replicas hold, and the appends sent again are deduplicated.
		e.failed = fmt.Errorf("%w: quorumlog: %s: only %d replicas of segment %d are left, fewer than the ack quorum; the appends in flight may or may not have been stored (last error from %s: %w)",
			rpcerr.ErrUnavailable, e.p.prefix, left, e.seq, e.ids[i], err)
	}
	if e.failed != nil {
		failed, e.pending = e.pending, nil
	}
	fail := e.failed
	e.mu.Unlock()
	go s.Close()
	e.p.logger.Warn("replica dropped from the ensemble; the segment rolls to a new one", "prefix", e.p.prefix, "segment", e.seq, "replica", e.ids[i], "err", err)
	e.p.noteFailed(e.ids[i])
	if lost := e.p.r.Lost; lost != nil {
		lost(e.ids[i])
	}
	e.resolve(failed, fail)
	e.wake()
}

// resolve completes fragments, in order.
func (e *ensemble) resolve(fs []*sent, err error) {
	for _, f := range fs {
		f.done(err)
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
		stalled := len(e.pending) > 0 && now.Sub(e.pending[0].at) > timeout
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

// Degraded reports whether a replica left the ensemble.
func (e *ensemble) Degraded() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.degraded
}

// Close ends the streams; the fragments still pending fail.
func (e *ensemble) Close() {
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
