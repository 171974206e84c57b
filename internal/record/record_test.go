package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ternwal/tern/internal/record"
)

// decodeAll decodes p, walks every entry and checks the offsets run from the
// base offset up by one.
func decodeAll(t testing.TB, p []byte) (record.Header, []record.Entry) {
	t.Helper()
	b, err := record.Decode(p)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	var got []record.Entry
	err = b.Each(func(off uint64, e record.Entry) error {
		if want := b.BaseOffset + uint64(len(got)); off != want {
			t.Fatalf("entry %d has offset %d, want %d", len(got), off, want)
		}
		got = append(got, e)
		return nil
	})
	if err != nil {
		t.Fatalf("Each: %v", err)
	}
	return b.Header, got
}

// diffEntries describes the first difference between got and want, or returns
// "". Payloads compare by content (nil and empty are equal); an entry without
// properties must decode to a nil map.
func diffEntries(got, want []record.Entry) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Time != w.Time {
			return fmt.Sprintf("entry %d: time %d, want %d", i, g.Time, w.Time)
		}
		if !bytes.Equal(g.Payload, w.Payload) {
			return fmt.Sprintf("entry %d: payload %q, want %q", i, trim(g.Payload), trim(w.Payload))
		}
		if len(w.Properties) == 0 && g.Properties != nil {
			return fmt.Sprintf("entry %d: properties %v, want nil", i, g.Properties)
		}
		if len(g.Properties) != len(w.Properties) {
			return fmt.Sprintf("entry %d: %d properties, want %d", i, len(g.Properties), len(w.Properties))
		}
		for k, wv := range w.Properties {
			gv, ok := g.Properties[k]
			if !ok {
				return fmt.Sprintf("entry %d: property %q missing", i, k)
			}
			if !bytes.Equal(gv, wv) {
				return fmt.Sprintf("entry %d: property %q = %q, want %q", i, k, trim(gv), trim(wv))
			}
		}
	}
	return ""
}

func trim(p []byte) []byte {
	if len(p) > 32 {
		return p[:32]
	}
	return p
}

