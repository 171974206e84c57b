package record_test

import (
	"fmt"
	"testing"

	"github.com/ternwal/tern/internal/record"
)

// BenchmarkDecodeProperties measures Decode and Each of a batch of 64
// entries of 100 bytes, each with the same two property keys, as a reader
// of a Milvus channel (whose entries carry properties) uses them; allocs/op
// are per batch.
func BenchmarkDecodeProperties(b *testing.B) {
	entries := benchEntries(64, 100)
	for i := range entries {
		entries[i].Properties = map[string][]byte{"msg_type": []byte("insert"), "trace": fmt.Appendf(nil, "t-%d", i)}
	}
	p := record.Encode(0, 0, entries)
	var total int
	visit := func(_ uint64, e record.Entry) error { total += len(e.Properties["trace"]); return nil }
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
