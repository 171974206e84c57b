package tern_test

import (
	"fmt"
	"testing"

	"github.com/ternwal/tern"
)

// BenchmarkCatchUp: a reader of a local log reads it from the start with
// NextBatch, as a catching-up reader does, embedded and through a server
// (gRPC on loopback); one op is one entry, so allocs/op are the
// allocations per entry read (on both sides, for the remote reader). The
// log holds 64 MiB (at least 1,024 entries), appended in batches of 64
// before the timer starts; a reader that reaches the end starts again from
// the start.
func BenchmarkCatchUp(b *testing.B) {
	for _, mode := range []string{"embedded", "remote"} {
		for _, c := range []struct {
			size  int
			props bool
		}{{100, true}, {1 << 10, false}, {64 << 10, false}} {
			name := fmt.Sprintf("%s/size=%d", mode, c.size)
			if c.props {
				name += "/props"
			}
			b.Run(name, func(b *testing.B) {
				benchCatchUp(b, mode, c.size, c.props)
			})
		}
	}
}

func benchCatchUp(b *testing.B, mode string, size int, props bool) {
	l, w := benchWriter(b, mode)
	n := (max(1000, (64<<20)/size) + 63) / 64 * 64
	batch := make([]tern.Entry, 64)
	for i := range batch {
		batch[i].Payload = make([]byte, size)
		if props {
			batch[i].Properties = map[string][]byte{"key": []byte("v"), "trace": []byte("t-1")}
		}
	}
	for i := 0; i < n; i += len(batch) {
		if _, err := w.AppendBatch(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	var (
		r   *tern.Reader
		err error
	)
	left := 0
	for read := 0; read < b.N; {
		if left == 0 {
			if r != nil {
				r.Close()
			}
			if r, err = l.OpenReader(b.Context(), tern.FromStart); err != nil {
				b.Fatal(err)
			}
			left = n
		}
		es, err := r.NextBatch(b.Context(), min(1000, left))
		if err != nil {
			b.Fatal(err)
		}
		left -= len(es)
		read += len(es)
	}
	r.Close()
}

// benchWriter creates a log, embedded or on a server started for the
// benchmark (mode "embedded" or "remote"), and opens its writer; the
// benchmark's cleanup closes them.
func benchWriter(b *testing.B, mode string) (*tern.Log, *tern.Writer) {
	b.Helper()
	opts := tern.Options{Dir: b.TempDir()}
	if mode == "remote" {
		opts = tern.Options{Server: startServer(b, b.TempDir(), "127.0.0.1:0").addr}
	}
	c, err := tern.Open(b.Context(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	l, err := c.CreateLog(b.Context(), "bench", tern.LogOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := l.OpenWriter(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return l, w
}
