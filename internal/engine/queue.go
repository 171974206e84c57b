package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/record"
)

// Group is a batch being built by appenders and then committed as one, or a
// time tick, which takes a place in the queue but writes nothing.
type Group struct {
	B       *record.Builder // from a pool; nil for a tick and once released
	IsTick  bool
	Tick    uint64 // the tick's time, for a tick
	Epoch   uint64
	MaxTime int64     // the newest entry's time
	Queued  time.Time // when the group was started
	// Conditional: the group is one append made with IfEnd, which was
	// checked against the offsets the queue predicted. It must be
	// committed at those offsets or not at all (see Queue.Rewind).
	Conditional bool
	Appends     int // the appends encoded in B
	Outcome         // Base: for a tick, its position, the tail when its turn came
}

// builders recycles batch buffers, which would otherwise be grown from
// empty by every commit. The last few released are kept in spare, which
// the garbage collector does not empty; the others go to a sync.Pool, which
// it does: under a high rate of small appends it runs every few rounds,
// and a pool alone then hands most groups an empty builder.
var builders = sync.Pool{New: func() any { return new(record.Builder) }}

// spare holds the builders released last, newest on top, so that the next
// group gets the buffer most likely still in the CPU's cache. It keeps
// builders of at most maxSpareBytes, which bounds what it keeps alive once
// the logs fall idle (len(spare.bs) * maxSpareBytes).
var spare struct {
	mu sync.Mutex
	bs [2]*record.Builder
	n  int
}

// maxSpareBytes covers a group of the local engine's default MaxBatchBytes
// (4 MiB) and the growth of its buffer past it.
const maxSpareBytes = 8 << 20

// newBuilder returns an empty builder, with the buffers of the one
// released last if it is spare.
func newBuilder() *record.Builder {
	spare.mu.Lock()
	if spare.n > 0 {
		spare.n--
		b := spare.bs[spare.n]
		spare.bs[spare.n] = nil
		spare.mu.Unlock()
		return b
	}
	spare.mu.Unlock()
	return builders.Get().(*record.Builder)
}

// releaseBuilder resets b and keeps it for newBuilder.
func releaseBuilder(b *record.Builder) {
	b.Reset()
	if b.Cap() > maxSpareBytes {
		builders.Put(b)
		return
	}
	spare.mu.Lock()
	if spare.n == len(spare.bs) {
		builders.Put(spare.bs[0])
		copy(spare.bs[:], spare.bs[1:])
		spare.n--
	}
	spare.bs[spare.n] = b
	spare.n++
	spare.mu.Unlock()
}

// Finish records the group's outcome, wakes its waiters and releases its
// buffer. It is called once.
func (g *Group) Finish(err error) {
	g.Outcome.Finish(err)
	g.Release()
}

// Release recycles the group's buffer, once its bytes are written, copied
// or dropped.
func (g *Group) Release() {
	if g.B != nil {
		releaseBuilder(g.B)
		g.B = nil
	}
}

// AppendOptions are what an append says besides its entries: who appends
// it (for deduplication) and on what condition.
type AppendOptions struct {
	Producer uint64 // 0: anonymous; never deduplicated
	Seq      uint64 // the append's sequence number in Producer's stream, >= 1 when Producer != 0
	Acked    uint64 // every Seq of Producer below Acked has been answered to the producer: the state may forget them
	IfEnd    bool   // append only if the log's end, counting appends queued before this one, is End
	End      uint64
}

// Queue is where appends wait for the committer: the groups appended and
// not yet taken, oldest first. The last one grows while it is not a tick
// and stays under MaxBatchBytes, so an append never spans two groups and
// is atomic. The log's mutex guards a Queue.
//
// The queue also predicts the log's end, the offset the next append will
// get: the end of the groups taken (committed or in flight) plus the
// entries queued. The engine keeps the prediction true: SetEnd when it
// learns its end (at open, after recovery), Rewind when taken groups
// failed and did not take their offsets. And it holds the log's Dedup.
type Queue struct {
	MaxBatchBytes int
	Codec         record.Codec // of every group's batch
	Dedup         Dedup
	groups        []*Group
	bytes         int    // the encoded bytes of the queued entries
	taken         uint64 // the end of the groups taken, if they all commit
	queued        uint64 // the entries queued
	added         uint64 // the appends ever added, duplicates not counted
}

