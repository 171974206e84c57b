package replica

import (
	"slices"
	"sync"
)

// minPooledBytes is the smallest buffer a bufferPool keeps. Smaller
// fragments cost the allocator little; what recycling saves is the page
// faults and zeroing of fresh memory for large ones.
const minPooledBytes = 64 << 10

// bufferPool recycles the buffers that fragments received over the network
// are read into (Store.Buffer). A replica under load receives fragments as
// fast as earlier ones leave memory; without recycling, each new fragment
// takes memory the runtime has just returned to the kernel, which faults it
// in and zeroes it again, page by page.
type bufferPool struct {
	mu    sync.Mutex
	free  [][]byte
	bytes int64 // capacity of free
	max   int64
}

// get returns a buffer of n bytes: a free one at least n and at most 2n
// long, the most recently freed first, or a new one with an eighth more
// capacity, so that it fits the slightly larger fragments that follow.
func (p *bufferPool) get(n int) []byte {
	if n < minPooledBytes {
		return make([]byte, n)
	}
	p.mu.Lock()
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; cap(b) >= n && cap(b) <= 2*n {
			p.free = slices.Delete(p.free, i, i+1)
			p.bytes -= int64(cap(b))
			p.mu.Unlock()
			return b[:n]
		}
	}
	p.mu.Unlock()
	return make([]byte, n, n+n/8)
}

// put gives b back, unless it is small or the pool is full. No one may use
// b afterwards.
func (p *bufferPool) put(b []byte) {
	c := int64(cap(b))
	if c < minPooledBytes {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bytes+c > p.max {
		return
	}
	p.free = append(p.free, b[:0])
	p.bytes += c
}

// pooled is a fragment's data taken from the pool, with the count of its
// holders: the fragment while it is in memory, and each Read and offload
// using the bytes outside Store.mu. The last to let go gives the buffer
// back. refs is guarded by Store.mu.
type pooled struct {
	b    []byte
	refs int
}

// hold counts one more holder of f's pooled buffer, if it has one, with
// s.mu held, and returns what release takes.
func (f fragment) hold() *pooled {
	if f.pool != nil {
		f.pool.refs++
	}
	return f.pool
}

// release lets go of a hold on b, with s.mu held; nil is no hold.
func (s *Store) release(b *pooled) {
	if b == nil {
		return
	}
	if b.refs--; b.refs == 0 {
		s.bufs.put(b.b)
		b.b = nil
	}
}

// releaseAll is release for each of bs, taking s.mu.
func (s *Store) releaseAll(bs ...*pooled) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bs {
		s.release(b)
	}
}
