package grpcopts

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
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