func checkRoundTrip(t *testing.T, base, epoch uint64, entries []record.Entry) {
	t.Helper()
	p := record.Encode(base, epoch, entries)
	h, got := decodeAll(t, p)
	if d := diffEntries(got, entries); d != "" {
		t.Fatal(d)
	}
	want := record.Header{
		Length:     uint32(len(p)),
		CRC:        crc32.Checksum(p[16:], crc32.MakeTable(crc32.Castagnoli)),
		BaseOffset: base,
		Epoch:      epoch,
		FirstTime:  entries[0].Time,
		Count:      uint32(len(entries)),
		BodyBytes:  uint32(len(p) - record.HeaderBytes),
	}
	if h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	if got, want := h.NextOffset(), base+uint64(len(entries)); got != want {
		t.Fatalf("NextOffset %d, want %d", got, want)
	}
	ph, err := record.ParseHeader(p)
	if err != nil || ph != h {
		t.Fatalf("ParseHeader = %+v, %v; want %+v", ph, err, h)
	}
	bound := record.HeaderBytes
	for _, e := range entries {
		bound += record.EncodedBytes(e)
	}
	if len(p) > bound {
		t.Fatalf("batch is %d bytes, EncodedBytes bounds it by %d", len(p), bound)
	}
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*31) + seed
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	manyKeys := make(map[string][]byte)
	for i := range 300 {
		manyKeys[fmt.Sprintf("key-%03d", 299-i)] = []byte(fmt.Sprint(i))
	}
	var many []record.Entry
	for i := range 10_000 {
		e := record.Entry{Time: 1_700_000_000_000_000_000 + int64(i%97)*1_000 - 50_000, Payload: pattern(i%300, byte(i))}
		if i%7 == 0 {
			e.Properties = map[string][]byte{"i": []byte(fmt.Sprint(i)), "mod": {byte(i % 5)}}
		}
		many = append(many, e)
	}
	tests := []struct {
		name    string
		base    uint64
		epoch   uint64
		entries []record.Entry
	}{
		{"one empty entry", 0, 0, []record.Entry{{}}},
		{"nil and empty payloads", 5, 1, []record.Entry{{Time: 1}, {Time: 2, Payload: []byte{}}, {Time: 3}}},
		{"payload at varint boundaries", 10, 2, []record.Entry{
			{Payload: pattern(127, 1)}, {Payload: pattern(128, 2)}, {Payload: pattern(16383, 3)}, {Payload: pattern(16384, 4)},
		}},
		{"large payload", 1 << 40, 7, []record.Entry{{Time: 42, Payload: pattern(4<<20, 9)}, {Time: 43, Payload: []byte("small")}}},
		{"properties", 100, 3, []record.Entry{
			{Time: 1, Payload: []byte("a"), Properties: map[string][]byte{"content-type": []byte("text/plain"), "trace": []byte("abc")}},
			{Time: 2, Payload: []byte("b")},
			{Time: 3, Properties: map[string][]byte{"empty": {}, "nil": nil}},
			{Time: 4, Properties: map[string][]byte{"": []byte("empty key")}},
			{Time: 5, Properties: map[string][]byte{}},
			{Time: 6, Properties: map[string][]byte{"big": pattern(70_000, 5), "z": {0}, "\xff": {1}, "\x00": {2}}},
		}},
		{"many keys", 0, 0, []record.Entry{{Payload: []byte("x"), Properties: manyKeys}}},
		{"times before and after the first", 9, 9, []record.Entry{
			{Time: 1_000}, {Time: 999}, {Time: 1_001}, {Time: -5_000_000_000}, {Time: 1 << 50}, {Time: 0}, {Time: 1_000},
		}},
		{"extreme times", math.MaxUint64 - 4, math.MaxUint64, []record.Entry{ // NextOffset is MaxUint64
			{Time: math.MinInt64}, {Time: math.MaxInt64}, {Time: 0}, {Time: math.MinInt64 + 1},
		}},
		{"first time negative", 1, 1, []record.Entry{{Time: -1}, {Time: math.MaxInt64}, {Time: math.MinInt64}}},
		{"many entries", 1 << 20, 12, many},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRoundTrip(t, tt.base, tt.epoch, tt.entries)
		})
	}
}

// golden is a batch written out by hand from the layout in doc.go.
func golden() []byte {
	entries := []byte{
		// entry 0: time delta 0, payload "hi", no properties
		0x00,
		0x02, 'h', 'i',
		0x00,
		// entry 1: time delta -100 (zig-zag 199), empty payload,
		// properties {"a": "", "bc": "2"} in key order
		0xc7, 0x01,
		0x00,
		0x02,
		0x01, 'a', 0x00,
		0x02, 'b', 'c', 0x01, '2',
		// entry 2: time delta +300 (zig-zag 600), payload "x", no properties
		0xd8, 0x04,
		0x01, 'x',
		0x00,
	}
	length := 48 + len(entries)
	p := []byte{
		'T', 'R', 'N', 'B', // magic
		1,          // version
		0,          // flags
		0x00, 0x00, // reserved
		byte(length), 0x00, 0x00, 0x00, // length
		0x00, 0x00, 0x00, 0x00, // crc, filled in below
		0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // base offset 1<<56 + 7
		0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // epoch 3
		0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // first time 1000
		0x03, 0x00, 0x00, 0x00, // count 3
		0x00, 0x00, 0x00, 0x00, // reserved
	}
	p = append(p, entries...)
	crc := crc32.Checksum(p[16:], crc32.MakeTable(crc32.Castagnoli))
	p[12], p[13], p[14], p[15] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
	return p
}

