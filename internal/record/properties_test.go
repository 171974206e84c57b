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
	benchDecode(b, p, func(_ uint64, e record.Entry) error { total += len(e.Properties["trace"]); return nil })
}

// TestDecodeSharedKeys: entries whose property keys repeat, change and
// shift place from one entry to the next decode to their own properties
// (Each shares key strings between entries only where they are equal).
func TestDecodeSharedKeys(t *testing.T) {
	var entries []record.Entry
	for i, keys := range [][]string{{"a", "b"}, {"a", "b"}, {"a", "c"}, {"b"}, nil, {"a", "b", "c"}, {"c"}, {"a", "b", "c", "d"}} {
		e := record.Entry{Time: int64(i), Payload: fmt.Appendf(nil, "p%d", i)}
		for _, k := range keys {
			if e.Properties == nil {
				e.Properties = map[string][]byte{}
			}
			e.Properties[k] = fmt.Appendf(nil, "%s%d", k, i)
		}
		entries = append(entries, e)
	}
	b, err := record.Decode(record.Encode(0, 0, entries))
	if err != nil {
		t.Fatal(err)
	}
	err = b.Each(func(off uint64, e record.Entry) error {
		want := entries[off]
		if len(e.Properties) != len(want.Properties) {
			t.Fatalf("entry %d: properties %q, want %q", off, e.Properties, want.Properties)
		}
		for k, v := range want.Properties {
			if got, ok := e.Properties[k]; !ok || string(got) != string(v) {
				t.Fatalf("entry %d: properties %q, want %q", off, e.Properties, want.Properties)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
