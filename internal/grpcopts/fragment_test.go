package grpcopts

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/api/ternpb"
)

// split cuts wire into parts buffers, as frames arrive.
func split(wire []byte, parts int) mem.BufferSlice {
	var data mem.BufferSlice
	step := (len(wire) + parts - 1) / parts
	for i := 0; i < len(wire); i += step {
		data = append(data, mem.SliceBuffer(bytes.Clone(wire[i:min(i+step, len(wire))])))
	}
	return data
}

// decodeLikeProto decodes wire with the codec into got, from parts frames,
// and with proto.Unmarshal into want. It fails t unless both decode or both
// fail, and reports whether they decoded. It then clears the frames, as gRPC
// reuses them, so that what got aliases of them no longer matches want.
func decodeLikeProto(t *testing.T, wire []byte, parts uint8, got any, want proto.Message) bool {
	t.Helper()
	werr := proto.Unmarshal(wire, want)
	data := split(bytes.Clone(wire), int(parts%4)+1)
	err := (codec{}).Unmarshal(data, got)
	if (err == nil) != (werr == nil) {
		t.Fatalf("codec error %v, proto.Unmarshal error %v", err, werr)
	}
	if err != nil {
		return false
	}
	for _, d := range data {
		clear(d.ReadOnlyData())
	}
	return true
}

// marshalSeed is m's encoding, for a fuzz target's seed corpus.
func marshalSeed(f *testing.F, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func addRequest(n uint64, size int) *ternpb.ReplicaAddRequest {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + int(n))
	}
	return &ternpb.ReplicaAddRequest{Kind: &ternpb.ReplicaAddRequest_Fragment{Fragment: &ternpb.ReplicaFragment{N: n, Data: data}}}
}

// A fragment is encoded to the bytes proto gives, and decoded to the same
// message, with its data in a buffer of its own.
func TestFragmentWire(t *testing.T) {
	for _, n := range []uint64{0, 3, 1 << 40} {
		for _, size := range []int{10, aliasBytes - 1, aliasBytes, 1<<20 + 5} {
			in := addRequest(n, size)
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := codec{}.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			if got := enc.Materialize(); !bytes.Equal(got, want) {
				t.Fatalf("n %d, %d bytes: encoded %d bytes unlike proto's %d", n, size, len(got), len(want))
			}
			for _, parts := range []int{1, 3} {
				data := split(want, parts)
				out := new(ternpb.ReplicaAddRequest)
				if err := (codec{}).Unmarshal(data, out); err != nil {
					t.Fatal(err)
				}
				for _, b := range data {
					clear(b.ReadOnlyData()) // gRPC reuses them
				}
				if !proto.Equal(in, out) {
					t.Errorf("n %d, %d bytes in %d parts: decoded a different message", n, size, parts)
				}
			}
		}
	}
}

// A large request that is not a lone fragment is decoded as proto does.
func TestFragmentWireOthers(t *testing.T) {
	in := addRequest(5, 1<<20)
	wire, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 42)
	for name, b := range map[string][]byte{
		"unknown field after":   append(bytes.Clone(wire), unknown...),
		"unknown field before":  append(bytes.Clone(unknown), wire...),
		"fragment given twice":  append(bytes.Clone(wire), wire...),
		"unknown in a fragment": append(protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.BytesType), uint64(len(wire)-4+len(unknown))), append(bytes.Clone(wire[4:]), unknown...)...),
	} {
		want := new(ternpb.ReplicaAddRequest)
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := new(ternpb.ReplicaAddRequest)
		if err := (codec{}).Unmarshal(split(b, 2), got); err != nil || !proto.Equal(got, want) {
			t.Errorf("%s: decoded fragment %d, %v; proto gives %d", name, got.GetFragment().GetN(), err, want.GetFragment().GetN())
		}
	}
	if err := (codec{}).Unmarshal(split(wire[:len(wire)-1], 2), new(ternpb.ReplicaAddRequest)); err == nil {
		t.Error("a request cut short was decoded")
	}
}
