package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
)

// finished returns a Pending whose outcome is known: committed at base, or
// failed with err.
func finished(base uint64, err error) Pending {
	o := NewOutcome()
	o.Base = base
	o.Finish(err)
	return o.Pending(0)
}

func mustFind(t *testing.T, d *Dedup, id, seq, acked uint64, count int) (Pending, bool) {
	t.Helper()
	p, dup, err := d.Find(id, seq, acked, count)
	if err != nil {
		t.Fatalf("Find(%d, %d): %v", id, seq, err)
	}
	return p, dup
}

func offsetOf(t *testing.T, p Pending) uint64 {
	t.Helper()
	select {
	case <-p.Done():
	default:
		t.Fatal("the duplicate's Pending has not completed")
	}
	off, err := p.Wait(t.Context())
	if err != nil {
		t.Fatalf("the duplicate's Pending failed: %v", err)
	}
	return off
}

func TestDedupDuplicates(t *testing.T) {
	var d Dedup
	if _, dup := mustFind(t, &d, 7, 1, 0, 2); dup {
		t.Fatal("an unknown producer's append is a duplicate")
	}
	d.Record(7, 1, 2, finished(100, nil))
	if p, dup := mustFind(t, &d, 7, 1, 0, 2); !dup || offsetOf(t, p) != 100 {
		t.Fatalf("retry of an acknowledged append: duplicate %v", dup)
	}
	if _, dup := mustFind(t, &d, 7, 2, 0, 1); dup {
		t.Fatal("the next sequence is a duplicate")
	}
	if _, dup := mustFind(t, &d, 8, 1, 0, 2); dup {
		t.Fatal("another producer's sequence 1 is a duplicate")
	}

	// In flight: the duplicate shares the original's outcome.
	o := NewOutcome()
	d.Record(7, 2, 1, o.Pending(3))
	p, dup := mustFind(t, &d, 7, 2, 0, 1)
	if !dup {
		t.Fatal("retry of an append in flight is not a duplicate")
	}
	select {
	case <-p.Done():
		t.Fatal("the duplicate completed before the original")
	default:
	}
	o.Base = 50
	o.Finish(nil)
	if off := offsetOf(t, p); off != 53 {
		t.Fatalf("duplicate of an append in flight: offset %d, want the original's 53", off)
	}

	// A failed original: the duplicate fails the same way while it is in
	// flight, and a retry after the failure is new.
	f := NewOutcome()
	d.Record(7, 3, 1, f.Pending(0))
	p, _ = mustFind(t, &d, 7, 3, 0, 1)
	boom := errors.New("boom")
	f.Finish(boom)
	if _, err := p.Wait(t.Context()); err != boom {
		t.Fatalf("duplicate of a failed append: %v, want the original's error", err)
	}
	if _, dup := mustFind(t, &d, 7, 3, 0, 1); dup {
		t.Fatal("a retry of a failed append is a duplicate")
	}

	// A retry must repeat its append.
	if _, _, err := d.Find(7, 1, 0, 3); !errors.Is(err, rpcerr.ErrInvalid) {
		t.Fatalf("retry with another entry count: %v, want ErrInvalid", err)
	}
}

