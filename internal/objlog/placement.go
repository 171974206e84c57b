package objlog

import (
	"context"
	"fmt"

	"github.com/ternwal/tern/internal/meta"
)

// Placement keeps the fragments of a log's open segments somewhere other
// than the bucket until the segments are sealed, then moves them there:
// package quorumlog's ensembles of replica nodes. A segment that is placed
// records where in metadata (meta.Segment.Ensemble, AckQuorum) until it is
// moved. A log without a Placement (object mode) stores every fragment as
// an object at once.
//
// The log calls Start from its flusher, Recover and Open while it owns its
// segment list (at Open, or in Fence with the flusher paused), Move from
// Offload under its compaction lock, and Source and Drop at any time.
type Placement interface {
	// Start places the new segment *m, setting its Ensemble and
	// AckQuorum before the log records it, and opens the Stream its
	// fragments go to. wake is called when the Stream's state changes
	// (Degraded), for the log to look again.
	Start(m *meta.Segment, wake func()) (Stream, error)
	// Recover fences the open segment m that an earlier writer left, with
	// epoch, so that no fragment of an older writer is acknowledged any
	// more, and returns its fragments up to a point at or past every one
	// that writer acknowledged. The log then seals m there.
	Recover(ctx context.Context, m meta.Segment, epoch uint64) (Lister, error)
	// Open returns the fragments of the open segment m that a log opened
	// without fencing reads: those any recovery keeps.
	Open(ctx context.Context, m meta.Segment) (Lister, error)
	// Source returns where readers read the fragments of segment m, which
	// is placed and not yet moved. Keys are the bucket keys the fragments
	// would have.
	Source(m meta.Segment) Ranger
	// Move has the sealed segment m, of count fragments, stored in the
	// bucket as the objects of plan, and its copies cut at count.
	Move(ctx context.Context, m meta.Segment, count uint64, plan []Span) error
	// Drop deletes the placement's copies of segment m, as far as it can.
	Drop(ctx context.Context, m meta.Segment)
}

// Stream takes the fragments of one open placed segment.
type Stream interface {
	// Send stores fragment n, whose bytes are data. The flusher calls it
	// in fragment order; done is called once, with nil once the fragment
	// is durable as the placement defines it, or with the error that lost
	// it. Fragments are done in order.
	Send(n int, data []byte, done func(err error))
	// Degraded reports that the segment should be sealed and the next
	// one placed afresh.
	Degraded() bool
	// Close ends the stream; the fragments not yet done fail.
	Close()
}

// Ranger reads part of an object.
type Ranger interface {
	GetRange(ctx context.Context, key string, off int64, p []byte) (int, error)
}

// Span is an object that moving a placed segment writes: fragments
// [From, To) of the segment, joined, at Key in the bucket.
type Span struct {
	Key      string
	From, To uint64
}

// SegmentPrefix is the key prefix of the objects of segment seq of the log
// whose keys start with prefix.
func SegmentPrefix(prefix string, seq uint64) string { return fmt.Sprintf("%s%08d/", prefix, seq) }

// FragmentKey is the key of fragment n of a segment, relative to the
// segment's prefix.
func FragmentKey(n int) string { return fmt.Sprintf("%08d", n) }

// segPrefix is the key prefix of segment seq's objects.
func (l *Log) segPrefix(seq uint64) string { return SegmentPrefix(l.opts.Prefix, seq) }

// fragKey is the key of fragment n of a segment, relative to its prefix.
func fragKey(n int) string { return FragmentKey(n) }

// errUnplaced says a placed segment was found by a log opened without a
// Placement.
func errUnplaced(prefix string, seq uint64) error {
	return fmt.Errorf("objlog: segment %d of %s is kept on replicas, and the log was opened without them", seq, prefix)
}

// recoverPlaced recovers the open placed segment m left by an earlier
// writer, and seals it in metadata where the Placement's recovery ends.
func (l *Log) recoverPlaced(ctx context.Context, m meta.Segment) (meta.Segment, error) {
	if l.opts.Placement == nil {
		return meta.Segment{}, errUnplaced(l.opts.Prefix, m.Seq)
	}
	v, err := l.opts.Placement.Recover(ctx, m, l.epochNow())
	if err != nil {
		return meta.Segment{}, err
	}
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

// source returns where a reader reads segment s's objects from. The caller
// holds mu.
func (l *Log) source(s *seg) Ranger {
	if len(s.m.Ensemble) == 0 || l.opts.Placement == nil {
		return l.opts.Bucket
	}
	return l.opts.Placement.Source(s.m)
}
