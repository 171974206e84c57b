package objlog

import (
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
)

// BenchmarkRead reads a log of 16 MiB of 1 KiB entries (appended in
// batches of 64 before the timer starts) from its start with NextBatch, on
// a bucket in memory: from the bucket through the fetcher (a log that keeps
// no fragment in memory), and from the fragments the writing log keeps for
// tail readers. One op is one entry, so allocs/op are per entry read.
func BenchmarkRead(b *testing.B) {
	for _, c := range []struct {
		from       string
		cacheBytes int64
	}{{"bucket", 1}, {"memory", 64 << 20}} {
		b.Run("from="+c.from, func(b *testing.B) {
			l, epoch := benchLogCaching(b, blob.NewMem(), c.cacheBytes)
			const size, n = 1 << 10, 16 << 10
			batch := make([]record.Entry, 64)
			for i := range batch {
				batch[i].Payload = make([]byte, size)
			}
			for i := 0; i < n; i += len(batch) {
				p, err := l.Append(epoch, batch, engine.AppendOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if i+len(batch) >= n {
					if _, err := p.Wait(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			var r engine.Reader
			left := 0
			for read := 0; read < b.N; {
				if left == 0 {
					if r != nil {
						r.Close()
					}
					var err error
					if r, err = l.NewReader(0, false); err != nil {
						b.Fatal(err)
					}
					left = n
				}
				es, err := r.NextBatch(b.Context(), min(1000, left), 0)
				if err != nil {
					b.Fatal(err)
				}
				left -= len(es)
				read += len(es)
			}
			r.Close()
		})
	}
}