func TestDedupAckedTrims(t *testing.T) {
	var d Dedup
	for seq := uint64(1); seq <= 10; seq++ {
		d.Record(1, seq, 1, finished(seq*10, nil))
	}
	if _, dup := mustFind(t, &d, 1, 5, 4, 1); !dup {
		t.Fatal("sequence 5 forgotten by Acked 4")
	}
	seqs, low := d.Window(1)
	if low != 4 || !slices.Equal(seqs, []uint64{4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("window %v from %d after Acked 4", seqs, low)
	}
	_, _, err := d.Find(1, 3, 4, 1)
	if !errors.Is(err, rpcerr.ErrInvalid) || !strings.Contains(err.Error(), "older than the deduplication window") {
		t.Fatalf("a sequence below Acked: %v, want ErrInvalid saying it is older than the window", err)
	}
	// Acked never moves back.
	if _, _, err := d.Find(1, 3, 0, 1); !errors.Is(err, rpcerr.ErrInvalid) {
		t.Fatalf("after a lower Acked: %v", err)
	}
	if _, dup := mustFind(t, &d, 1, 11, 11, 1); dup {
		t.Fatal("a new sequence is a duplicate")
	}
	if seqs, _ := d.Window(1); len(seqs) != 0 {
		t.Fatalf("window %v after Acked 11", seqs)
	}
}

func TestDedupWindowBound(t *testing.T) {
	var d Dedup
	n := uint64(DedupWindow + 10)
	for seq := uint64(1); seq <= n; seq++ {
		d.Record(1, seq, 1, finished(seq, nil))
	}
	seqs, low := d.Window(1)
	if len(seqs) != DedupWindow || low != 11 || seqs[0] != 11 {
		t.Fatalf("window of %d appends from %d (first %d); want %d from 11", len(seqs), low, seqs[0], DedupWindow)
	}
	if _, _, err := d.Find(1, 10, 0, 1); !errors.Is(err, rpcerr.ErrInvalid) {
		t.Fatalf("a sequence dropped from the window: %v, want ErrInvalid", err)
	}
	if p, dup := mustFind(t, &d, 1, 11, 0, 1); !dup || offsetOf(t, p) != 11 {
		t.Fatal("the oldest sequence of the window is forgotten")
	}
	// Out of order: an older sequence in the window's range is placed.
	var e Dedup
	for _, seq := range []uint64{5, 3, 9, 4} {
		e.Record(2, seq, 1, finished(seq, nil))
	}
	if seqs, _ := e.Window(2); !slices.Equal(seqs, []uint64{3, 4, 5, 9}) {
		t.Fatalf("window %v, want sorted", seqs)
	}
}

func TestDedupProducersBound(t *testing.T) {
	var d Dedup
	for id := uint64(1); id <= DedupProducers; id++ {
		d.Record(id, 1, 1, finished(id, nil))
	}
	mustFind(t, &d, 1, 1, 0, 1) // producer 1 is now the most recently used
	d.Record(DedupProducers+1, 1, 1, finished(0, nil))
	if d.Len() != DedupProducers {
		t.Fatalf("%d producers, want %d", d.Len(), DedupProducers)
	}
	if _, dup := mustFind(t, &d, 1, 1, 0, 1); !dup {
		t.Fatal("the most recently used producer was dropped")
	}
	if seqs, _ := d.Window(2); seqs != nil {
		t.Fatal("the least recently used producer is still there")
	}
}

// All producers together, the table holds at most DedupEntries appends:
// the least recently used producers lose their oldest first, and a retry
// of a forgotten one is refused, never appended again.
func TestDedupEntriesBound(t *testing.T) {
	var d Dedup
	const producers = 32
	per := DedupEntries / producers * 2 // twice what fits
	for id := uint64(1); id <= producers; id++ {
		for seq := uint64(1); seq <= uint64(per); seq++ {
			d.Record(id, seq, 1, finished(seq, nil))
		}
	}
	total := 0
	for id := uint64(1); id <= producers; id++ {
		seqs, _ := d.Window(id)
		total += len(seqs)
	}
	if total != DedupEntries || d.entries != total {
		t.Fatalf("the windows hold %d appends (counted %d), want %d", total, d.entries, DedupEntries)
	}
	// The most recently used producer kept its newest appends.
	if _, dup := mustFind(t, &d, producers, uint64(per), 0, 1); !dup {
		t.Fatal("the newest append of the most recent producer was forgotten")
	}
	if _, _, err := d.Find(1, 1, 0, 1); !errors.Is(err, rpcerr.ErrInvalid) {
		t.Fatalf("a forgotten append of the oldest producer: %v, want ErrInvalid", err)
	}
	// Acknowledging frees room, counted.
	d.Find(producers, uint64(per)+1, uint64(per)+1, 1)
	if seqs, _ := d.Window(producers); len(seqs) != 0 {
		t.Fatalf("window after acknowledging everything: %v", seqs)
	}
	total = 0
	for id := uint64(1); id <= producers; id++ {
		seqs, _ := d.Window(id)
		total += len(seqs)
	}
	if d.entries != total {
		t.Fatalf("counted %d appends, the windows hold %d", d.entries, total)
	}
}

func TestDedupRestore(t *testing.T) {
	var d Dedup
	d.Restore(4, 20, 2, 100)
	d.Restore(4, 21, 1, 102)
	d.Restore(4, 18, 1, 103) // a late retry of an older sequence
	if p, dup := mustFind(t, &d, 4, 21, 0, 1); !dup || offsetOf(t, p) != 102 {
		t.Fatal("restored append not found")
	}
	if p, dup := mustFind(t, &d, 4, 18, 0, 1); !dup || offsetOf(t, p) != 103 {
		t.Fatal("restored older append not found")
	}
	// Below the oldest restored, the log read back may not reach.
	if _, _, err := d.Find(4, 17, 0, 1); !errors.Is(err, rpcerr.ErrInvalid) {
		t.Fatalf("a sequence below the restored ones: %v, want ErrInvalid", err)
	}
	if _, dup := mustFind(t, &d, 4, 19, 0, 1); dup {
		t.Fatal("a sequence never seen is a duplicate")
	}
	d.Reset()
	if d.Len() != 0 {
		t.Fatal("Reset left producers")
	}
}
