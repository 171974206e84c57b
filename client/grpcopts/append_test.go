package grpcopts

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/client/ternpb"
)

// An AppendQueue fills each request body up to its size, growing the body
// as batches come, then starts the next; a batch larger than the size goes
// alone. Every body sent through the codec decodes, with proto.Unmarshal,
// to the batches queued, in order.
func TestAppendQueue(t *testing.T) {
	const maxBytes = 64 << 10
	q := NewAppendQueue(maxBytes)
	var want [][]Entry
	add := func(es ...Entry) {
		q.Add(es, BatchSize(es))
		want = append(want, es)
	}
	for i := range 200 { // about 200 KiB: bodies grow from minBodyBytes, then split
		add(Entry{Payload: bytes.Repeat([]byte{byte(i)}, 1000), UnixNano: int64(i)})
	}
	add(Entry{Payload: make([]byte, 3*maxBytes)}) // alone
	add(Entry{Properties: map[string][]byte{"k": []byte("v")}}, Entry{Payload: []byte("x"), UnixNano: -1})

	bodies := q.Take()
	if q.Len() != 0 {
		t.Fatalf("Take left %d bodies queued", q.Len())
	}
	var got [][]Entry
	var sizes, firsts []int // each body's size, and that of its first batch
	for i, body := range bodies {
		sizes = append(sizes, len(*body)) // the body goes back to the pool with enc
		enc, err := codec{}.Marshal(&EncodedAppend{Log: "l", Epoch: 3, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		req := new(ternpb.AppendStreamRequest)
		if err := proto.Unmarshal(enc.Materialize(), req); err != nil {
			t.Fatal(err)
		}
		enc.Free()
		if req.Log != "l" || req.Epoch != 3 {
			t.Fatalf("request for log %q epoch %d, want l 3", req.Log, req.Epoch)
		}
		bs := protoBatches(req)
		if len(bs) > 1 && sizes[i] > maxBytes {
			t.Errorf("body %d has %d batches in %d bytes, over the size %d", i, len(bs), sizes[i], maxBytes)
		}
		firsts = append(firsts, protowire.SizeTag(fieldRequestBatches)+protowire.SizeBytes(BatchSize(bs[0])))
		got = append(got, bs...)
	}
	for i := 1; i < len(bodies); i++ {
		if n := sizes[i-1] + firsts[i]; n <= maxBytes {
			t.Errorf("body %d ended at %d bytes though the next batch fit (%d)", i-1, sizes[i-1], n)
		}
	}
	if len(bodies) != 6 {
		t.Errorf("%d bodies, want 4 of the small batches, 1 of the large, 1 of the last", len(bodies))
	}
	if g, w := describe("", 0, got), describe("", 0, want); g != w {
		t.Fatalf("the requests decode to\n%.2000s\nwant\n%.2000s", g, w)
	}
}

// A batch's length prefix is right at every size, across the sizes where
// a varint grows a byte (127 and 16,383 bytes).
func TestAppendQueueLengthPrefix(t *testing.T) {
	for _, around := range []int{1 << 7, 1 << 14} {
		for n := around - 8; n < around+8; n++ {
			es := []Entry{{Payload: make([]byte, n)}}
			q := NewAppendQueue(1 << 20)
			q.Add(es, BatchSize(es))
			body := q.Take()[0]
			req := new(ternpb.AppendStreamRequest)
			if err := proto.Unmarshal(*body, req); err != nil {
				t.Fatalf("a batch of a %d-byte entry: %v", n, err)
			}
			if len(req.Batches) != 1 || len(req.Batches[0].Entries) != 1 || len(req.Batches[0].Entries[0].Payload) != n {
				t.Fatalf("a batch of a %d-byte entry decodes as %v", n, req)
			}
		}
	}
}
