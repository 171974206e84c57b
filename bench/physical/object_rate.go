package physical

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ternwal/tern/bench/loadgen"
)

// ObjectPutAt measures the bare path of a log in object storage that
// uploads each append as it comes: a PUT of size bytes due every 1/rate
// seconds for d (an open loop, as tern bench's rated workloads are), at
// most inflight at once (a PUT due while inflight are under way starts
// when one ends), each one's latency taken from when it was due to when it
// and every PUT due before it have completed, since a log acknowledges its
// appends in order. Variant "put RATE/s xINFLIGHT, in order". bucket is as
// for ObjectPut.
//
// ObjectPut's single closed-loop PUT is the store's own latency; this is
// what that store gives a writer at the workload's rate, which on a store
// that shares the machine's cores with the writer is slower.
func ObjectPutAt(ctx context.Context, client *minio.Client, bucket string, size, rate, inflight int, d time.Duration) (*loadgen.Result, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("physical: PUT rate %d: want at least 1 a second", rate)
	}
	o, err := newObjects(client, bucket, size, inflight)
	if err != nil {
		return nil, err
	}
	defer o.cleanup(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	buf := payload(size)
	m := startMeter()
	var (
		mu    sync.Mutex
		due   []time.Time // when each PUT was due, from the first not yet complete
		done  []bool      // whether it completed
		head  int         // the index of due[0]
		first error
		wg    sync.WaitGroup
	)
	// complete records PUT i as completed, and the latency of each PUT
	// that completes the run of completed ones from the head.
	complete := func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if first == nil {
				first = err
				cancel()
			}
			return
		}
		done[i-head] = true
		now := time.Now()
		for len(done) > 0 && done[0] {
			m.hist.Record(now.Sub(due[0]))
			due, done = due[1:], done[1:]
			head++
		}
	}
	sem := make(chan struct{}, inflight)
	interval := time.Second / time.Duration(rate)
	var n int64
	for i := 0; ; i++ {
		at := m.start.Add(time.Duration(i) * interval)
		if !at.Before(m.start.Add(d)) {
			break
		}
		if wait := time.Until(at); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		select {
		case <-ctx.Done():
		case sem <- struct{}{}:
		}
		if ctx.Err() != nil {
			break
		}
		mu.Lock()
		due, done = append(due, at), append(done, false)
		mu.Unlock()
		n++
		wg.Go(func() {
			defer func() { <-sem }()
			complete(i, o.put(ctx, 0, fmt.Sprintf("at-%d", i), buf))
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	spec := loadgen.Spec{Kind: loadgen.KindAppend, EntryBytes: size, Batch: 1, Producers: 1, InFlight: inflight, Rate: float64(rate), Logs: 1, Duration: d}
	return m.result("s3", fmt.Sprintf("put %d/s x%d, in order", rate, inflight), spec, n, size), nil
}
