package client

import (
	"io"
	"testing"

	"github.com/ternwal/tern/client/grpcopts"
)

// A reader WithMaxBatchBytes gets at most that many bytes of entries from
// one NextBatch, a larger entry alone, however many it asks for and however
// the server packed its responses.
func TestNextBatchMaxBytes(t *testing.T) {
	sizes := []int{400, 400, 400, 2000, 10, 10, 10, 10, 1500, 600}
	resps := []grpcopts.DecodedRead{{}, {}, {}} // of 4, 4 and 2 entries
	for i, n := range sizes {
		r := &resps[min(i/4, 2)]
		r.Entries = append(r.Entries, grpcopts.ReadEntry{Offset: uint64(i), Entry: grpcopts.Entry{Payload: make([]byte, n)}})
	}
	next := 0
	recv := func(m any) error {
		if next == len(resps) {
			return io.EOF
		}
		next++
		*m.(*grpcopts.DecodedRead) = resps[next-1]
		return nil
	}
	loop := startRecv(recv, 1000, func(err error) error { return err })
	defer loop.halt()
	got := 0
	for got < len(sizes) {
		es, err := loop.next(t.Context(), 1000)
		if err != nil {
			t.Fatalf("after %d entries: %v", got, err)
		}
		n := 0
		for i, e := range es {
			if e.Offset != Offset(got+i) {
				t.Fatalf("entry %d has offset %d", got+i, e.Offset)
			}
			n += len(e.Payload)
		}
		if n > 1000 && len(es) > 1 {
			t.Fatalf("NextBatch returned %d entries of %d bytes, over the 1000 asked", len(es), n)
		}
		got += len(es)
	}
}