// Add encodes entries, of the writer of epoch, into the newest group, or a
// new one started at now, and returns the append's Pending and whether it
// started a group.
//
// An append with a producer that the Dedup finds is not appended again:
// the original's Pending is returned (started false). A conditional
// append (o.IfEnd) fails with a *rpcerr.EndMismatchError unless End is
// o.End; as a duplicate it is answered as one, whatever the end. A
// conditional append is a group of its own, committed in the same round as
// the groups around it.
func (q *Queue) Add(epoch uint64, entries []record.Entry, o AppendOptions, now time.Time) (Pending, bool, error) {
	if len(entries) == 0 {
		return Pending{}, false, errors.New("engine: append of no entries")
	}
	if o.Producer != 0 {
		if o.Seq == 0 {
			return Pending{}, false, fmt.Errorf("%w: engine: append of producer %d without a sequence number (they start at 1)", rpcerr.ErrInvalid, o.Producer)
		}
		p, dup, err := q.Dedup.Find(o.Producer, o.Seq, o.Acked, len(entries))
		if err != nil || dup {
			return p, false, err
		}
	}
	if o.IfEnd && o.End != q.End() {
		return Pending{}, false, &rpcerr.EndMismatchError{Expected: o.End, End: q.End()}
	}
	size := record.AppendBytes
	for _, e := range entries {
		size += record.EncodedBytes(e)
	}
	var g *Group
	started := false
	// A conditional append is a group, and so a batch, of its own: if the
	// groups ahead fail, Rewind fails it alone.
	if n := len(q.groups); n > 0 && !o.IfEnd && !q.groups[n-1].IsTick && !q.groups[n-1].Conditional &&
		q.groups[n-1].B.Bytes()+size <= q.MaxBatchBytes {
		g = q.groups[n-1]
	} else {
		g = &Group{B: newBuilder(), Epoch: epoch, Queued: now, Outcome: NewOutcome()}
		g.B.SetCodec(q.Codec)
		q.groups = append(q.groups, g)
		started = true
	}
	p := g.Pending(uint64(g.B.Count()))
	before := g.B.Bytes()
	if o.Producer != 0 {
		g.B.StartAppend(o.Producer, o.Seq)
	} else {
		g.B.StartAppend(0, 0)
	}
	for _, e := range entries {
		g.B.Add(e)
		g.MaxTime = max(g.MaxTime, e.Time)
	}
	g.Conditional = g.Conditional || o.IfEnd
	g.Appends++
	q.added++
	q.bytes += g.B.Bytes() - before
	q.queued += uint64(len(entries))
	if o.Producer != 0 {
		q.Dedup.Record(o.Producer, o.Seq, len(entries), p)
	}
	return p, started, nil
}

// End is the offset the next append will get if every group taken and
// queued commits: what a conditional append is checked against.
func (q *Queue) End() uint64 { return q.taken + q.queued }

// SetEnd tells the queue where the groups taken end: at open, when the
// engine reloads its end, and when a fence dooms the groups taken and not
// yet committed. No group taken may commit after it.
func (q *Queue) SetEnd(end uint64) { q.taken = end }

// Rewind tells the queue that the groups taken end at end after all: some
// failed without taking their offsets. The queued conditional appends were
// checked against the end it predicted, so they fail with err, which
// failed the groups ahead of them; the other appends stay queued, to
// commit at their new offsets.
func (q *Queue) Rewind(end uint64, err error) {
	if end == q.taken {
		return
	}
	q.taken = end
	kept := q.groups[:0]
	for _, g := range q.groups {
		if g.Conditional {
			q.bytes -= g.B.Bytes()
			q.queued -= uint64(g.B.Count())
			g.Finish(err)
			continue
		}
		kept = append(kept, g)
	}
	clear(q.groups[len(kept):])
	q.groups = kept
}

// AddTick queues a time tick t of the writer of epoch, at now.
func (q *Queue) AddTick(epoch, t uint64, now time.Time) Pending {
	g := &Group{IsTick: true, Tick: t, Epoch: epoch, Queued: now, Outcome: NewOutcome()}
	q.groups = append(q.groups, g)
	return g.Pending(0)
}

// Added is how many appends the queue has taken since it was made
// (duplicates answered from the Dedup not counted): a committer that waits
// for a number of appends compares two readings.
func (q *Queue) Added() uint64 { return q.added }

// Len is the number of queued groups.
func (q *Queue) Len() int { return len(q.groups) }

// Bytes is the encoded size of the queued entries.
func (q *Queue) Bytes() int { return q.bytes }

// Groups returns the queued groups, oldest first, for the caller to look at.
func (q *Queue) Groups() []*Group { return q.groups }

// Take removes the n oldest groups and returns them.
func (q *Queue) Take(n int) []*Group {
	taken := q.groups[:n:n]
	q.groups = q.groups[n:]
	for _, g := range taken {
		if !g.IsTick {
			q.bytes -= g.B.Bytes()
			q.queued -= uint64(g.B.Count())
			q.taken += uint64(g.B.Count())
		}
	}
	if len(q.groups) == 0 {
		q.groups, q.bytes, q.queued = nil, 0, 0
	}
	return taken
}

// Fail finishes every queued group with err and empties the queue. What
// is taken stays taken.
func (q *Queue) Fail(err error) {
	for _, g := range q.groups {
		g.Finish(err)
	}
	q.groups, q.bytes, q.queued = nil, 0, 0
}

// Refuse returns why a log refuses an append or a tick: rpcerr.ErrClosed
// once it is closed, the error it failed with (until recovered), or
// rpcerr.ErrFenced when the writer is not the current one. It returns nil
// when the log takes it.
func Refuse(closed bool, failed error, current bool) error {
	switch {
	case closed:
		return rpcerr.ErrClosed
	case failed != nil:
		return failed
	case !current:
		return rpcerr.ErrFenced
	}
	return nil
}

// NotOwned is the error a commit fails with when the writer can no longer
// prove that it holds its epoch.
func NotOwned() error {
	return fmt.Errorf("%w: the writer can no longer prove it owns the log (a newer writer was opened, or its metadata lease lapsed)", rpcerr.ErrFenced)
}

// Wake sends on ch, a channel of capacity one, unless a wake-up is already
// waiting there.
func Wake(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
