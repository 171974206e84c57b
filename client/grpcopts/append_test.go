package grpcopts

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/client/ternpb"
)

// Batches encoded one by one and sent in one request decode, with
// proto.Unmarshal, to the batches, with their headers, in order, and the
// request's fields.
func TestEncodeBatch(t *testing.T) {
	type batch struct {
		es []Entry
		h  BatchHeader
	}
	bs := []batch{
		{[]Entry{{Payload: []byte("a"), UnixNano: 5}}, BatchHeader{Seq: 1}},
		{[]Entry{{Payload: make([]byte, 3000)}, {Properties: map[string][]byte{"k": []byte("v")}}}, BatchHeader{Seq: 2, IfEnd: true, End: 0}},
		{[]Entry{{Payload: []byte("x"), UnixNano: -1}}, BatchHeader{IfEnd: true, End: 1 << 40}},
		{[]Entry{{}}, BatchHeader{}},
	}
	r := &EncodedAppend{Log: "l", Epoch: 3, Shared: true, Producer: 1<<63 + 5, Acked: 2}
	for _, b := range bs {
		enc := EncodeBatch(b.es, BatchSize(b.es, b.h), b.h)
		if want := protowire.SizeTag(fieldRequestBatches) + protowire.SizeBytes(BatchSize(b.es, b.h)); len(*enc) != want {
			t.Errorf("EncodeBatch wrote %d bytes, want %d", len(*enc), want)
		}
		r.Batches = append(r.Batches, enc)
	}
	enc, err := codec{}.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	req := new(ternpb.AppendStreamRequest)
	if err := proto.Unmarshal(enc.Materialize(), req); err != nil {
		t.Fatal(err)
	}
	if req.Log != "l" || req.Epoch != 3 || !req.Shared || req.Producer != r.Producer || req.Acked != 2 {
		t.Fatalf("request = log %q epoch %d shared %v producer %d acked %d", req.Log, req.Epoch, req.Shared, req.Producer, req.Acked)
	}
	var want [][]Entry
	for i, b := range bs {
		want = append(want, b.es)
		pb := req.Batches[i]
		if pb.Seq != b.h.Seq || (pb.IfEnd != nil) != b.h.IfEnd || pb.GetIfEnd() != b.h.End {
			t.Errorf("batch %d: seq %d if_end %v, want %+v", i, pb.Seq, pb.IfEnd, b.h)
		}
	}
	if g, w := describe("", 0, protoBatches(req)), describe("", 0, want); g != w {
		t.Fatalf("the request decodes to\n%.2000s\nwant\n%.2000s", g, w)
	}
	// And the server's decoder agrees.
	var got DecodedAppend
	if err := parseAppend(enc.Materialize(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Log != "l" || got.Epoch != 3 || !got.Shared || got.Producer != r.Producer || got.Acked != 2 {
		t.Fatalf("decoded request = %+v", got)
	}
	for i, b := range bs {
		if got.Headers[i] != b.h {
			t.Errorf("decoded batch %d header %+v, want %+v", i, got.Headers[i], b.h)
		}
	}
	if g, w := describe("", 0, decodedBatches(&got)), describe("", 0, want); g != w {
		t.Fatalf("parseAppend decodes to\n%.2000s\nwant\n%.2000s", g, w)
	}
	for _, b := range r.Batches {
		ReleaseBatch(b)
	}
}

// A batch's length prefix is right at every size, across the sizes where
// a varint grows a byte (127 and 16,383 bytes).
func TestEncodeBatchLengthPrefix(t *testing.T) {
	for _, around := range []int{1 << 7, 1 << 14} {
		for n := around - 8; n < around+8; n++ {
			es := []Entry{{Payload: make([]byte, n)}}
			body := EncodeBatch(es, BatchSize(es, BatchHeader{}), BatchHeader{})
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
