package grpcopts

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/client/ternpb"
)

// FuzzAppendResponse decodes arbitrary AppendStreamResponses with the
// codec, in up to four frames, into a DecodedResults that held an earlier
// response. It must decode what proto.Unmarshal decodes, or fail where that
// fails, and nothing it decodes may alias the frames. The results are then
// encoded again with an EncodedResults, and proto.Unmarshal must read the
// same results back: offsets, and errors in full.
func FuzzAppendResponse(f *testing.F) {
	for _, m := range []*ternpb.AppendStreamResponse{
		{Results: []*ternpb.AppendResult{{Offset: 0}, {Offset: 1 << 40}, {Error: &ternpb.Error{Code: 9, Message: "fenced", Reason: "FENCED", Metadata: map[string]string{"epoch": "3"}}}}},
		{Results: []*ternpb.AppendResult{{Offset: 5, Error: &ternpb.Error{}}}},
		{},
	} {
		b := marshalSeed(f, m)
		f.Add(b, uint8(0))
		f.Add(b, uint8(2))
	}
	// An error given twice is merged.
	twice := protowire.AppendTag(nil, fieldResultError, protowire.BytesType)
	twice = protowire.AppendBytes(twice, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 4))
	twice = protowire.AppendTag(twice, fieldResultError, protowire.BytesType)
	twice = protowire.AppendBytes(twice, protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "m"))
	f.Add(protowire.AppendBytes(protowire.AppendTag(nil, fieldResponseResults, protowire.BytesType), twice), uint8(1))
	f.Fuzz(func(t *testing.T, wire []byte, parts uint8) {
		want := new(ternpb.AppendStreamResponse)
		got := &DecodedResults{Results: []Result{{Offset: 77}, {Err: &ternpb.Error{Code: 1}}}}
		if !decodeLikeProto(t, wire, parts, got, want) {
			return
		}
		if len(got.Results) != len(want.Results) {
			t.Fatalf("codec decoded %d results, proto.Unmarshal %d", len(got.Results), len(want.Results))
		}
		var enc EncodedResults
		for i, r := range got.Results {
			w := want.Results[i]
			if r.Offset != w.Offset || (r.Err == nil) != (w.Error == nil) || (r.Err != nil && !proto.Equal(r.Err, w.Error)) {
				t.Fatalf("result %d: codec decoded %d %v, proto.Unmarshal %d %v", i, r.Offset, r.Err, w.Offset, w.Error)
			}
			if r.Err != nil {
				enc.Error(r.Err)
			} else {
				enc.Offset(r.Offset)
			}
		}
		if enc.Len() != len(got.Results) {
			t.Fatalf("EncodedResults.Len %d after %d results", enc.Len(), len(got.Results))
		}
		b, err := (codec{}).Marshal(&enc)
		if err != nil {
			t.Fatal(err)
		}
		back := new(ternpb.AppendStreamResponse)
		if err := proto.Unmarshal(b.Materialize(), back); err != nil {
			t.Fatalf("an encoded response does not decode: %v", err)
		}
		if len(back.Results) != len(got.Results) {
			t.Fatalf("encoded %d results, decoded %d", len(got.Results), len(back.Results))
		}
		for i, r := range got.Results {
			w := back.Results[i]
			if r.Err != nil && !proto.Equal(w.Error, r.Err) || r.Err == nil && (w.Error != nil || w.Offset != r.Offset) {
				t.Fatalf("result %d encoded as %d %v, decodes as %d %v", i, r.Offset, r.Err, w.Offset, w.Error)
			}
		}
	})
}
