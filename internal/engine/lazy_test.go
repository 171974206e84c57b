package engine

import (
	"errors"
	"sync"
	"testing"
)

func TestDedupLoad(t *testing.T) {
	var z DedupLoad
	boom := errors.New("boom")
	if err := z.Ensure(DedupDeep, func(int) error { return boom }); err != boom {
		t.Fatalf("Ensure of a failing load: %v", err)
	}
	var mu sync.Mutex
	loads := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := z.Ensure(DedupDeep, func(int) error { mu.Lock(); loads++; mu.Unlock(); return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if loads != 1 {
		t.Fatalf("%d loads after a failed one, want 1", loads)
	}
	reset := false
	z.Forget(func() { reset = true })
	z.Ensure(DedupDeep, func(int) error { loads++; return nil })
	if !reset || loads != 2 {
		t.Fatalf("after Forget: reset %v, %d loads; want a reset and a second load", reset, loads)
	}
}

// A shallow load is followed by a deep one only when asked; a deep one
// covers the shallow.
func TestDedupLoadDepths(t *testing.T) {
	var z DedupLoad
	var depths []int
	load := func(d int) error { depths = append(depths, d); return nil }
	z.Ensure(DedupShallow, load)
	z.Ensure(DedupShallow, load)
	z.Ensure(DedupDeep, load)
	z.Ensure(DedupShallow, load)
	z.Ensure(DedupDeep, load)
	if len(depths) != 2 || depths[0] != DedupShallow || depths[1] != DedupDeep {
		t.Fatalf("loads %v, want one shallow then one deep", depths)
	}
}

// NeedsDeep: only a producer with a history the table does not hold back
// to the append's sequence.
func TestDedupNeedsDeep(t *testing.T) {
	var d Dedup
	d.Restore(7, 10, 1, 100)
	d.Restore(7, 11, 1, 101)
	for _, tt := range []struct {
		o    AppendOptions
		want bool
	}{
		{AppendOptions{}, false},
		{AppendOptions{Producer: 9, Seq: 1, Acked: 1}, false}, // a new producer
		{AppendOptions{Producer: 9, Seq: 5, Acked: 5}, true},  // a history the table lacks
		{AppendOptions{Producer: 7, Seq: 12, Acked: 12}, false},
		{AppendOptions{Producer: 7, Seq: 11, Acked: 11}, false},
		{AppendOptions{Producer: 7, Seq: 9, Acked: 9}, true}, // below what was read back
	} {
		d.init()
		if got := d.NeedsDeep(tt.o); got != tt.want {
			t.Errorf("NeedsDeep(%+v) = %v, want %v", tt.o, got, tt.want)
		}
	}
}
