package record_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/ternwal/tern/internal/record"
)

// goldenAppends is the golden batch's entries as three appends: two of
// producer 0x105 (the second a retry of an older sequence) and an
// anonymous one, written out by hand from the layout in doc.go.
func goldenAppends() []byte {
	p := golden()
	p[5] = record.FlagAppends
	p = append(p,
		// run: producer 0x105, two appends
		0x85, 0x02, 0x02,
		0x0e, 0x01, // sequence 0+7 (zig-zag 14), 1 entry
		0x01, 0x01, // sequence 7-1 (zig-zag 1), 1 entry
		// run: producer 0 (anonymous), one append
		0x00, 0x01,
		0x00, 0x01, // sequence 0, 1 entry
	)
	binary.LittleEndian.PutUint32(p[8:], uint32(len(p)))
	return fixCRC(p)
}

var goldenAppendList = []record.Append{
	{Producer: 0x105, Seq: 7, Count: 1},
	{Producer: 0x105, Seq: 6, Count: 1},
	{Producer: 0, Seq: 0, Count: 1},
}

// TestGoldenAppends pins the appends section's bytes.
func TestGoldenAppends(t *testing.T) {
	want := goldenAppends()
	got := record.EncodeAppends(goldenBase, goldenEpoch, goldenEntries, goldenAppendList)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding changed\n got %x\nwant %x", got, want)
	}
	var b record.Builder
	for i, e := range goldenEntries {
		a := goldenAppendList[i]
		if a.Producer != 0 {
			b.StartAppend(a.Producer, a.Seq)
		} else {
			b.StartAppend(0, 0)
		}
		b.Add(e)
	}
	if b.Bytes() != len(want) {
		t.Fatalf("Bytes %d, the batch has %d", b.Bytes(), len(want))
	}
	if got := b.Finish(goldenBase, goldenEpoch); !bytes.Equal(got, want) {
		t.Fatalf("Builder\n got %x\nwant %x", got, want)
	}
	h, entries := decodeAll(t, want)
	if d := diffEntries(entries, goldenEntries); d != "" {
		t.Fatal(d)
	}
	if h.Flags != record.FlagAppends {
		t.Fatalf("flags %#x, want %#x", h.Flags, record.FlagAppends)
	}
	batch, _ := record.Decode(want)
	if got := batch.Appends(nil); !slices.Equal(got, goldenAppendList) {
		t.Fatalf("Appends %+v, want %+v", got, goldenAppendList)
	}
	// Without a producer there is no section: the old bytes exactly.
	old, _ := record.Decode(golden())
	if got := old.Appends(nil); !slices.Equal(got, []record.Append{{Count: 3}}) {
		t.Fatalf("Appends of a batch without a section: %+v", got)
	}
	if got := record.EncodeAppends(goldenBase, goldenEpoch, goldenEntries, []record.Append{{Count: 1}, {Count: 2}}); !bytes.Equal(got, golden()) {
		t.Fatal("anonymous appends changed the bytes of a batch")
	}
}

func TestAppendsRoundTrip(t *testing.T) {
	entries := make([]record.Entry, 300)
	for i := range entries {
		entries[i] = record.Entry{Time: int64(i), Payload: pattern(i%50, byte(i))}
	}
	for name, as := range map[string][]record.Append{
		"one producer": {{Producer: 1, Seq: 1, Count: 300}},
		"many appends": repeatAppends(300, func(i int) record.Append { return record.Append{Producer: 9, Seq: uint64(i + 1), Count: 1} }),
		"interleaved": repeatAppends(300, func(i int) record.Append {
			return record.Append{Producer: uint64(i%3) * 1e15, Seq: uint64(i%3) * uint64(i+1), Count: 1}
		}),
		"extreme sequences": {{Producer: math.MaxUint64, Seq: math.MaxUint64, Count: 100}, {Producer: math.MaxUint64, Seq: 1, Count: 100}, {Producer: 1, Seq: math.MaxUint64, Count: 100}},
		"anonymous first":   {{Count: 299}, {Producer: 2, Seq: 5, Count: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			p := record.EncodeAppends(3, 4, entries, as)
			_, got := decodeAll(t, p)
			if d := diffEntries(got, entries); d != "" {
				t.Fatal(d)
			}
			b, _ := record.Decode(p)
			if got := b.Appends(nil); !slices.Equal(got, as) {
				t.Fatalf("Appends %+v, want %+v", got[:min(len(got), 5)], as[:min(len(as), 5)])
			}
		})
	}
}

