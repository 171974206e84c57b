package record_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/ternwal/tern/internal/record"
)

var codecs = []record.Codec{record.Zstd, record.LZ4}

// jsonEntries are entries that compress well, like the JSON documents many
// logs carry.
func jsonEntries(n int) []record.Entry {
	es := make([]record.Entry, n)
	for i := range es {
		es[i] = record.Entry{
			Time:    1_700_000_000_000_000_000 + int64(i),
			Payload: fmt.Appendf(nil, `{"id":%d,"user":"user-%d","op":"insert","vector":[0.1,0.2,0.3],"tags":["a","b"]}`, i, i%17),
		}
		if i%3 == 0 {
			es[i].Properties = map[string][]byte{"trace": fmt.Appendf(nil, "t-%d", i)}
		}
	}
	return es
}

func encodeWith(c record.Codec, base, epoch uint64, entries []record.Entry, appends []record.Append) []byte {
	var b record.Builder
	b.SetCodec(c)
	i := 0
	for _, a := range appends {
		b.StartAppend(a.Producer, a.Seq)
		for _, e := range entries[i : i+int(a.Count)] {
			b.Add(e)
		}
		i += int(a.Count)
	}
	return bytes.Clone(b.Finish(base, epoch))
}

// TestCodecRoundTrip: a compressed batch is shorter than the same batch
// uncompressed, says its codec and its uncompressed size, and decodes to
// the same entries and appends.
func TestCodecRoundTrip(t *testing.T) {
	entries := jsonEntries(500)
	appends := []record.Append{{Producer: 7, Seq: 1, Count: 200}, {Count: 100}, {Producer: 7, Seq: 2, Count: 200}}
	plain := record.EncodeAppends(42, 3, entries, appends)
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			p := encodeWith(c, 42, 3, entries, appends)
			if len(p) >= len(plain)/2 {
				t.Fatalf("%s batch of %d bytes, %d uncompressed: want at most half", c, len(p), len(plain))
			}
			h, got := decodeAll(t, p)
			if d := diffEntries(got, entries); d != "" {
				t.Fatal(d)
			}
			if h.Codec() != c || p[4] != record.VersionCompressed || h.Length != uint32(len(p)) ||
				h.LogicalBytes() != int64(len(plain)) || h.BaseOffset != 42 || h.Epoch != 3 || h.Count != 500 {
				t.Fatalf("header %+v (codec %s, logical %d) of a %d-byte batch, %d uncompressed", h, h.Codec(), h.LogicalBytes(), len(p), len(plain))
			}
			b, _ := record.Decode(p)
			if got := b.Appends(nil); fmt.Sprint(got) != fmt.Sprint(appends) {
				t.Fatalf("appends %v, want %v", got, appends)
			}
			if ph, err := record.ParseHeader(p); err != nil || ph != h {
				t.Fatalf("ParseHeader = %+v, %v; want %+v", ph, err, h)
			}
		})
	}
}

// TestCodecIncompressible: a body that does not get shorter is stored
// uncompressed, as a version 1 batch any reader reads.
func TestCodecIncompressible(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	for _, entries := range [][]record.Entry{{{Payload: random}}, {{}}, {{Payload: []byte("x")}}} {
		want := record.Encode(5, 1, entries)
		for _, c := range codecs {
			if got := encodeWith(c, 5, 1, entries, []record.Append{{Count: uint32(len(entries))}}); !bytes.Equal(got, want) {
				t.Fatalf("%s: an incompressible batch was not stored as is", c)
			}
		}
	}
}

// TestCodecOverMaxBody: a body over MaxBodyBytes is stored uncompressed,
// so that no reader needs to allocate more to decompress a batch.
func TestCodecOverMaxBody(t *testing.T) {
	var b record.Builder
	b.SetCodec(record.Zstd)
	b.Add(record.Entry{Payload: make([]byte, record.MaxBodyBytes)})
	p := b.Finish(0, 0)
	if h, err := record.ParseHeader(p); err != nil || h.Codec() != record.None || len(p) <= record.MaxBodyBytes {
		t.Fatalf("batch of a %d-byte body: %d bytes, header %+v, %v", record.MaxBodyBytes, len(p), h, err)
	}
}

