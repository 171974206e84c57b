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
	Outcome           // Base: for a tick, its position, the tail when its turn came
}

// builders recycles batch buffers, which would otherwise be grown from
// empty by every commit.
var builders = sync.Pool{New: func() any { return new(record.Builder) }}

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
		g.B.Reset()
		builders.Put(g.B)
		g.B = nil
	}
}

// Queue is where appends wait for the committer: the groups appended and
// not yet taken, oldest first. The last one grows while it is not a tick
// and stays under MaxBatchBytes, so an append never spans two groups and
// is atomic. The log's mutex guards a Queue.
type Queue struct {
	MaxBatchBytes int
	groups        []*Group
	bytes         int // the encoded bytes of the queued entries
}

// Add encodes entries, of the writer of epoch, into the newest group, or a
// new one started at now, and returns the append's Pending and whether it
// started a group.
func (q *Queue) Add(epoch uint64, entries []record.Entry, now time.Time) (Pending, bool, error) {
	if len(entries) == 0 {
		return Pending{}, false, errors.New("engine: append of no entries")
	}
	size := 0
	for _, e := range entries {
		size += record.EncodedBytes(e)
	}
	var g *Group
	started := false
	if n := len(q.groups); n > 0 && !q.groups[n-1].IsTick && q.groups[n-1].B.Bytes()+size <= q.MaxBatchBytes {
		g = q.groups[n-1]
	} else {
		g = &Group{B: builders.Get().(*record.Builder), Epoch: epoch, Queued: now, Outcome: NewOutcome()}
		q.groups = append(q.groups, g)
		started = true
	}
	p := g.Pending(uint64(g.B.Count()))
	before := g.B.Bytes()
	for _, e := range entries {
		g.B.Add(e)
		g.MaxTime = max(g.MaxTime, e.Time)
	}
	q.bytes += g.B.Bytes() - before
	return p, started, nil
}

// AddTick queues a time tick t of the writer of epoch, at now.
func (q *Queue) AddTick(epoch, t uint64, now time.Time) Pending {
	g := &Group{IsTick: true, Tick: t, Epoch: epoch, Queued: now, Outcome: NewOutcome()}
	q.groups = append(q.groups, g)
	return g.Pending(0)
}

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
		}
	}
	if len(q.groups) == 0 {
		q.groups, q.bytes = nil, 0
	}
	return taken
}

// Fail finishes every queued group with err and empties the queue.
func (q *Queue) Fail(err error) {
	for _, g := range q.groups {
		g.Finish(err)
	}
	q.groups, q.bytes = nil, 0
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
