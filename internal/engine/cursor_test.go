package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ternwal/tern/internal/record"
)

// memSource is a Source over batches in memory, all acknowledged.
type memSource struct {
	batches [][]byte // encoded, in offset order
	fills   int
}

func (s *memSource) Fill(_ context.Context, c *Cursor, wait bool) error {
	for _, raw := range s.batches {
		b, err := record.Decode(raw)
		if err != nil {
			return err
		}
		if b.NextOffset() > c.Pos() {
			s.fills++
			_, err := c.Take(b)
			return err
		}
	}
	return ErrWouldWait
}

func (s *memSource) Close() {}

// NextBatch with a byte bound returns at most that many bytes of entries
// (a larger entry alone), and decodes each batch once: a reader holds at
// most the batch it is decoding besides what it returned.
func TestNextBatchMaxBytes(t *testing.T) {
	src := &memSource{}
	var sizes []int
	add := func(ns ...int) {
		var es []record.Entry
		for _, n := range ns {
			es = append(es, record.Entry{Payload: make([]byte, n)})
		}
		src.batches = append(src.batches, record.Encode(uint64(len(sizes)), 1, es))
		sizes = append(sizes, ns...)
	}
	add(400, 400, 400) // one batch over the bound: cut inside it
	add(2000)          // one entry over the bound: alone
	add(10, 10, 10)    // small batches: several per call
	add(10)
	add(900, 50, 50, 50)
	var mu sync.Mutex
	rs := NewReaders(&mu)
	r, err := rs.Start(0, false, func() View { return View{End: uint64(len(sizes))} }, src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var calls [][]int
	for got := 0; got < len(sizes); {
		es, err := r.NextBatch(t.Context(), 100, 1000)
		if err != nil {
			t.Fatalf("after %d entries: %v", got, err)
		}
		var call []int
		for i, e := range es {
			if e.Offset != uint64(got+i) {
				t.Fatalf("entry %d has offset %d", got+i, e.Offset)
			}
			call = append(call, len(e.Payload))
		}
		calls = append(calls, call)
		got += len(es)
	}
	want := [][]int{{400, 400}, {400}, {2000}, {10, 10, 10, 10, 900, 50}, {50, 50}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("NextBatch returned %v, want %v", calls, want)
	}
	if src.fills != len(src.batches) {
		t.Errorf("%d batches decoded, want each of the %d once", src.fills, len(src.batches))
	}
}
