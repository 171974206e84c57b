package grpcopts

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/client/ternpb"
)

// FuzzReadResponse decodes arbitrary ReadResponses with the codec, in up to
// four frames, into a DecodedRead that held an earlier response. It must
// decode what proto.Unmarshal decodes, or fail where that fails, and
// nothing it decodes may alias the frames (gRPC reuses them; a reader's
// entries are the caller's). The entries are then encoded again with an
// EncodedRead, and proto.Unmarshal must read the same entries back.
func FuzzReadResponse(f *testing.F) {
	for _, m := range []*ternpb.ReadResponse{
		{Entries: []*ternpb.Entry{
			{Offset: 7, Payload: []byte("payload"), TimeUnixNano: 1700000000000000000},
			{Offset: 8, Payload: []byte("p2"), Properties: map[string][]byte{"k": []byte("v"), "trace": nil}, TimeUnixNano: -1},
			{Offset: 1 << 40},
		}},
		{Tick: &ternpb.TimeTick{Time: 99, Offset: 9}},
		{Entries: []*ternpb.Entry{{Offset: 1}}, Tick: &ternpb.TimeTick{}},
		{},
	} {
		b := marshalSeed(f, m)
		f.Add(b, uint8(0))
		f.Add(b, uint8(2))
	}
	// A tick given twice is merged.
	twice := protowire.AppendTag(nil, fieldReadTick, protowire.BytesType)
	twice = protowire.AppendBytes(twice, protowire.AppendVarint(protowire.AppendTag(nil, fieldTickTime, protowire.VarintType), 4))
	twice = protowire.AppendTag(twice, fieldReadTick, protowire.BytesType)
	twice = protowire.AppendBytes(twice, protowire.AppendVarint(protowire.AppendTag(nil, fieldTickOffset, protowire.VarintType), 5))
	f.Add(twice, uint8(1))
	f.Fuzz(func(t *testing.T, wire []byte, parts uint8) {
		want := new(ternpb.ReadResponse)
		got := &DecodedRead{Entries: []ReadEntry{{Offset: 3}}, HasTick: true, Tick: ReadTick{Time: 1, Offset: 2}}
		if !decodeLikeProto(t, wire, parts, got, want) {
			return
		}
		if len(got.Entries) != len(want.Entries) {
			t.Fatalf("codec decoded %d entries, proto.Unmarshal %d", len(got.Entries), len(want.Entries))
		}
		for i, e := range got.Entries {
			w := want.Entries[i]
			if e.Offset != w.Offset || !bytes.Equal(e.Payload, w.Payload) || e.UnixNano != w.TimeUnixNano || len(e.Properties) != len(w.Properties) {
				t.Fatalf("entry %d: codec decoded %+v, proto.Unmarshal %v", i, e, w)
			}
			for k, v := range w.Properties {
				if gv, ok := e.Properties[k]; !ok || !bytes.Equal(gv, v) {
					t.Fatalf("entry %d, property %q: codec decoded %q, proto.Unmarshal %q", i, k, gv, v)
				}
			}
		}
		if got.HasTick != (want.Tick != nil) || got.Tick.Time != want.Tick.GetTime() || got.Tick.Offset != want.Tick.GetOffset() {
			t.Fatalf("tick: codec decoded %v %+v, proto.Unmarshal %v", got.HasTick, got.Tick, want.Tick)
		}
		// The entries encoded again, as a server sends them, read back
		// through proto.Unmarshal.
		b, err := (codec{}).Marshal(&EncodedRead{Entries: got.Entries})
		if err != nil {
			t.Fatal(err)
		}
		back := new(ternpb.ReadResponse)
		if err := proto.Unmarshal(b.Materialize(), back); err != nil {
			t.Fatalf("an encoded response does not decode: %v", err)
		}
		b.Free()
		if len(back.Entries) != len(got.Entries) || back.Tick != nil {
			t.Fatalf("encoded %d entries, decoded %d and tick %v", len(got.Entries), len(back.Entries), back.Tick)
		}
		for i, e := range got.Entries {
			w := back.Entries[i]
			if e.Offset != w.Offset || !bytes.Equal(e.Payload, w.Payload) || e.UnixNano != w.TimeUnixNano || len(e.Properties) != len(w.Properties) {
				t.Fatalf("entry %d encoded as %+v, decodes as %v", i, e, w)
			}
			for k, v := range e.Properties {
				if wv, ok := w.Properties[k]; !ok || !bytes.Equal(wv, v) {
					t.Fatalf("entry %d, property %q encoded as %q, decodes as %q", i, k, v, wv)
				}
			}
		}
	})
}
