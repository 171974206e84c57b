package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"testing"

	"github.com/ternwal/tern/internal/record"
)

func seedBatches() [][]byte {
	return [][]byte{
		golden(),
		record.Encode(0, 0, []record.Entry{{}}),
		record.Encode(1, 2, []record.Entry{
			{Time: 10, Payload: []byte("hello"), Properties: map[string][]byte{"a": {}, "b": []byte("v"), "c": {0, 1}}},
			{Time: -10, Payload: pattern(200, 1)},
			{Time: math.MaxInt64},
		}),
		record.Encode(math.MaxUint64-1, 7, []record.Entry{{Time: math.MinInt64, Payload: []byte{0}}}),
		goldenAppends(),
		record.EncodeAppends(1, 1, []record.Entry{{}, {}}, []record.Append{{Producer: 1 << 40, Seq: 1 << 50, Count: 1}, {Count: 1}}),
		encodeWith(record.Zstd, 3, 1, jsonEntries(10), []record.Append{{Producer: 2, Seq: 5, Count: 10}}),
		encodeWith(record.LZ4, 3, 1, jsonEntries(10), []record.Append{{Count: 10}}),
	}
}

// FuzzDecodeCompressed checks that Decode never panics on a compressed
// batch, allocates no more than MaxBodyBytes for it, and accepts only one
// that decompresses to the size it declares and round-trips. The fuzzer
// mutates the compressed bytes, the codec, the declared size and the
// count; the header around them gets a valid length and CRC, so that the
// mutations reach the decompressors.
func FuzzDecodeCompressed(f *testing.F) {
	for _, c := range codecs {
		for _, n := range []int{1, 10, 300} {
			p := encodeWith(c, 0, 0, jsonEntries(n), []record.Append{{Count: uint32(n)}})
			h, _ := record.ParseHeader(p)
			f.Add(p[record.HeaderBytes:], byte(c), h.BodyBytes, h.Count, h.Flags&record.FlagAppends != 0)
		}
	}
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd}, byte(record.Zstd), uint32(record.MaxBodyBytes), uint32(1), false)
	f.Fuzz(func(t *testing.T, body []byte, codec byte, declared, count uint32, appends bool) {
		p := make([]byte, record.HeaderBytes, record.HeaderBytes+len(body))
		binary.LittleEndian.PutUint32(p[0:], binary.LittleEndian.Uint32([]byte(record.Magic)))
		p[4] = record.VersionCompressed
		p[5] = codec % 8
		if appends {
			p[5] |= record.FlagAppends
		}
		binary.LittleEndian.PutUint32(p[40:], count)
		binary.LittleEndian.PutUint32(p[44:], declared)
		p = append(p, body...)
		binary.LittleEndian.PutUint32(p[8:], uint32(len(p)))
		checkDecode(t, fixCRC(p))
	})
}

// FuzzDecode checks that Decode never panics and that every batch it accepts
// is canonical: re-encoding its entries gives back its exact bytes. The fuzzer
// cannot forge a CRC, so each input is also decoded with its length and CRC
// rewritten to cover all of it, which lets mutations reach the entries.
func FuzzDecode(f *testing.F) {
	for _, p := range seedBatches() {
		f.Add(p)
		f.Add(append(bytes.Clone(p), "trailing"...))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		checkDecode(t, p)
		if len(p) >= record.HeaderBytes {
			q := bytes.Clone(p)
			binary.LittleEndian.PutUint32(q[8:], uint32(len(q)))
			checkDecode(t, fixCRC(q))
		}
	})
}

func checkDecode(t *testing.T, p []byte) {
	b, err := record.Decode(p)
	if err != nil {
		if !isDecodeError(err) {
			t.Fatalf("Decode: %v, want ErrCorrupt or ErrUnexpectedEOF", err)
		}
		// A valid header followed by too few bytes is a torn batch.
		if h, herr := record.ParseHeader(p); herr == nil && uint64(len(p)) < uint64(h.Length) &&
			!errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("Decode of a torn batch: %v, want io.ErrUnexpectedEOF", err)
		}
		return
	}
	h, entries := decodeAll(t, p)
	if h != b.Header {
		t.Fatalf("second decode gives header %+v, first %+v", h, b.Header)
	}
	if uint64(len(entries)) != uint64(h.Count) {
		t.Fatalf("%d entries, header says %d", len(entries), h.Count)
	}
	again := record.EncodeAppends(h.BaseOffset, h.Epoch, entries, b.Appends(nil))
	if c := h.Codec(); c != record.None {
		// The compressed bytes are the encoder's choice; the body they
		// hold is canonical.
		if int64(len(again)) != h.LogicalBytes() {
			t.Fatalf("decoded %s batch re-encodes to %d bytes, header declares %d", c, len(again), h.LogicalBytes())
		}
		_, entries2 := decodeAll(t, encodeWith(c, h.BaseOffset, h.Epoch, entries, b.Appends(nil)))
		if d := diffEntries(entries2, entries); d != "" {
			t.Fatalf("decoded %s batch does not round-trip: %s", c, d)
		}
		return
	}
	if !bytes.Equal(again, p[:h.Length]) {
		t.Fatalf("decoded batch does not re-encode to its bytes\n got %x\nwant %x", again, p[:h.Length])
	}
}