func repeatAppends(n int, f func(int) record.Append) []record.Append {
	as := make([]record.Append, n)
	for i := range as {
		as[i] = f(i)
	}
	return as
}

// TestBuilderAppendsReuse checks that Reset forgets the appends, that a
// StartAppend with no entry leaves nothing, and that Finish twice gives
// the same section.
func TestBuilderAppendsReuse(t *testing.T) {
	var b record.Builder
	b.StartAppend(3, 3)
	b.Add(record.Entry{Payload: []byte("x")})
	b.Finish(0, 0)
	b.Reset()
	b.StartAppend(4, 4) // never gets an entry
	b.StartAppend(0, 0)
	for _, e := range goldenEntries {
		b.Add(e)
	}
	if got := b.Finish(goldenBase, goldenEpoch); !bytes.Equal(got, golden()) {
		t.Fatalf("after Reset\n got %x\nwant %x", got, golden())
	}
	b.Reset()
	for i, e := range goldenEntries {
		b.StartAppend(goldenAppendList[i].Producer, goldenAppendList[i].Seq)
		b.Add(e)
	}
	b.StartAppend(8, 8)
	b.Finish(1, 1)
	if got := b.Finish(goldenBase, goldenEpoch); !bytes.Equal(got, goldenAppends()) {
		t.Fatalf("second Finish\n got %x\nwant %x", got, goldenAppends())
	}
}

func TestAppendsCorrupt(t *testing.T) {
	const at = 48 + 22 // the section's first byte in goldenAppends
	if p := goldenAppends(); !bytes.Equal(p[at:at+3], []byte{0x85, 0x02, 0x02}) {
		t.Fatalf("the section does not start at %d: %x", at, p[at:])
	}
	tests := []struct {
		name   string
		change func(p []byte) []byte
	}{
		{"flag without a section", func([]byte) []byte {
			p := golden()
			p[5] = record.FlagAppends
			return fixCRC(p)
		}},
		{"section without the flag", func(p []byte) []byte { p[5] = 0; return fixCRC(p) }},
		{"flags bit 4", func(p []byte) []byte { p[5] |= 0x10; return fixCRC(p) }},
		{"counts too high", func(p []byte) []byte { p[at+4] = 2; return fixCRC(p) }},
		{"counts too low", func(p []byte) []byte { return splice(p, at+9, at+11) }},
		{"count 0", func(p []byte) []byte { p[at+10] = 0; return fixCRC(p) }},
		{"run length 0", func(p []byte) []byte { return splice(p, at+2, at+7, 0x00) }},
		{"run length past the end", func(p []byte) []byte { p[at+2] = 0x7f; return fixCRC(p) }},
		{"no producer", func(p []byte) []byte { return splice(p, at, at+11, 0x00, 0x03, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01) }},
		{"anonymous with a sequence", func(p []byte) []byte { p[at+9] = 0x02; return fixCRC(p) }},
		{"sequence 0 of a producer", func(p []byte) []byte { p[at+3] = 0x00; return fixCRC(p) }},
		{"producer repeats its run", func(p []byte) []byte {
			return splice(p, at, at+11, 0x05, 0x01, 0x0e, 0x01, 0x05, 0x02, 0x0c, 0x01, 0x02, 0x01)
		}},
		{"producer overlong", func(p []byte) []byte { return splice(p, at, at+2, 0x85, 0x82, 0x00) }},
		{"run length overlong", func(p []byte) []byte { return splice(p, at+2, at+3, 0x82, 0x00) }},
		{"sequence overlong", func(p []byte) []byte { return splice(p, at+3, at+4, 0x8e, 0x00) }},
		{"count overlong", func(p []byte) []byte { return splice(p, at+4, at+5, 0x81, 0x00) }},
		{"byte after the section", func(p []byte) []byte { return splice(p, len(p), len(p), 0x00) }},
		{"section cut short", func(p []byte) []byte { return splice(p, len(p)-1, len(p)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCorrupt(t, tt.change(goldenAppends()))
		})
	}
}

func TestAppendsBitFlips(t *testing.T) {
	p := goldenAppends()
	for i := range len(p) * 8 {
		p[i/8] ^= 1 << (i % 8)
		if _, err := record.Decode(p); !isDecodeError(err) {
			t.Errorf("flip of bit %d of byte %d: %v; want ErrCorrupt or ErrUnexpectedEOF", i%8, i/8, err)
		}
		p[i/8] ^= 1 << (i % 8)
	}
}
