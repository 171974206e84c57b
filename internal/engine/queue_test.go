package engine

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/record"
)

func entries(n int) []record.Entry {
	es := make([]record.Entry, n)
	for i := range es {
		es[i] = record.Entry{Payload: []byte(fmt.Sprint(i))}
	}
	return es
}

func newQueue(end uint64) *Queue {
	q := &Queue{MaxBatchBytes: 1 << 20}
	q.SetEnd(end)
	return q
}

func add(t *testing.T, q *Queue, n int, o AppendOptions) Pending {
	t.Helper()
	p, _, err := q.Add(1, entries(n), o, time.Time{})
	if err != nil {
		t.Fatalf("Add(%+v): %v", o, err)
	}
	return p
}

// commit takes every queued group and commits them from the queue's
// predicted offsets, as an engine does.
func commit(q *Queue, base uint64) []*Group {
	gs := q.Take(q.Len())
	for _, g := range gs {
		g.Base = base
		if !g.IsTick {
			base += uint64(g.B.Count())
		}
	}
	return gs
}

func finishAll(gs []*Group, err error) {
	for _, g := range gs {
		g.Finish(err)
	}
}

func TestQueueIfEnd(t *testing.T) {
	q := newQueue(10)
	if p := add(t, q, 2, AppendOptions{IfEnd: true, End: 10}); p.rel != 0 {
		t.Fatal("first append not at the group's start")
	}
	// The end counts the appends queued ahead.
	_, _, err := q.Add(1, entries(1), AppendOptions{IfEnd: true, End: 10}, time.Time{})
	if me, ok := rpcerr.As[*rpcerr.EndMismatchError](err); !ok || me.Expected != 10 || me.End != 12 || !errors.Is(err, rpcerr.ErrConditionFailed) {
		t.Fatalf("IfEnd 10 with 2 entries queued at 10: %v, want an EndMismatchError at end 12", err)
	}
	// Among other appends: a group of its own, committed in the same
	// round as the others.
	add(t, q, 3, AppendOptions{})
	p := add(t, q, 1, AppendOptions{IfEnd: true, End: 15})
	add(t, q, 1, AppendOptions{})
	if q.Len() != 4 {
		t.Fatalf("%d groups, want each conditional append in one of its own", q.Len())
	}
	// And counting the groups taken and in flight.
	gs := commit(q, 10)
	if q.End() != 17 {
		t.Fatalf("End %d with 7 entries in flight from 10, want 17", q.End())
	}
	if _, _, err := q.Add(1, entries(1), AppendOptions{IfEnd: true, End: 16}, time.Time{}); !errors.Is(err, rpcerr.ErrConditionFailed) {
		t.Fatalf("IfEnd below the entries in flight: %v", err)
	}
	add(t, q, 1, AppendOptions{IfEnd: true, End: 17})
	finishAll(gs, nil)
	if off, err := p.Wait(t.Context()); err != nil || off != 15 {
		t.Fatalf("conditional append in a group: offset %d, %v; want 15", off, err)
	}
}

// A round that fails without taking its offsets moves the end back; the
// conditional appends queued behind it fail, the others stay queued.
func TestQueueRewind(t *testing.T) {
	q := newQueue(0)
	add(t, q, 2, AppendOptions{})
	gs := commit(q, 0)
	plain := add(t, q, 1, AppendOptions{})
	cond := add(t, q, 1, AppendOptions{IfEnd: true, End: 3})
	after := add(t, q, 1, AppendOptions{})
	boom := errors.New("disk full")
	finishAll(gs, boom)
	q.Rewind(0, boom)
	if _, err := cond.Wait(t.Context()); err != boom {
		t.Fatalf("conditional append behind a failed round: %v, want the round's error", err)
	}
	if q.Len() != 2 || q.End() != 2 {
		t.Fatalf("after the rewind: %d groups, end %d; want the plain appends, end 2", q.Len(), q.End())
	}
	gs = commit(q, 0)
	finishAll(gs, nil)
	for want, p := range []Pending{plain, after} {
		if off, err := p.Wait(t.Context()); err != nil || off != uint64(want) {
			t.Fatalf("plain append after the rewind: offset %d, %v; want %d", off, err, want)
		}
	}
	q.Rewind(2, boom) // where it is already: nothing fails
}