var goldenEntries = []record.Entry{
	{Time: 1000, Payload: []byte("hi")},
	{Time: 900, Properties: map[string][]byte{"bc": []byte("2"), "a": {}}},
	{Time: 1300, Payload: []byte("x")},
}

const goldenBase, goldenEpoch = 1<<56 + 7, 3

// TestGolden pins the wire format: if it fails, the bytes on disk changed.
func TestGolden(t *testing.T) {
	want := golden()
	got := record.Encode(goldenBase, goldenEpoch, goldenEntries)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding changed\n got %x\nwant %x", got, want)
	}
	h, entries := decodeAll(t, want)
	if d := diffEntries(entries, goldenEntries); d != "" {
		t.Fatal(d)
	}
	wantHeader := record.Header{
		Length:     uint32(len(want)),
		CRC:        binary.LittleEndian.Uint32(want[12:]),
		BaseOffset: goldenBase,
		Epoch:      goldenEpoch,
		FirstTime:  1000,
		Count:      3,
		BodyBytes:  uint32(len(want) - record.HeaderBytes),
	}
	if h != wantHeader {
		t.Fatalf("header %+v, want %+v", h, wantHeader)
	}
	if record.HeaderBytes != 48 || record.Version != 1 {
		t.Fatalf("HeaderBytes = %d, Version = %d; doc.go says 48 and 1", record.HeaderBytes, record.Version)
	}
}

// TestSumOnCopy checks what objlog relies on when it sums a batch in the
// fragment it copied the batch into: a batch finished unsummed is refused,
// and PutCRC on a copy of it gives the golden batch.
func TestSumOnCopy(t *testing.T) {
	var b record.Builder
	for _, e := range goldenEntries {
		b.Add(e)
	}
	unsummed := b.FinishUnsummed(goldenBase, goldenEpoch)
	if _, err := record.Decode(unsummed); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Decode of an unsummed batch: %v, want ErrCorrupt", err)
	}
	fragment := append([]byte("before"), unsummed...)
	if got := record.PutCRC(fragment[len("before"):]); !bytes.Equal(got, golden()) {
		t.Fatalf("summed copy\n got %x\nwant %x", got, golden())
	}
	if got := b.Finish(goldenBase, goldenEpoch); !bytes.Equal(got, golden()) {
		t.Fatalf("Finish after FinishUnsummed\n got %x\nwant %x", got, golden())
	}
}

// fixCRC rewrites the CRC of the batch in p after a test changed its bytes.
func fixCRC(p []byte) []byte {
	n := binary.LittleEndian.Uint32(p[8:])
	binary.LittleEndian.PutUint32(p[12:], crc32.Checksum(p[16:n], crc32.MakeTable(crc32.Castagnoli)))
	return p
}

// splice replaces p[i:j] with repl and fixes the batch's length and CRC.
func splice(p []byte, i, j int, repl ...byte) []byte {
	p = append(p[:i:i], append(repl, p[j:]...)...)
	binary.LittleEndian.PutUint32(p[8:], uint32(len(p)))
	return fixCRC(p)
}

func isDecodeError(err error) bool {
	return errors.Is(err, record.ErrCorrupt) || errors.Is(err, io.ErrUnexpectedEOF)
}

// TestSplice checks the helper the corruption cases rely on.
func TestSplice(t *testing.T) {
	p := golden()
	if got := splice(golden(), 57, 65, p[57:65]...); !bytes.Equal(got, p) {
		t.Fatalf("splice of the same bytes\n got %x\nwant %x", got, p)
	}
	p = splice(golden(), 57, 65, 0x01, 'a', 0x00, 0x01, 'b', 0x01, '2')
	want := slices.Clone(goldenEntries)
	want[1].Properties = map[string][]byte{"a": {}, "b": []byte("2")}
	if _, got := decodeAll(t, p); diffEntries(got, want) != "" {
		t.Fatal(diffEntries(got, want))
	}
}

