package objlogtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
)

// Key names an append of a producer: its entries are 1 + Seq%3 entries
// that say whose they are.
type Key struct{ Producer, Seq uint64 }

// Entries are the append's entries, the same at every retry.
func (k Key) Entries() []record.Entry {
	es := make([]record.Entry, 1+k.Seq%3)
	for j := range es {
		es[j] = record.Entry{Time: 1, Payload: fmt.Appendf(nil, "p%d-s%d-%d", k.Producer, k.Seq, j)}
	}
	return es
}

// Keys returns seqs 1 to n of producers 1 to m, interleaved.
func Keys(m, n int) []Key {
	var ks []Key
	for seq := 1; seq <= n; seq++ {
		for p := 1; p <= m; p++ {
			ks = append(ks, Key{uint64(p), uint64(seq)})
		}
	}
	return ks
}

// AppendKeys queues the appends of keys with their producers and
// sequences, then waits for them, and returns the offsets of those
// acknowledged and the first error.
func AppendKeys(l engine.Engine, epoch uint64, keys []Key) (map[Key]uint64, error) {
	ps := make([]engine.Pending, len(keys))
	var first error
	for i, k := range keys {
		p, err := l.Append(epoch, k.Entries(), engine.AppendOptions{Producer: k.Producer, Seq: k.Seq})
		if err != nil {
			first = err
			keys = keys[:i]
			break
		}
		ps[i] = p
	}
	acked := map[Key]uint64{}
	for i, k := range keys {
		off, err := ps[i].Wait(context.Background())
		if err != nil {
			first = cmpOr(first, err)
			continue
		}
		acked[k] = off
	}
	return acked, first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Placed reads the whole log and returns where each append is, failing
// the test if one is there twice or in part.
func Placed(t *testing.T, l engine.Engine) map[Key]uint64 {
	t.Helper()
	st := l.Stats()
	at := map[Key]uint64{}
	got := ReadAll(t, l, st.Start, st.End)
	for i := 0; i < len(got); {
		var k Key
		var j int
		if _, err := fmt.Sscanf(got[i], "p%d-s%d-%d", &k.Producer, &k.Seq, &j); err != nil {
			i++ // not an append of a producer
			continue
		}
		off := st.Start + uint64(i)
		if was, dup := at[k]; dup || j != 0 {
			t.Fatalf("offset %d holds entry %d of %+v, which is at %d already", off, j, k, was)
		}
		at[k] = off
		for j := range k.Entries() {
			if i >= len(got) || got[i] != fmt.Sprintf("p%d-s%d-%d", k.Producer, k.Seq, j) {
				t.Fatalf("%+v at %d is not whole", k, off)
			}
			i++
		}
	}
	return at
}

// RetryAll retries every append of keys on l, with epoch: an append in the
// log (at) must be answered with its offset, any other is appended; then
// every one is in the log exactly once.
func RetryAll(t *testing.T, l engine.Engine, epoch uint64, keys []Key, at map[Key]uint64) {
	t.Helper()
	answered, err := AppendKeys(l, epoch, keys)
	if err != nil {
		t.Fatalf("retries: %v", err)
	}
	for _, k := range keys {
		if was, ok := at[k]; ok && answered[k] != was {
			t.Fatalf("retry of %+v, in the log at %d, answered %d", k, was, answered[k])
		}
	}
	after := Placed(t, l)
	for _, k := range keys {
		if after[k] != answered[k] {
			t.Fatalf("%+v is at %d, its retry was answered %d", k, after[k], answered[k])
		}
	}
}
