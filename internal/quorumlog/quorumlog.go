// Package quorumlog is the write path of a log in quorum mode: the
// fragments of its open segment go to an ensemble of replica nodes
// (package replica) and are acknowledged once the segment's ack quorum
// holds them durably; sealed segments are then offloaded to object storage,
// and read from there, as object mode's are.
//
// It owns the replica side of a quorum log and nothing else: the log
// itself (the group-commit queue, fragments, segments in metadata,
// readers, retention, compaction) is package objlog's, which quorumlog
// plugs into as an objlog.Placement. The files hold its jobs:
//
//   - ensemble.go: choosing a new segment's ensemble, leaving out the
//     nodes that failed lately; sending each fragment to every replica and
//     acknowledging it at the ack quorum, in order; dropping a replica that
//     fails or lags (LagTimeout), which makes the log roll to a new
//     segment, and failing the fragments in flight once fewer than the ack
//     quorum are left.
//   - recover.go: recovering the open segment of a writer that died, as
//     BookKeeper recovers a ledger: fence the ensemble with the new epoch,
//     read how far RecoveryQuorum replicas reach, copy the longest prefix
//     forward to enough of them, and let objlog seal the segment there.
//   - read.go: reading a segment not yet offloaded from its replicas,
//     passing over a replica whose copy is damaged.
//   - offload.go: sealing the replicas of a sealed segment at its end and
//     having one of them upload it to the bucket; dropping the replicas'
//     copies once the segment's objects are recorded.
//
// A quorum segment's metadata (meta.Segment) names its ensemble and ack
// quorum from its creation until it is offloaded; a fragment's key is the
// one it will have in the bucket, so that readers and recovery read it
// the same way from the replicas and from the bucket.
package quorumlog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/replica"
)

// Replicas are the nodes a quorum log keeps its open segments on, and how
// long it waits for them.
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
	// Lost, if not nil, is told the ID of each replica dropped from a
	// segment's ensemble (it failed, or fell behind for LagTimeout), after
	// which the segment rolls to a new ensemble. It must be cheap and safe
	// for concurrent use (a metric).
	Lost func(node string)
}

func (r *Replicas) setDefaults() {
	if r.LagTimeout <= 0 {
		r.LagTimeout = 2 * time.Second
	}
	if r.CallTimeout <= 0 {
		r.CallTimeout = 10 * time.Second
	}
}

// Open opens the log that o describes in quorum mode, its open segments on
// ensembles of the replicas r. Zero tuning fields of o take quorum mode's
// defaults, which differ from object mode's: a fragment costs a message and
// a journal record, not a PUT.
func Open(ctx context.Context, o objlog.Options, r Replicas) (*objlog.Log, error) {
	r.setDefaults()
	// Send at once, and let the fragments in flight group what queues.
	// Up to 32 MiB in flight to the replicas: while their journals' disk
	// is slow to sync, the throughput is what is in flight over the
	// latency of a sync, and 8 fragments held a writer to a quarter of
	// what a bare pipeline does with 32 MiB on the same disk
	// (docs/benchmarks/notes.md, "quorum path"). Each replica bounds what
	// it takes (its stream window and MemBytes) whatever this is.
	if o.FlushBytes <= 0 {
		o.FlushBytes = 1 << 20
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 32
	}
	// A fragment is a journal record on the replicas, not an object, and
	// short segments cost a create and a seal in etcd each and reset the
	// lag rule before it sees a replica lag. But the seal writes the list
	// of fragments (up to 56 bytes each: 459 KB at 8192) into one etcd
	// value, which must stay well under etcd's 1.5 MiB request limit, and
	// offload replaces it in one request.
	if o.MaxFragments <= 0 {
		o.MaxFragments = 8192
	}
	o.Now, o.Logger = engine.Defaults(o.Now, o.Logger)
	o.Placement = &placement{r: r, prefix: o.Prefix, now: o.Now, logger: o.Logger, avoid: map[string]time.Time{}}
	return objlog.Open(ctx, o)
}

// placement is an objlog.Placement on replica nodes.
type placement struct {
	r      Replicas
	prefix string // the log's key prefix in the bucket
	now    func() time.Time
	logger *slog.Logger

	mu    sync.Mutex
	avoid map[string]time.Time // nodes that failed in an ensemble, and when
}

// Start chooses the ensemble of the new segment *m, leaving out the nodes
// that failed lately if it can, and opens its streams.
func (p *placement) Start(m *meta.Segment, wake func()) (objlog.Stream, error) {
	ids, err := p.chooseEnsemble(m.Seq)
	if err != nil {
		return nil, err
	}
	m.Ensemble, m.AckQuorum = ids, p.r.Config.AckQuorum
	e, err := p.openEnsemble(*m, wake)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// segID names segment seq of the log on its replicas.
func (p *placement) segID(seq uint64) replica.SegmentID {
	return replica.SegmentID{Log: p.r.Log, Seq: seq}
}

// segPrefix is the key prefix of segment seq's objects in the bucket.
func (p *placement) segPrefix(seq uint64) string { return objlog.SegmentPrefix(p.prefix, seq) }
