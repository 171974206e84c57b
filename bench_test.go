package tern

// Benchmarks of the local engine next to the physical limit of the disk under
// the test's temporary directory, measured by the same benchmark in the same
// run. Run them on the disk you care about:
//
//	TMPDIR=/path/on/disk go test -run=^$ -bench=. -benchtime=5s .
//
// Each reports the engine's figure, the raw baseline's, and their ratio.

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/vfs"
)

// rawSync measures a loop of write(size) + fdatasync on a growing file in dir
// and returns the latency of each iteration.
func rawSync(b *testing.B, dir string, size, n int) []time.Duration {
	b.Helper()
	f, err := vfs.OS.Create(filepath.Join(dir, "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, size)
	lat := make([]time.Duration, n)
	for i := range n {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	return lat
}

func percentile(lat []time.Duration, p float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func benchLog(b *testing.B, opts LogOptions) (string, *Log, *Writer) {
	b.Helper()
	dir := b.TempDir()
	c, err := Open(b.Context(), Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	l, err := c.CreateLog(b.Context(), "bench", opts)
	if err != nil {
		b.Fatal(err)
	}
	w, err := l.OpenWriter(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	return dir, l, w
}

// BenchmarkSyncAppend1KiB: one writer, one append in flight, 1 KiB entries,
// fsync=always; p50 latency against write+fdatasync of 1 KiB.
func BenchmarkSyncAppend1KiB(b *testing.B) {
	dir, _, w := benchLog(b, LogOptions{})
	e := Entry{Payload: make([]byte, 1024)}
	b.SetBytes(1024)
	b.ReportAllocs()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := w.Append(b.Context(), e); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	raw := rawSync(b, dir, 1024, min(b.N, 5000))
	p50, raw50 := percentile(lat, 0.5), percentile(raw, 0.5)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(raw50.Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(p50)/float64(raw50), "p50/raw")
}

// BenchmarkConcurrentAppend4KiB: 64 appenders of 4 KiB entries, one in
// flight each, fsync=always; bandwidth against write+fdatasync of the same
// bytes per fdatasync that the group committer reached.
func BenchmarkConcurrentAppend4KiB(b *testing.B) {
	const appenders, size = 64, 4096
	dir, l, w := benchLog(b, LogOptions{})
	b.SetBytes(size)
	b.ReportAllocs()
	before := logOf(l).eng.Stats()
	var next sync.WaitGroup
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	b.ResetTimer()
	t0 := time.Now()
	for range appenders {
		next.Go(func() {
			e := Entry{Payload: make([]byte, size)}
			for range work {
				if _, err := w.Append(b.Context(), e); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	next.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	after := logOf(l).eng.Stats()
	syncs := after.Syncs - before.Syncs
	perSync := int((after.Bytes - before.Bytes) / int64(syncs)) // batches as written, headers included
	raw := rawSync(b, dir, perSync, int(min(syncs, 2000)))
	var rawTotal time.Duration
	for _, d := range raw {
		rawTotal += d
	}
	mbs := float64(b.N*size) / elapsed.Seconds() / 1e6
	rawMBs := float64(len(raw)*perSync) / rawTotal.Seconds() / 1e6
	b.ReportMetric(mbs, "MB/s")
	b.ReportMetric(float64(perSync)/1024, "KiB/fsync")
	b.ReportMetric(rawMBs, "raw-MB/s")
	b.ReportMetric(mbs/rawMBs, "bw/raw")
}

// BenchmarkAsyncAppend100B: one goroutine queues 100-byte entries with
// AppendAsync while another waits for them in order; durable entries per
// second with fsync=always.
func BenchmarkAsyncAppend100B(b *testing.B) {
	_, l, w := benchLog(b, LogOptions{})
	e := Entry{Payload: make([]byte, 100)}
	b.SetBytes(100)
	b.ReportAllocs()
	pending := make(chan *Pending, 1<<16)
	var waiter sync.WaitGroup
	waiter.Go(func() {
		for p := range pending {
			if _, err := p.Wait(b.Context()); err != nil {
				b.Error(err)
				return
			}
		}
	})
	syncs0 := logOf(l).eng.Stats().Syncs
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		pending <- w.AppendAsync(e)
	}
	close(pending)
	waiter.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "entries/s")
	b.ReportMetric(float64(b.N)/float64(logOf(l).eng.Stats().Syncs-syncs0), "entries/fsync")
}
