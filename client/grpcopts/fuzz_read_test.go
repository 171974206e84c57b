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
		sameEntries(t, "codec decoded", got.Entries, "proto.Unmarshal", want.Entries)
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
		if back.Tick != nil {
			t.Fatalf("encoded no tick, decoded %v", back.Tick)
		}
		sameEntries(t, "encoded as", got.Entries, "decodes as", back.Entries)
	})
}

// sameEntries fails t unless got and want hold the same entries: offsets,
// payloads, times and properties. gotIs and wantIs name the two sides.
func sameEntries(t *testing.T, gotIs string, got []ReadEntry, wantIs string, want []*ternpb.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s %d entries, %s %d", gotIs, len(got), wantIs, len(want))
	}
	for i, e := range got {
		w := want[i]
		if e.Offset != w.Offset || !bytes.Equal(e.Payload, w.Payload) || e.UnixNano != w.TimeUnixNano || len(e.Properties) != len(w.Properties) {
			t.Fatalf("entry %d: %s %+v, %s %v", i, gotIs, e, wantIs, w)
		}
		for k, v := range w.Properties {
			if gv, ok := e.Properties[k]; !ok || !bytes.Equal(gv, v) {
				t.Fatalf("entry %d, property %q: %s %q, %s %q", i, k, gotIs, gv, wantIs, v)
			}
		}
	}
}
