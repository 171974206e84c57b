package grpcopts

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/client/ternpb"
)

// FuzzAppendRequest decodes arbitrary AppendStreamRequests with the codec,
// in up to four frames. It must decode what proto.Unmarshal decodes into
// the generated message (the fields the server uses), or fail where that
// fails; the entries must not alias the frames, which gRPC reuses. What
// decodes is then queued again through an AppendQueue whose bodies hold a
// few batches each, and every request the codec encodes from them must
// decode, with proto.Unmarshal, to the same batches in the same order.
func FuzzAppendRequest(f *testing.F) {
	for _, m := range []*ternpb.AppendStreamRequest{
		{Log: "orders", Epoch: 7, Shared: true, Producer: 99, Acked: 3, Batches: []*ternpb.Batch{
			{Seq: 4, IfEnd: proto.Uint64(12), Entries: []*ternpb.Entry{{Payload: []byte("z")}}},
			{Entries: []*ternpb.Entry{{Payload: []byte("a")}, {Payload: []byte("bc"), TimeUnixNano: -5}}},
			{Entries: []*ternpb.Entry{{Properties: map[string][]byte{"k": []byte("v"), "": nil}}}},
		}},
		{Log: "x", Batches: []*ternpb.Batch{{}, {Entries: []*ternpb.Entry{{Offset: 9, Payload: bytes.Repeat([]byte{1}, 300)}}}}},
		// A Batch message of 126 bytes, whose length takes a byte less
		// to write than its field's size (128).
		{Log: "x", Batches: []*ternpb.Batch{{Entries: []*ternpb.Entry{{Payload: bytes.Repeat([]byte{2}, 122)}}}}},
		{},
	} {
		b := marshalSeed(f, m)
		f.Add(b, uint8(0))
		f.Add(b, uint8(2))
	}
	f.Add(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 42), uint8(1))
	f.Add(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 42), uint8(0)) // log of another wire type
	f.Add(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff"), uint8(0))
	f.Fuzz(func(t *testing.T, wire []byte, parts uint8) {
		want, got := new(ternpb.AppendStreamRequest), new(DecodedAppend)
		if !decodeLikeProto(t, wire, parts, got, want) {
			return
		}
		if g, w := describe(got.Log, got.Epoch, decodedBatches(got)), describe(want.Log, want.Epoch, protoBatches(want)); g != w {
			t.Fatalf("codec decoded\n%s\nproto.Unmarshal decoded\n%s", g, w)
		}
		if got.Shared != want.Shared || got.Producer != want.Producer || got.Acked != want.Acked {
			t.Fatalf("codec decoded shared %v producer %d acked %d, proto.Unmarshal %v %d %d", got.Shared, got.Producer, got.Acked, want.Shared, want.Producer, want.Acked)
		}
		for i, pb := range want.Batches {
			if h := got.Headers[i]; pb.Seq != h.Seq || (pb.IfEnd != nil) != h.IfEnd || pb.GetIfEnd() != h.End {
				t.Fatalf("batch %d: codec decoded %+v, proto.Unmarshal seq %d if_end %v", i, h, pb.Seq, pb.IfEnd)
			}
		}

		again := &EncodedAppend{Log: got.Log, Epoch: got.Epoch, Shared: got.Shared, Producer: got.Producer, Acked: got.Acked}
		for i, es := range decodedBatches(got) {
			h := got.Headers[i]
			again.Batches = append(again.Batches, EncodeBatch(es, BatchSize(es, h), h))
		}
		enc, err := (codec{}).Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		back := new(ternpb.AppendStreamRequest)
		if err := proto.Unmarshal(enc.Materialize(), back); err != nil {
			t.Fatalf("a request the codec encoded does not decode: %v", err)
		}
		if back.Log != got.Log || back.Epoch != got.Epoch || back.Shared != got.Shared || back.Producer != got.Producer || back.Acked != got.Acked {
			t.Fatalf("encoded %v, want %+v", back, got)
		}
		if g, w := describe("", 0, protoBatches(back)), describe("", 0, decodedBatches(got)); g != w {
			t.Fatalf("encoded again:\n%s\nwant\n%s", g, w)
		}
		for i, pb := range back.Batches {
			if h := got.Headers[i]; pb.Seq != h.Seq || (pb.IfEnd != nil) != h.IfEnd || pb.GetIfEnd() != h.End {
				t.Fatalf("batch %d encoded again: seq %d if_end %v, want %+v", i, pb.Seq, pb.IfEnd, h)
			}
		}
		for _, b := range again.Batches {
			ReleaseBatch(b)
		}
		got.Release()
	})
}

// decodedBatches splits r's entries into its batches.
func decodedBatches(r *DecodedAppend) [][]Entry {
	var bs [][]Entry
	start := 0
	for _, end := range r.Ends {
		bs = append(bs, r.Entries[start:end])
		start = end
	}
	return bs
}

func protoBatches(r *ternpb.AppendStreamRequest) [][]Entry {
	var bs [][]Entry
	for _, b := range r.Batches {
		es := []Entry{}
		for _, e := range b.Entries {
			es = append(es, Entry{Payload: e.Payload, Properties: e.Properties, UnixNano: e.TimeUnixNano})
		}
		bs = append(bs, es)
	}
	return bs
}

// describe prints a request's fields that the server uses, with nil and
// empty alike, as proto3 has them.
func describe(log string, epoch uint64, bs [][]Entry) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "log %q epoch %d, %d batches\n", log, epoch, len(bs))
	for i, es := range bs {
		fmt.Fprintf(&b, "batch %d:", i)
		for _, e := range es {
			fmt.Fprintf(&b, " [%x t=%d", e.Payload, e.UnixNano)
			for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
				fmt.Fprintf(&b, " %q=%x", k, e.Properties[k])
			}
			b.WriteString("]")
		}
		b.WriteString("\n")
	}
	return b.String()
}