func TestQueueDedup(t *testing.T) {
	q := newQueue(5)
	first := add(t, q, 2, AppendOptions{Producer: 9, Seq: 1})
	add(t, q, 1, AppendOptions{})
	p, started, err := q.Add(1, entries(2), AppendOptions{Producer: 9, Seq: 1, IfEnd: true, End: 99}, time.Time{})
	if err != nil || started {
		t.Fatalf("duplicate in the queue: started %v, %v", started, err)
	}
	if q.End() != 8 {
		t.Fatalf("End %d: the duplicate was queued", q.End())
	}
	add(t, q, 1, AppendOptions{Producer: 9, Seq: 2})
	add(t, q, 1, AppendOptions{Producer: 4, Seq: 1})
	gs := commit(q, 5)
	batch, err := record.Decode(gs[0].B.Finish(5, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := []record.Append{{Producer: 9, Seq: 1, Count: 2}, {Count: 1}, {Producer: 9, Seq: 2, Count: 1}, {Producer: 4, Seq: 1, Count: 1}}
	if got := batch.Appends(nil); !slices.Equal(got, want) {
		t.Fatalf("the batch's appends %+v, want %+v", got, want)
	}
	finishAll(gs, nil)
	for _, pp := range []Pending{first, p} {
		if off, err := pp.Wait(t.Context()); err != nil || off != 5 {
			t.Fatalf("original and duplicate: offset %d, %v; want 5", off, err)
		}
	}
	// Acknowledged: answered at once, even with a condition that fails.
	p, _, err = q.Add(1, entries(1), AppendOptions{Producer: 9, Seq: 2, IfEnd: true, End: 0}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if off, err := p.Wait(t.Context()); err != nil || off != 8 {
		t.Fatalf("duplicate of an acknowledged append: offset %d, %v; want 8", off, err)
	}
	if _, _, err := q.Add(1, entries(1), AppendOptions{Producer: 9}, time.Time{}); !errors.Is(err, rpcerr.ErrInvalid) {
		t.Fatalf("a producer's append without a sequence: %v, want ErrInvalid", err)
	}
}

// BenchmarkQueueAdd measures Queue.Add of one 100-byte entry into a group,
// anonymous and with a producer (the deduplication's lookup and record, and
// the batch's appends section), taking the groups as a committer does.
func BenchmarkQueueAdd(b *testing.B) {
	for _, tc := range []struct {
		name      string
		producers int
	}{{"anonymous", 0}, {"producer", 1}, {"producers=64", 64}} {
		b.Run(tc.name, func(b *testing.B) {
			q := newQueue(0)
			es := []record.Entry{{Payload: make([]byte, 100)}}
			seqs := make([]uint64, max(tc.producers, 1))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var o AppendOptions
				if tc.producers > 0 {
					k := i % tc.producers
					seqs[k]++
					o = AppendOptions{Producer: uint64(k) + 1, Seq: seqs[k], Acked: max(seqs[k], 64) - 64}
				}
				if _, _, err := q.Add(1, es, o, time.Time{}); err != nil {
					b.Fatal(err)
				}
				if i++; i%1000 == 0 {
					finishAll(commit(q, q.taken), nil)
				}
			}
		})
	}
}

// A released group's batch buffer goes to the next group, whatever the
// garbage collector did in between: a log of small appends does not grow
// a fresh buffer every round.
func TestReleasedBuildersAreReused(t *testing.T) {
	q := newQueue(0)
	var released *record.Builder
	for round := range 3 {
		add(t, q, 100, AppendOptions{})
		gs := commit(q, q.taken)
		if round > 0 && gs[0].B != released {
			t.Fatalf("round %d: the group has a new builder: the one released by the round before was not reused", round)
		}
		released = gs[0].B
		finishAll(gs, nil)
		runtime.GC()
		runtime.GC() // a sync.Pool is empty after two collections
	}
}
