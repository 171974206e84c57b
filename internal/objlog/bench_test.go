package objlog

// Benchmarks of the write path on a bucket in memory that takes a PUT's
// time (putBucket), or on the pinned MinIO: the appends' latency against the
// PUT's, the PUTs a gigabyte takes, and the allocations. Run them with
//
//	go test -run '^$' -bench . -benchmem ./internal/objlog/
//
// and profile the write path with -cpuprofile.

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/miniotest"
	"github.com/ternwal/tern/internal/record"
)

// putBucket counts the PUTs and their bytes, and makes each take latency
// plus perMiB for every MiB it carries, as a store's PUT does.
type putBucket struct {
	blob.Bucket
	latency, perMiB time.Duration

	mu         sync.Mutex
	puts       int64
	bytes      int64
	putLatency []time.Duration
}

func (b *putBucket) PutIfAbsent(ctx context.Context, key string, data ...[]byte) error {
	n := 0
	for _, d := range data {
		n += len(d)
	}
	t0 := time.Now()
	time.Sleep(b.latency + time.Duration(float64(b.perMiB)*float64(n)/(1<<20)))
	err := b.Bucket.PutIfAbsent(ctx, key, data...)
	d := time.Since(t0)
	b.mu.Lock()
	b.puts++
	b.bytes += int64(n)
	b.putLatency = append(b.putLatency, d)
	b.mu.Unlock()
	return err
}

// benchBucket is the bucket a benchmark runs on: "mem" takes 2 ms and
// 8 ms per MiB a PUT; "minio" is the pinned MinIO, started for the
// benchmark.
func benchBucket(b *testing.B, store string) *putBucket {
	b.Helper()
	if store == "mem" {
		return &putBucket{Bucket: blob.NewMem(), latency: 2 * time.Millisecond, perMiB: 8 * time.Millisecond}
	}
	srv := miniotest.Start(b)
	bk, err := blob.OpenS3(b.Context(), blob.S3Options{
		Endpoint: srv.Endpoint, Bucket: srv.Bucket, Prefix: strings.ReplaceAll(b.Name(), "/", "_"),
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bk.Close() })
	return &putBucket{Bucket: bk}
}

// benchLog opens a log on bk with default tuning and a writer epoch.
func benchLog(b *testing.B, bk blob.Bucket) (*Log, uint64) {
	return benchLogCaching(b, bk, 0)
}

// benchLogCaching opens a log on bk that keeps cacheBytes of fragments for
// tail readers (0: the default), with a writer epoch.
func benchLogCaching(b *testing.B, bk blob.Bucket, cacheBytes int64) (*Log, uint64) {
	b.Helper()
	s, err := meta.OpenBolt(filepath.Join(b.TempDir(), "meta.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if _, err := s.CreateLog(ctx, meta.Log{Name: "l"}); err != nil {
		b.Fatal(err)
	}
	epoch, err := s.BumpEpoch(ctx, "l")
	if err != nil {
		b.Fatal(err)
	}
	l, err := Open(ctx, Options{Bucket: bk, Meta: StoreMeta(s, "l"), Prefix: "7/", Epoch: epoch - 1, CacheBytes: cacheBytes})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	if err := l.Fence(ctx, epoch, nil); err != nil {
		b.Fatal(err)
	}
	return l, epoch
}

// report adds the PUTs per GB and the appends' and PUTs' latencies.
func report(b *testing.B, bk *putBucket, lat []time.Duration) {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	if bk.bytes > 0 {
		b.ReportMetric(float64(bk.puts)/(float64(bk.bytes)/1e9), "PUTs/GB")
	}
	b.ReportMetric(float64(bk.puts)/float64(b.N), "PUTs/op")
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	if len(lat) > 0 {
		b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
		b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	}
	if len(bk.putLatency) > 0 {
		b.ReportMetric(ms(percentile(bk.putLatency, 0.5)), "put-p50-ms")
		b.ReportMetric(ms(percentile(bk.putLatency, 0.99)), "put-p99-ms")
	}
}

func percentile(lat []time.Duration, p float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkAppendFull keeps 512 appends of 64 KiB in flight, as tern
// bench's obj-put does: the log at full load, whose fragments should be
// full (FlushBytes) and its PUTs per GB few.
func BenchmarkAppendFull(b *testing.B) {
	for _, store := range []string{"mem", "minio"} {
		b.Run(store, func(b *testing.B) {
			bk := benchBucket(b, store)
			l, epoch := benchLog(b, bk)
			e := []record.Entry{{Payload: make([]byte, 64<<10)}}
			sem := make(chan struct{}, 512)
			var failed atomic.Pointer[error]
			var wg sync.WaitGroup
			b.SetBytes(64 << 10)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				sem <- struct{}{}
				p, err := l.Append(epoch, e, engine.AppendOptions{})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					if _, err := p.Wait(context.Background()); err != nil {
						failed.Store(&err)
					}
					<-sem
				})
			}
			wg.Wait()
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			report(b, bk, nil)
		})
	}
}

// BenchmarkAppend1KiB appends 1 KiB entries at a steady 1,000 a second
// (at most 64 in flight), as tern bench's obj-1k does: an append's latency
// against a PUT's (put-p50-ms), which the log should come close to when
// its uploads are not all in flight.
func BenchmarkAppend1KiB(b *testing.B) {
	for _, store := range []string{"mem", "minio"} {
		b.Run(store, func(b *testing.B) {
			bk := benchBucket(b, store)
			l, epoch := benchLog(b, bk)
			e := []record.Entry{{Payload: make([]byte, 1<<10)}}
			lat := make([]time.Duration, b.N)
			sem := make(chan struct{}, 64)
			var failed atomic.Pointer[error]
			var wg sync.WaitGroup
			b.SetBytes(1 << 10)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if d := time.Until(start.Add(time.Duration(i) * time.Millisecond)); d > 0 {
					time.Sleep(d)
				}
				sem <- struct{}{}
				t0 := time.Now()
				p, err := l.Append(epoch, e, engine.AppendOptions{})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					if _, err := p.Wait(context.Background()); err != nil {
						failed.Store(&err)
					}
					lat[i] = time.Since(t0)
					<-sem
				})
			}
			wg.Wait()
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			report(b, bk, lat)
		})
	}
}
