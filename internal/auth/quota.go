package auth

import (
	"math"
	"sync"
	"time"
)

// Buckets are the token buckets of the principals' AppendBytesPerSecond
// quotas on one server. They are safe for concurrent use. A bucket is made
// on a principal's first append and kept, one per principal name: the
// names come only from the auth file, so the buckets are as many as its
// principals (across reloads, as many as the names it ever had).
//
// The bucket is hand-written rather than golang.org/x/time/rate's Limiter:
// TakeAppend must either take n bytes or say when they will be there,
// without taking them, which a Limiter does only by reserving and then
// cancelling the reservation.
type Buckets struct {
	mu sync.Mutex
	m  map[string]*bucket // by principal name
}

// NewBuckets returns buckets that are all full.
func NewBuckets() *Buckets {
	return &Buckets{m: make(map[string]*bucket)}
}

// TakeAppend takes n bytes from p's append bucket. It is ok, and takes
// nothing, when p is nil or has no AppendBytesPerSecond quota, or n <= 0.
// Otherwise it is ok if the bucket holds n bytes, which it takes; if it
// does not, it takes nothing and retryAfter is how long the bucket takes
// to refill to n bytes, if nothing else is taken meanwhile. When n exceeds
// the bucket's burst, it is never ok and retryAfter is 0: the caller
// should report the request as larger than the principal's burst
// (AppendBurstBytes, or else one second's worth) rather than ask to retry.
//
// When a new policy changes p's quota, p's bucket takes the new rate and
// burst and keeps its bytes, up to the new burst.
func (b *Buckets) TakeAppend(p *Principal, n int64) (ok bool, retryAfter time.Duration) {
	if p == nil || p.Quotas.AppendBytesPerSecond <= 0 || n <= 0 {
		return true, 0
	}
	rate, burst := p.Quotas.AppendBytesPerSecond, p.Quotas.AppendBurstBytes
	if burst <= 0 {
		burst = rate
	}
	if n > burst {
		return false, 0
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.m[p.Name]
	if k == nil {
		k = &bucket{bytes: float64(burst), last: now}
		b.m[p.Name] = k
	}
	k.rate, k.burst = float64(rate), float64(burst)
	return k.take(now, float64(n))
}

// bucket holds up to burst bytes, refilled at rate bytes per second.
type bucket struct {
	rate, burst float64
	bytes       float64   // held at last
	last        time.Time // when bytes was computed
}

func (k *bucket) take(now time.Time, n float64) (bool, time.Duration) {
	if d := now.Sub(k.last); d > 0 {
		k.bytes += d.Seconds() * k.rate
		k.last = now
	}
	k.bytes = min(k.bytes, k.burst)
	// A millionth of a byte of slack absorbs the rounding of the refill,
	// so that waiting retryAfter is enough.
	if k.bytes >= n-1e-6 {
		k.bytes = max(k.bytes-n, 0)
		return true, 0
	}
	wait := math.Ceil((n - k.bytes) / k.rate * float64(time.Second))
	return false, time.Duration(wait)
}