func TestBitFlips(t *testing.T) {
	batches := map[string][]byte{
		"golden": golden(),
		"one entry": record.Encode(0, 0, []record.Entry{{Time: -7, Payload: []byte("p"),
			Properties: map[string][]byte{"k": []byte("v")}}}),
	}
	for name, orig := range batches {
		t.Run(name, func(t *testing.T) {
			p := bytes.Clone(orig)
			for i := range len(p) * 8 {
				p[i/8] ^= 1 << (i % 8)
				b, err := record.Decode(p)
				if !isDecodeError(err) {
					t.Errorf("flip of bit %d of byte %d: Decode = %+v, %v; want ErrCorrupt or ErrUnexpectedEOF", i%8, i/8, b.Header, err)
				}
				p[i/8] ^= 1 << (i % 8)
			}
			if !bytes.Equal(p, orig) {
				t.Fatal("test did not restore the batch")
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	p := golden()
	for n := range len(p) {
		_, err := record.Decode(p[:n])
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Decode of the first %d of %d bytes: %v, want io.ErrUnexpectedEOF", n, len(p), err)
		}
	}
	for n := range record.HeaderBytes {
		if _, err := record.ParseHeader(p[:n]); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("ParseHeader of %d bytes: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
}

func TestTrailingBytes(t *testing.T) {
	next := record.Encode(50, 1, []record.Entry{{Payload: []byte("next batch")}})
	for name, tail := range map[string][]byte{
		"zeros":      make([]byte, 100),
		"garbage":    []byte("garbage"),
		"next batch": next,
	} {
		t.Run(name, func(t *testing.T) {
			p := append(golden(), tail...)
			h, entries := decodeAll(t, p)
			if int(h.Length) != len(golden()) {
				t.Fatalf("Length %d, want %d", h.Length, len(golden()))
			}
			if d := diffEntries(entries, goldenEntries); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestCorrupt(t *testing.T) {
	// Every case but "crc" fixes the CRC after its change, so that the check
	// under test, not the CRC, must catch it.
	tests := []struct {
		name   string
		change func(p []byte) []byte
	}{
		{"magic", func(p []byte) []byte { p[3] = 'C'; return p }},
		{"version 0", func(p []byte) []byte { p[4] = 0; return p }},
		{"version 2", func(p []byte) []byte { p[4] = 2; return p }},
		{"codec", func(p []byte) []byte { p[5] = 1; return p }},
		{"flags bit 7", func(p []byte) []byte { p[5] = 0x80; return p }},
		{"reserved at 6", func(p []byte) []byte { p[6] = 1; return p }},
		{"reserved at 7", func(p []byte) []byte { p[7] = 0x80; return p }},
		{"reserved at 44", func(p []byte) []byte { p[44] = 1; return fixCRC(p) }},
		{"reserved at 47", func(p []byte) []byte { p[47] = 0x80; return fixCRC(p) }},
		{"crc", func(p []byte) []byte { p[12]++; return p }},
		{"count 0", func(p []byte) []byte { binary.LittleEndian.PutUint32(p[40:], 0); return fixCRC(p) }},
		{"count too high", func(p []byte) []byte { binary.LittleEndian.PutUint32(p[40:], 4); return fixCRC(p) }},
		{"count too low", func(p []byte) []byte { binary.LittleEndian.PutUint32(p[40:], 2); return fixCRC(p) }},
		{"count beyond length", func(p []byte) []byte { binary.LittleEndian.PutUint32(p[40:], 1000); return fixCRC(p) }},
		{"length below header", func(p []byte) []byte { binary.LittleEndian.PutUint32(p[8:], 47); return p }},
		{"length 0", func(p []byte) []byte { binary.LittleEndian.PutUint32(p[8:], 0); return p }},
		{"length short of entries", func(p []byte) []byte {
			binary.LittleEndian.PutUint32(p[8:], uint32(len(p)-1))
			return fixCRC(p)
		}},
		{"bytes after the last entry", func(p []byte) []byte {
			p = append(p, 0)
			binary.LittleEndian.PutUint32(p[8:], uint32(len(p)))
			return fixCRC(p)
		}},
		{"offsets overflow", func(p []byte) []byte {
			binary.LittleEndian.PutUint64(p[16:], math.MaxUint64-1)
			return fixCRC(p)
		}},
		{"payload length past the end", func(p []byte) []byte { p[49] = 0x7f; return fixCRC(p) }},
		{"payload length overflows", func(p []byte) []byte {
			// entry 0 is 00 02 'h' 'i' 00: make the payload length a
			// ten-byte varint that overflows uint64.
			p = append(p[:49:49], append(bytes.Repeat([]byte{0xff}, 10), p[49:]...)...)
			binary.LittleEndian.PutUint32(p[8:], uint32(len(p)))
			return fixCRC(p)
		}},
		{"property count past the end", func(p []byte) []byte { p[56] = 0x7f; return fixCRC(p) }},

		// Encodings that would decode to the golden entries, or to entries
		// that encode differently: the format has one encoding per batch.
		{"first entry time delta", func(p []byte) []byte { p[48] = 0x02; return fixCRC(p) }},
		{"first entry time delta overlong", func(p []byte) []byte { return splice(p, 48, 49, 0x80, 0x00) }},
		{"time delta overlong", func(p []byte) []byte { return splice(p, 53, 55, 0xc7, 0x81, 0x00) }},
		{"payload length overlong", func(p []byte) []byte { return splice(p, 49, 50, 0x82, 0x00) }},
		{"no properties overlong", func(p []byte) []byte { return splice(p, 52, 53, 0x80, 0x00) }},
		{"property count overlong", func(p []byte) []byte { return splice(p, 56, 57, 0x82, 0x00) }},
		{"key length overlong", func(p []byte) []byte { return splice(p, 57, 58, 0x81, 0x00) }},
		{"value length overlong", func(p []byte) []byte { return splice(p, 63, 64, 0x81, 0x00) }},
		{"keys out of order", func(p []byte) []byte {
			return splice(p, 57, 65, 0x02, 'b', 'c', 0x01, '2', 0x01, 'a', 0x00)
		}},
		{"empty key last", func(p []byte) []byte {
			return splice(p, 57, 65, 0x01, 'a', 0x00, 0x00, 0x01, '2')
		}},
		{"key repeated", func(p []byte) []byte {
			return splice(p, 57, 65, 0x01, 'a', 0x00, 0x01, 'a', 0x01, '2')
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCorrupt(t, tt.change(golden()))
		})
	}
}

// wantCorrupt checks that p decodes as ErrCorrupt, with the package's
// prefix, and that no entry of it is returned.
func wantCorrupt(t *testing.T, p []byte) {
	t.Helper()
	called := false
	b, err := record.Decode(p)
	if err == nil {
		err = b.Each(func(uint64, record.Entry) error { called = true; return nil })
	}
	if !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Decode: %v, want ErrCorrupt", err)
	}
	if called {
		t.Fatal("Each returned an entry of a corrupt batch")
	}
	if !strings.HasPrefix(err.Error(), "record: ") {
		t.Errorf("error %q is not prefixed by the package", err)
	}
}

// TestParseHeaderIgnoresCRC checks that ParseHeader looks at the header only,
// so a reader can learn a batch's length before it has all of its bytes.
func TestParseHeaderIgnoresCRC(t *testing.T) {
	p := golden()
	p[12]++
	h, err := record.ParseHeader(p[:record.HeaderBytes])
	if err != nil {
		t.Fatal(err)
	}
	if h.Length != uint32(len(p)) || h.Count != 3 || h.NextOffset() != goldenBase+3 {
		t.Fatalf("header %+v", h)
	}
}

func TestEachStops(t *testing.T) {
	b, err := record.Decode(golden())
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	var offs []uint64
	err = b.Each(func(off uint64, e record.Entry) error {
		offs = append(offs, off)
		if len(offs) == 2 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Each = %v, want the callback's error", err)
	}
	if len(offs) != 2 || offs[0] != goldenBase || offs[1] != goldenBase+1 {
		t.Fatalf("offsets %v", offs)
	}
}

// TestEntriesDoNotOverlap checks that appending to a decoded payload or value
// cannot overwrite the bytes that follow it in the batch.
func TestEntriesDoNotOverlap(t *testing.T) {
	p := golden()
	b, err := record.Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Each(func(_ uint64, e record.Entry) error {
		_ = append(e.Payload, 0xee)
		for _, v := range e.Properties {
			_ = append(v, 0xee)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, golden()) {
		t.Fatal("appending to a decoded entry changed the batch")
	}
}

func TestBuilderReuse(t *testing.T) {
	var b record.Builder
	if b.Count() != 0 || b.Bytes() != record.HeaderBytes {
		t.Fatalf("zero Builder: Count %d, Bytes %d", b.Count(), b.Bytes())
	}
	first := []record.Entry{
		{Time: 5_000, Payload: pattern(1000, 1), Properties: map[string][]byte{"zz": pattern(100, 2), "a": {1}}},
		{Time: 4_000, Payload: pattern(500, 3)},
	}
	for _, e := range first {
		b.Add(e)
	}
	if b.Count() != 2 {
		t.Fatalf("Count %d, want 2", b.Count())
	}
	p := b.Finish(1, 1)
	if b.Bytes() != len(p) {
		t.Fatalf("Bytes %d, batch is %d bytes", b.Bytes(), len(p))
	}
	if !bytes.Equal(p, record.Encode(1, 1, first)) {
		t.Fatal("Builder and Encode disagree")
	}

	// A smaller batch after a bigger one must not keep any of its bytes, its
	// first time or its count.
	b.Reset()
	if b.Count() != 0 || b.Bytes() != record.HeaderBytes {
		t.Fatalf("after Reset: Count %d, Bytes %d", b.Count(), b.Bytes())
	}
	for _, e := range goldenEntries {
		b.Add(e)
	}
	if got := b.Finish(goldenBase, goldenEpoch); !bytes.Equal(got, golden()) {
		t.Fatalf("reused Builder\n got %x\nwant %x", got, golden())
	}
	// Finish may be called again, with other offsets.
	if got, want := b.Finish(9, 9), record.Encode(9, 9, goldenEntries); !bytes.Equal(got, want) {
		t.Fatalf("second Finish\n got %x\nwant %x", got, want)
	}
}

func TestBuilderCopiesEntries(t *testing.T) {
	payload := []byte("payload")
	value := []byte("value")
	var b record.Builder
	b.Add(record.Entry{Payload: payload, Properties: map[string][]byte{"k": value}})
	payload[0], value[0] = 'X', 'X'
	_, got := decodeAll(t, b.Finish(0, 0))
	want := []record.Entry{{Payload: []byte("payload"), Properties: map[string][]byte{"k": []byte("value")}}}
	if d := diffEntries(got, want); d != "" {
		t.Fatal(d)
	}
}

func TestFinishEmptyPanics(t *testing.T) {
	finishPanics := func(t *testing.T, b *record.Builder) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatal("Finish of an empty batch did not panic")
			}
		}()
		b.Finish(0, 0)
	}
	t.Run("zero Builder", func(t *testing.T) {
		var b record.Builder
		finishPanics(t, &b)
	})
	t.Run("after Reset", func(t *testing.T) {
		var b record.Builder
		b.Add(record.Entry{Payload: []byte("x")})
		b.Finish(0, 0)
		b.Reset()
		finishPanics(t, &b)
	})
	t.Run("Encode of no entries", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Fatal("Encode of no entries did not panic")
			}
		}()
		record.Encode(0, 0, nil)
	})
}
