package objlog

import "sync/atomic"

// CacheBudget bounds the acknowledged fragments that several logs keep in
// memory for their tail readers, together: a log that publishes a fragment
// while the total is over the limit leaves out its own oldest ones first,
// down to its newest. The total is then at most the limit plus a fragment
// per log. A nil CacheBudget bounds nothing beyond each log's CacheBytes.
// It is safe for concurrent use.
type CacheBudget struct {
	limit int64
	used  atomic.Int64
}

// NewCacheBudget returns a CacheBudget of limit bytes.
func NewCacheBudget(limit int64) *CacheBudget { return &CacheBudget{limit: limit} }

// add counts n bytes more (fewer, when negative).
func (b *CacheBudget) add(n int64) {
	if b != nil {
		b.used.Add(n)
	}
}

// over reports whether the logs together keep more than the limit.
func (b *CacheBudget) over() bool { return b != nil && b.used.Load() > b.limit }

// Used is the bytes the logs keep together.
func (b *CacheBudget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}
