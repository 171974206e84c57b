package record_test

import (
	"fmt"
	"testing"

	"github.com/ternwal/tern/internal/record"
)

func benchEntries(n, payloadBytes int) []record.Entry {
	entries := make([]record.Entry, n)
	for i := range entries {
		entries[i] = record.Entry{Time: 1_700_000_000_000_000_000 + int64(i)*1_000, Payload: pattern(payloadBytes, byte(i))}
	}
	return entries
}

var benchSizes = []struct{ payloadBytes, entries int }{
	{100, 1}, {100, 64}, {100, 1000},
	{4 << 10, 1}, {4 << 10, 64}, {4 << 10, 1000},
}

// BenchmarkBuild measures Builder.Add and Finish with a reused Builder, as a
// writer uses it. Throughput counts the batch's bytes.
func BenchmarkBuild(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d/entries=%d", s.payloadBytes, s.entries), func(b *testing.B) {
			entries := benchEntries(s.entries, s.payloadBytes)
			var bld record.Builder
			b.SetBytes(int64(len(record.Encode(0, 0, entries))))
			b.ReportAllocs()
			for b.Loop() {
				bld.Reset()
				for _, e := range entries {
					bld.Add(e)
				}
				bld.Finish(1, 1)
			}
		})
	}
}

// BenchmarkBuildProperties is BenchmarkBuild with three properties per entry,
// which adds the sort of the keys.
func BenchmarkBuildProperties(b *testing.B) {
	entries := benchEntries(1000, 100)
	for i := range entries {
		entries[i].Properties = map[string][]byte{"trace-id": []byte("0123456789abcdef"), "content-type": []byte("application/json"), "k": {byte(i)}}
	}
	var bld record.Builder
	b.SetBytes(int64(len(record.Encode(0, 0, entries))))
	b.ReportAllocs()
	for b.Loop() {
		bld.Reset()
		for _, e := range entries {
			bld.Add(e)
		}
		bld.Finish(1, 1)
	}
}

// BenchmarkDecode measures Decode (header, CRC and a validating walk) followed
// by Each, as a reader uses them.
func BenchmarkDecode(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d/entries=%d", s.payloadBytes, s.entries), func(b *testing.B) {
			p := record.Encode(0, 0, benchEntries(s.entries, s.payloadBytes))
			var total int
			benchDecode(b, p, func(_ uint64, e record.Entry) error { total += len(e.Payload); return nil })
		})
	}
}

// benchDecode measures Decode of the batch p and a visit of its entries.
func benchDecode(b *testing.B, p []byte, visit func(uint64, record.Entry) error) {
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		batch, err := record.Decode(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := batch.Each(visit); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCodec measures Finish and Decode of a batch of 64 JSON-like
// entries of about 100 bytes with each codec: the CPU compression adds to
// a commit and to a read. Throughput counts the uncompressed batch's bytes.
func BenchmarkCodec(b *testing.B) {
	entries := jsonEntries(64)
	logical := int64(len(record.Encode(0, 0, entries)))
	for _, c := range []record.Codec{record.None, record.Zstd, record.LZ4} {
		b.Run("finish/"+c.String(), func(b *testing.B) {
			var bld record.Builder
			b.SetBytes(logical)
			b.ReportAllocs()
			for b.Loop() {
				bld.Reset()
				bld.SetCodec(c)
				for _, e := range entries {
					bld.Add(e)
				}
				bld.Finish(1, 1)
			}
		})
		b.Run("decode/"+c.String(), func(b *testing.B) {
			p := encodeWith(c, 1, 1, entries, []record.Append{{Count: uint32(len(entries))}})
			b.SetBytes(logical)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := record.Decode(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