// TestBuilderResetClearsCodec: a builder back from a pool compresses only
// if its new owner says so.
func TestBuilderResetClearsCodec(t *testing.T) {
	var b record.Builder
	b.SetCodec(record.LZ4)
	for _, e := range jsonEntries(50) {
		b.Add(e)
	}
	if h, _ := record.ParseHeader(b.Finish(0, 0)); h.Codec() != record.LZ4 {
		t.Fatalf("codec %s, want lz4", h.Codec())
	}
	b.Reset()
	for _, e := range jsonEntries(50) {
		b.Add(e)
	}
	if h, _ := record.ParseHeader(b.Finish(0, 0)); h.Codec() != record.None {
		t.Fatalf("codec %s after Reset, want none", h.Codec())
	}
}

// TestCodecCorrupt: compressed bytes that are damaged, or whose header lies
// about their size, are ErrCorrupt, never a panic or a large allocation.
func TestCodecCorrupt(t *testing.T) {
	for _, c := range codecs {
		good := encodeWith(c, 1, 1, jsonEntries(100), []record.Append{{Count: 100}})
		declared := binary.LittleEndian.Uint32(good[44:])
		setBody := func(n uint32) []byte {
			p := bytes.Clone(good)
			binary.LittleEndian.PutUint32(p[44:], n)
			return fixCRC(p)
		}
		cases := map[string][]byte{
			"body over MaxBodyBytes": setBody(record.MaxBodyBytes + 1),
			"body of 4 GiB":          setBody(1<<32 - 1),
			"body one byte more":     setBody(declared + 1),
			"body one byte less":     setBody(declared - 1),
			"body too small":         setBody(2),
			"codec in version 1": func() []byte {
				p := bytes.Clone(good)
				p[4] = record.Version
				return fixCRC(p)
			}(),
			"version 2 without codec": func() []byte {
				p := bytes.Clone(good)
				p[5] &^= 0x07
				return fixCRC(p)
			}(),
			"unknown codec": func() []byte {
				p := bytes.Clone(good)
				p[5] |= 0x07
				return fixCRC(p)
			}(),
			"compressed bytes garbled": func() []byte {
				p := bytes.Clone(good)
				for i := record.HeaderBytes + 4; i < len(p); i += 7 {
					p[i] ^= 0x5a
				}
				return fixCRC(p)
			}(),
			"compressed bytes cut": splice(bytes.Clone(good), len(good)-10, len(good)),
			"compressed bytes extended": splice(bytes.Clone(good), len(good), len(good),
				0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
		}
		for name, p := range cases {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				_, err := record.Decode(p)
				if !errors.Is(err, record.ErrCorrupt) {
					t.Fatalf("Decode: %v, want ErrCorrupt", err)
				}
			})
		}
	}
}

// TestCodecGolden pins the compressed format: these batches, written by
// this version, must decode to these entries in every later one.
// TERN_WRITE_GOLDEN=1 rewrites the files (only when the format changes on
// purpose).
func TestCodecGolden(t *testing.T) {
	for _, c := range codecs {
		path := "testdata/golden-" + c.String() + ".hex"
		if os.Getenv("TERN_WRITE_GOLDEN") != "" {
			p := encodeWith(c, goldenBase, goldenEpoch, jsonEntries(20), []record.Append{{Producer: 9, Seq: 4, Count: 20}})
			if err := os.WriteFile(path, []byte(hex.EncodeToString(p)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := hex.DecodeString(strings.TrimSpace(string(text)))
		if err != nil {
			t.Fatal(err)
		}
		h, got := decodeAll(t, p)
		if d := diffEntries(got, jsonEntries(20)); d != "" {
			t.Fatalf("%s: %s", c, d)
		}
		if h.Codec() != c || h.BaseOffset != goldenBase || h.Epoch != goldenEpoch {
			t.Fatalf("%s: header %+v", c, h)
		}
	}
}

func TestParseCodec(t *testing.T) {
	for _, c := range []record.Codec{record.None, record.Zstd, record.LZ4} {
		if got, err := record.ParseCodec(c.String()); err != nil || got != c {
			t.Fatalf("ParseCodec(%q) = %v, %v", c, got, err)
		}
	}
	if c, err := record.ParseCodec(""); err != nil || c != record.None {
		t.Fatalf(`ParseCodec("") = %v, %v`, c, err)
	}
	if _, err := record.ParseCodec("gzip"); err == nil || !strings.Contains(err.Error(), "use none, zstd or lz4") {
		t.Fatalf(`ParseCodec("gzip"): %v`, err)
	}
}
