// Package quorum holds the arithmetic of quorum mode, with no I/O: which
// offsets an ensemble has acknowledged, how many replicas a recovery must
// hear from, where a recovered segment ends, which replicas must be copied
// to before it is sealed, and which nodes form a new segment's ensemble
// (ensemble.go).
//
// A segment in quorum mode is written by one writer to a fixed ensemble of
// replicas. Each replica appends the batches it receives in order to its
// journal and reports the end of its durable prefix: every replica holds a
// prefix of the segment, [base, end). An offset is acknowledged once
// AckQuorum replicas have it durably. A replica that fails or lags makes the
// writer roll to a new segment on a new ensemble; a segment's ensemble never
// changes.
//
// Recovery, when the writer is gone, follows BookKeeper's ledger recovery:
// fence the ensemble with the new epoch (a fenced replica refuses the old
// writer), collect the ends of at least RecoveryQuorum replicas, take the
// largest as the segment's end, copy forward until AckQuorum replicas hold
// everything below it, and seal the segment with a compare-and-swap in
// metadata. The invariants, which the tests check over every order of
// events on small ensembles:
//
//   - Every acknowledged offset lies below the recovered end: an
//     acknowledged offset is on AckQuorum replicas, and any RecoveryQuorum
//     replicas include at least one of them.
//   - Every offset below the recovered end is on a replica that answered, so
//     it can be copied: the end is one replica's own.
//   - Once RecoveryQuorum replicas are fenced, the old writer cannot gather
//     AckQuorum acknowledgements for anything new: at most AckQuorum-1
//     replicas still accept it.
package quorum

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ternwal/tern/client"
)

// MaxEnsemble bounds the replicas of a segment.
const MaxEnsemble = client.MaxEnsemble

// Config is a segment's replication: Ensemble replicas, an append
// acknowledged once AckQuorum of them have it durably.
type Config struct {
	Ensemble  int
	AckQuorum int
}

// Default is three replicas, acknowledged at two.
var Default = Config{Ensemble: client.DefaultEnsemble, AckQuorum: client.DefaultAckQuorum}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Ensemble < 1 || c.Ensemble > MaxEnsemble:
		return fmt.Errorf("quorum: ensemble of %d replicas: use 1 to %d", c.Ensemble, MaxEnsemble)
	case c.AckQuorum < 1 || c.AckQuorum > c.Ensemble:
		return fmt.Errorf("quorum: ack quorum of %d with an ensemble of %d: use 1 to %d", c.AckQuorum, c.Ensemble, c.Ensemble)
	}
	return nil
}

// RecoveryQuorum is how many replicas a recovery must fence and hear from:
// enough that any AckQuorum replicas include one of them.
func (c Config) RecoveryQuorum() int { return c.Ensemble - c.AckQuorum + 1 }

// Tracker follows the durable ends that the replicas of one segment report
// and computes the acknowledged end. It is not safe for concurrent use.
type Tracker struct {
	cfg       Config
	ends      []uint64 // per replica, the end of its durable prefix
	confirmed uint64
}

// NewTracker starts tracking a segment whose first offset is base.
func NewTracker(cfg Config, base uint64) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ends := make([]uint64, cfg.Ensemble)
	for i := range ends {
		ends[i] = base
	}
	return &Tracker{cfg: cfg, ends: ends, confirmed: base}, nil
}

// ErrBackwards is returned for a replica's report of an end below one it
// reported before: a replica that loses durable data is broken.
var ErrBackwards = errors.New("quorum: a replica reported a durable end below an earlier one")

// Ack records that replica holds every offset below end durably, and
// returns the acknowledged end: the largest end that AckQuorum replicas
// have reached. It never decreases.
func (t *Tracker) Ack(replica int, end uint64) (uint64, error) {
	if replica < 0 || replica >= len(t.ends) {
		return t.confirmed, fmt.Errorf("quorum: replica %d of an ensemble of %d", replica, len(t.ends))
	}
	if end < t.ends[replica] {
		return t.confirmed, fmt.Errorf("%w: replica %d, %d after %d", ErrBackwards, replica, end, t.ends[replica])
	}
	t.ends[replica] = end
	t.confirmed = max(t.confirmed, kthLargest(t.ends, t.cfg.AckQuorum))
	return t.confirmed, nil
}

// Confirmed is the acknowledged end.
func (t *Tracker) Confirmed() uint64 { return t.confirmed }

// End is the durable end replica last reported.
func (t *Tracker) End(replica int) uint64 { return t.ends[replica] }

// kthLargest returns the k-th largest of ends (k counts from 1). It sorts
// a copy on the stack: Tracker.Ack calls it for every acknowledgement.
func kthLargest(ends []uint64, k int) uint64 {
	var buf [MaxEnsemble]uint64
	s := append(buf[:0], ends...)
	slices.Sort(s)
	return s[len(s)-k]
}

// Response is one fenced replica's answer to a recovery: the end of its
// durable prefix of the segment.
type Response struct {
	Replica int
	End     uint64
}

// ErrTooFew is returned by Recover when fewer than RecoveryQuorum replicas
// answered: the segment's end cannot be known yet.
var ErrTooFew = errors.New("quorum: too few replicas answered the recovery")

// Recovery is what Recover decided.
type Recovery struct {
	End    uint64 // the segment ends here: every acknowledged offset is below
	Source int    // a replica that holds every offset below End
	// Copies lists the replicas to copy [their end, End) to, from Source, so
	// that AckQuorum replicas hold the whole segment before it is sealed.
	// Only replicas that answered are chosen, those with the most first.
	Copies []Response
}

// Recover decides where a segment whose writer is gone ends, from the
// answers of fenced replicas. It needs RecoveryQuorum distinct replicas,
// and enough of them, with the source, to make AckQuorum.
func Recover(cfg Config, base uint64, answers []Response) (Recovery, error) {
	if err := cfg.Validate(); err != nil {
		return Recovery{}, err
	}
	seen := make([]bool, cfg.Ensemble)
	var distinct []Response
	for _, a := range answers {
		switch {
		case a.Replica < 0 || a.Replica >= cfg.Ensemble:
			return Recovery{}, fmt.Errorf("quorum: answer from replica %d of an ensemble of %d", a.Replica, cfg.Ensemble)
		case a.End < base:
			return Recovery{}, fmt.Errorf("quorum: replica %d reports end %d, below the segment's base %d", a.Replica, a.End, base)
		case seen[a.Replica]:
			continue
		}
		seen[a.Replica] = true
		distinct = append(distinct, a)
	}
	need := cfg.RecoveryQuorum()
	if len(distinct) < need || len(distinct) < cfg.AckQuorum {
		return Recovery{}, fmt.Errorf("%w: %d of the %d needed (ensemble %d, ack quorum %d)", ErrTooFew, len(distinct), max(need, cfg.AckQuorum), cfg.Ensemble, cfg.AckQuorum)
	}
	// Longest first; ties by replica, so the decision is deterministic.
	slices.SortFunc(distinct, func(a, b Response) int {
		if a.End != b.End {
			if a.End > b.End {
				return -1
			}
			return 1
		}
		return a.Replica - b.Replica
	})
	r := Recovery{End: distinct[0].End, Source: distinct[0].Replica}
	for _, a := range distinct[1:cfg.AckQuorum] {
		if a.End < r.End {
			r.Copies = append(r.Copies, a)
		}
	}
	return r, nil
}
