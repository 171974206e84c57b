package wal

import (
	"fmt"
	"testing"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/vfs"
)

// BenchmarkOpenDedup measures Open of a cleanly closed log (segment files
// in the page cache) of appends by 16 producers, in batches of 64 appends
// of one 1 KiB entry, followed by an append: anonymous, which does not
// read the log back, or with a producer, the first of which rebuilds the
// deduplication table from at most engine.DedupReachBytes of batches.
func BenchmarkOpenDedup(b *testing.B) {
	for _, tc := range []struct {
		mib      int
		producer uint64
	}{{1, 0}, {1, 99}, {64, 0}, {64, 99}} {
		mib := tc.mib
		b.Run(fmt.Sprintf("log=%dMiB/producer=%t", mib, tc.producer != 0), func(b *testing.B) {
			dir := b.TempDir()
			l, err := Open(b.Context(), Options{FS: vfs.OS, Dir: dir, Epoch: 1, Sync: SyncNever})
			if err != nil {
				b.Fatal(err)
			}
			es := []record.Entry{{Payload: make([]byte, 1024)}}
			seqs := make([]uint64, 16)
			for n := 0; n < mib<<10; n += 64 {
				var last engine.Pending
				for i := range 64 {
					seqs[i%16]++
					if last, err = l.Append(1, es, engine.AppendOptions{Producer: uint64(i%16) + 1, Seq: seqs[i%16]}); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := last.Wait(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				l, err := Open(b.Context(), Options{FS: vfs.OS, Dir: dir, Epoch: 1, Sync: SyncNever})
				if err != nil {
					b.Fatal(err)
				}
				seqs[0]++
				p, err := l.Append(1, es, engine.AppendOptions{Producer: tc.producer, Seq: seqs[0]})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Wait(b.Context()); err != nil {
					b.Fatal(err)
				}
				l.Close()
			}
		})
	}
}
