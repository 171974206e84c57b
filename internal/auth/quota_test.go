package auth

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestTakeAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBuckets()
		p := &Principal{Name: "p", Quotas: Quotas{AppendBytesPerSecond: 1000, AppendBurstBytes: 4000}}
		take := func(n int64, wantOK bool, wantRetry time.Duration) {
			t.Helper()
			ok, retry := b.TakeAppend(p, n)
			if ok != wantOK || retry != wantRetry {
				t.Fatalf("TakeAppend(%d) = %v, %v; want %v, %v", n, ok, retry, wantOK, wantRetry)
			}
		}
		// Full at first: the whole burst at once, then drained.
		take(3000, true, 0)
		take(1000, true, 0)
		take(1, false, time.Millisecond)
		take(500, false, 500*time.Millisecond)
		// Refilled at the rate: a refused take took nothing.
		time.Sleep(500 * time.Millisecond)
		take(500, true, 0)
		take(100, false, 100*time.Millisecond)
		time.Sleep(100 * time.Millisecond)
		take(100, true, 0)
		// Never above the burst, however long it waits.
		time.Sleep(time.Hour)
		take(4000, true, 0)
		take(1, false, time.Millisecond)
		// More than the burst is never ok, and there is no use retrying.
		time.Sleep(time.Hour)
		take(4001, false, 0)
		take(4000, true, 0) // and took nothing
	})
}

func TestTakeAppendDefaultBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBuckets()
		p := &Principal{Name: "p", Quotas: Quotas{AppendBytesPerSecond: 1 << 20}}
		if ok, retry := b.TakeAppend(p, 1<<20+1); ok || retry != 0 {
			t.Errorf("more than a second's worth: %v, %v", ok, retry)
		}
		if ok, _ := b.TakeAppend(p, 1<<20); !ok {
			t.Error("a second's worth refused from a full bucket")
		}
		ok, retry := b.TakeAppend(p, 1<<19)
		if ok || retry != 500*time.Millisecond {
			t.Errorf("from an empty bucket: %v, %v", ok, retry)
		}
		time.Sleep(retry)
		if ok, _ := b.TakeAppend(p, 1<<19); !ok {
			t.Error("refused after waiting retryAfter")
		}
	})
}

func TestTakeAppendUnbounded(t *testing.T) {
	b := NewBuckets()
	for _, p := range []*Principal{nil, {Name: "free"}, {Name: "logs only", Quotas: Quotas{Logs: 1}}} {
		for range 3 {
			if ok, retry := b.TakeAppend(p, 1<<40); !ok || retry != 0 {
				t.Errorf("%v: TakeAppend = %v, %v", p, ok, retry)
			}
		}
	}
	if len(b.m) != 0 {
		t.Errorf("%d buckets for principals without a rate", len(b.m))
	}
}

// Principals have buckets of their own: draining one leaves the others
// full, and a principal of a new policy with the same name has the same
// bucket.
func TestTakeAppendPerPrincipal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBuckets()
		q := Quotas{AppendBytesPerSecond: 100}
		a, c := &Principal{Name: "a", Quotas: q}, &Principal{Name: "c", Quotas: q}
		if ok, _ := b.TakeAppend(a, 100); !ok {
			t.Fatal("a refused")
		}
		if ok, _ := b.TakeAppend(a, 1); ok {
			t.Fatal("a not drained")
		}
		if ok, _ := b.TakeAppend(c, 100); !ok {
			t.Fatal("c refused: a drained it")
		}
		reloaded := &Principal{Name: "a", Quotas: Quotas{AppendBytesPerSecond: 1000, AppendBurstBytes: 10000}}
		if ok, retry := b.TakeAppend(reloaded, 1); ok || retry != time.Millisecond {
			t.Errorf("a reloaded: %v, %v; want its drained bucket at its new rate", ok, retry)
		}
		if len(b.m) != 2 {
			t.Errorf("%d buckets for 2 names", len(b.m))
		}
	})
}

// Concurrent takers never take more than the bucket held (run with -race).
func TestTakeAppendConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBuckets()
		p := &Principal{Name: "p", Quotas: Quotas{AppendBytesPerSecond: 10, AppendBurstBytes: 1000}}
		var mu sync.Mutex
		taken := 0
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 100 {
					if ok, _ := b.TakeAppend(p, 3); ok {
						mu.Lock()
						taken += 3
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if taken != 999 {
			t.Errorf("took %d bytes of a bucket of 1000 in no time, want 999", taken)
		}
	})
}
