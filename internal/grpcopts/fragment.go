package grpcopts

import (
	"bytes"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/api/ternpb"
)

// The fragments of quorum logs, about a MiB each, are the largest messages
// between nodes, and the owner of a log sends each one to every remote
// replica. Through proto, every send copied the fragment into a new buffer,
// and every receive copied it twice: gathered from its HTTP/2 frames into
// one buffer, then out of that buffer by proto.Unmarshal. The functions
// here give the same bytes on the wire with one copy at each end, the one
// gRPC makes into its write buffer and the one that gathers the frames:
// the encoding is a short header followed by the caller's data, and the
// decoded data aliases the gathered buffer, which nothing else uses.

// aliasBytes is the smallest fragment sent and received this way; smaller
// ones take the codec's usual path.
const aliasBytes = 64 << 10

// marshalFragment encodes an add request that carries a fragment as a
// header and the fragment's data, not copied: the caller must not change
// the data while gRPC may still be sending it. It reports false for
// another request, which the caller encodes as usual.
func marshalFragment(r *ternpb.ReplicaAddRequest) (mem.BufferSlice, bool) {
	f := r.GetFragment()
	if f == nil || len(f.Data) < aliasBytes || len(r.ProtoReflect().GetUnknown()) > 0 || len(f.ProtoReflect().GetUnknown()) > 0 {
		return nil, false
	}
	inner := protowire.SizeTag(2) + protowire.SizeBytes(len(f.Data))
	if f.N != 0 {
		inner += protowire.SizeTag(1) + protowire.SizeVarint(f.N)
	}
	h := make([]byte, 0, 32)
	h = protowire.AppendTag(h, 2, protowire.BytesType) // ReplicaAddRequest.fragment
	h = protowire.AppendVarint(h, uint64(inner))
	if f.N != 0 { // proto3 leaves out a zero
		h = protowire.AppendTag(h, 1, protowire.VarintType) // ReplicaFragment.n
		h = protowire.AppendVarint(h, f.N)
	}
	h = protowire.AppendTag(h, 2, protowire.BytesType) // ReplicaFragment.data
	h = protowire.AppendVarint(h, uint64(len(f.Data)))
	return mem.BufferSlice{mem.SliceBuffer(h), mem.SliceBuffer(f.Data)}, true
}

// unmarshalAdd decodes an add request of at least aliasBytes from a buffer
// of its own, with a fragment's data aliasing that buffer. It reports false
// for a smaller one, which the caller decodes as usual.
func unmarshalAdd(data mem.BufferSlice, r *ternpb.ReplicaAddRequest) (bool, error) {
	if data.Len() < aliasBytes {
		return false, nil
	}
	parts := make([][]byte, len(data))
	for i, b := range data {
		parts[i] = b.ReadOnlyData()
	}
	b := bytes.Join(parts, nil) // a new buffer, not zeroed before the copy
	if f := parseFragment(b); f != nil {
		proto.Reset(r)
		r.Kind = &ternpb.ReplicaAddRequest_Fragment{Fragment: f}
		return true, nil
	}
	return true, proto.Unmarshal(b, r)
}

// parseFragment decodes b if it is an add request holding one fragment and
// nothing else, with the fragment's data aliasing b, and returns nil for
// anything else.
func parseFragment(b []byte) *ternpb.ReplicaFragment {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 2 || typ != protowire.BytesType {
		return nil
	}
	inner, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil
	}
	f := new(ternpb.ReplicaFragment)
	for len(inner) > 0 {
		num, typ, n := protowire.ConsumeTag(inner)
		if n < 0 {
			return nil
		}
		inner = inner[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			f.N, n = protowire.ConsumeVarint(inner)
		case num == 2 && typ == protowire.BytesType:
			f.Data, n = protowire.ConsumeBytes(inner)
		default:
			return nil
		}
		if n < 0 {
			return nil
		}
		inner = inner[n:]
	}
	return f
}
