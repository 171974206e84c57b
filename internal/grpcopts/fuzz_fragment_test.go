package grpcopts

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/api/ternpb"
)

// FuzzUnmarshalAdd decodes arbitrary add requests with the codec, in up to
// four frames. With big, the input is the body of a fragment that a data
// field of aliasBytes precedes, so that the request takes the aliasing path
// (unmarshalAdd, parseFragment) with the input's fields deciding the rest.
// The codec must decode exactly what proto.Unmarshal decodes, or fail where
// it fails; the result must not alias the frames, which gRPC reuses; and what
// decodes must encode, through the codec, to bytes that decode back to it.
func FuzzUnmarshalAdd(f *testing.F) {
	for _, m := range []*ternpb.ReplicaAddRequest{
		addRequest(0, 10),
		addRequest(3, 100),
		{Kind: &ternpb.ReplicaAddRequest_Open{Open: &ternpb.ReplicaAddOpen{Segment: &ternpb.ReplicaSegment{Log: 1, Seq: 2}, Epoch: 3}}},
		{},
	} {
		b := marshalSeed(f, m)
		f.Add(b, false, uint8(0))
		f.Add(b, false, uint8(2))
	}
	for _, m := range []*ternpb.ReplicaFragment{{N: 7, Data: []byte("tail")}, {N: 1 << 40}, {}} {
		b := marshalSeed(f, m)
		f.Add(b, true, uint8(0))
		f.Add(b, true, uint8(3))
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 42)
	f.Add(unknown, true, uint8(1))
	f.Add(unknown, false, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, big bool, parts uint8) {
		wire := b
		if big {
			inner := protowire.AppendTag(nil, 2, protowire.BytesType) // ReplicaFragment.data
			inner = protowire.AppendBytes(inner, make([]byte, aliasBytes))
			inner = append(inner, b...)
			wire = protowire.AppendTag(nil, 2, protowire.BytesType) // ReplicaAddRequest.fragment
			wire = protowire.AppendBytes(wire, inner)
		}
		want, got := new(ternpb.ReplicaAddRequest), new(ternpb.ReplicaAddRequest)
		decoded := decodeLikeProto(t, wire, parts, got, want)
		if frag := parseFragment(wire); frag != nil {
			parsed := &ternpb.ReplicaAddRequest{Kind: &ternpb.ReplicaAddRequest_Fragment{Fragment: frag}}
			if !decoded || !proto.Equal(parsed, want) {
				t.Fatalf("parseFragment decoded fragment %d of %d bytes; proto.Unmarshal gives %v (decoded: %v)", frag.N, len(frag.Data), want, decoded)
			}
		}
		if !decoded {
			return
		}
		if !proto.Equal(got, want) {
			t.Fatalf("codec decoded a message other than proto.Unmarshal's (or one aliasing the frames)")
		}

		enc, err := (codec{}).Marshal(got)
		if err != nil {
			t.Fatalf("Marshal of a decoded request: %v", err)
		}
		back := new(ternpb.ReplicaAddRequest)
		if err := proto.Unmarshal(enc.Materialize(), back); err != nil || !proto.Equal(back, want) {
			t.Fatalf("the codec's encoding of a decoded request decodes to %v, %v", back, err)
		}
	})
}