// entrySource turns fuzz bytes into entries.
type entrySource struct{ p []byte }

func (s *entrySource) byte() byte {
	if len(s.p) == 0 {
		return 0
	}
	c := s.p[0]
	s.p = s.p[1:]
	return c
}

func (s *entrySource) bytes(n int) []byte {
	n = min(n, len(s.p))
	b := s.p[:n:n]
	s.p = s.p[n:]
	return b
}

func (s *entrySource) entry(first int64) record.Entry {
	var e record.Entry
	switch c := s.byte(); c % 4 {
	case 0:
		e.Time = first
	case 1:
		e.Time = first + int64(int8(s.byte()))
	default:
		e.Time = int64(binary.LittleEndian.Uint64(append(s.bytes(8), make([]byte, 8)...)))
	}
	n := int(s.byte())
	if n >= 250 {
		n *= int(s.byte()) + 1 // up to ~64 KiB
	}
	if n > 0 || s.byte()%2 == 0 {
		e.Payload = s.bytes(n)
	}
	if nprops := int(s.byte() % 8); nprops > 0 {
		e.Properties = make(map[string][]byte, nprops)
		for range nprops {
			k := string(s.bytes(int(s.byte() % 8)))
			e.Properties[k] = s.bytes(int(s.byte() % 32))
		}
	}
	return e
}

// appendOf turns a fuzz byte into the append an entry starts, if any.
func appendOf(c byte, seq uint64) (record.Append, bool) {
	switch c % 5 {
	case 0:
		return record.Append{}, true
	case 1, 2:
		return record.Append{Producer: uint64(c%2) + 1, Seq: seq}, true
	case 3:
		return record.Append{Producer: math.MaxUint64 - uint64(c), Seq: math.MaxUint64 - seq}, true
	}
	return record.Append{}, false
}

// FuzzRoundTrip checks that Decode returns the entries and appends that
// were encoded.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{}, uint64(0), uint64(0), int64(0))
	f.Add([]byte("\x01\xff\x05hello\x03\x01a\x02vv\x00b\x00\x02\x10\x00\x00"), uint64(7), uint64(3), int64(-1000))
	f.Add(bytes.Repeat([]byte{0xfe, 0x07}, 300), uint64(math.MaxUint64-100_000), uint64(math.MaxUint64), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, data []byte, base, epoch uint64, first int64) {
		src := entrySource{data}
		entries := []record.Entry{{Time: first}}
		if len(data) > 0 {
			entries = entries[:0]
		}
		for len(src.p) > 0 {
			entries = append(entries, src.entry(first))
		}
		if base+uint64(len(entries)) < base {
			base = 0 // such a batch could not hold valid offsets
		}
		// Each entry may start an append, chosen by a byte of the payload.
		var b record.Builder
		var appends []record.Append
		for i, e := range entries {
			c := byte(i)
			if len(e.Payload) > 0 {
				c = e.Payload[0]
			}
			if a, ok := appendOf(c, uint64(i)+1); ok || i == 0 {
				b.StartAppend(a.Producer, a.Seq)
				appends = append(appends, a)
			}
			b.Add(e)
			appends[len(appends)-1].Count++
		}
		p := b.Finish(base, epoch)
		if b.Bytes() != len(p) {
			t.Fatalf("Bytes %d, batch is %d bytes", b.Bytes(), len(p))
		}
		if !bytes.Equal(p, record.EncodeAppends(base, epoch, entries, appends)) {
			t.Fatal("Builder and EncodeAppends disagree")
		}
		h, got := decodeAll(t, p)
		if d := diffEntries(got, entries); d != "" {
			t.Fatal(d)
		}
		if !slices.ContainsFunc(appends, func(a record.Append) bool { return a.Producer != 0 }) {
			// Without a producer the batch has no section: one append.
			appends = []record.Append{{Count: uint32(len(entries))}}
		}
		batch, _ := record.Decode(p)
		if got := batch.Appends(nil); !slices.Equal(got, appends) {
			t.Fatalf("Appends %+v, want %+v", got, appends)
		}
		if h.BaseOffset != base || h.Epoch != epoch || h.FirstTime != entries[0].Time ||
			h.Count != uint32(len(entries)) || h.Length != uint32(len(p)) {
			t.Fatalf("header %+v for %d entries at %d, epoch %d", h, len(entries), base, epoch)
		}
	})
}
