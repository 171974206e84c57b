package replica

import (
	"bytes"
	"context"
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/vfs"
)

const bigFrag = minPooledBytes + 1000 // pooled

func TestBufferPool(t *testing.T) {
	p := bufferPool{max: 3 * bigFrag}
	b := p.get(bigFrag)
	if len(b) != bigFrag || cap(b) < bigFrag+bigFrag/8 {
		t.Fatalf("get(%d): len %d cap %d, want the length and an eighth more capacity", bigFrag, len(b), cap(b))
	}
	p.put(b)
	if got := p.get(bigFrag - 10); &got[0] != &b[0] || len(got) != bigFrag-10 {
		t.Errorf("get after put: a new buffer, or length %d", len(got))
	}
	p.put(b)
	if got := p.get(cap(b)/2 - 1); &got[0] == &b[0] {
		t.Errorf("get of under half a free buffer's size reused it")
	}
	if got := p.get(cap(b) + 1); &got[0] == &b[0] {
		t.Errorf("get of more than a free buffer's capacity reused it")
	}
	small := p.get(minPooledBytes - 1)
	p.put(small)
	if len(p.free) != 1 {
		t.Errorf("a buffer under minPooledBytes was kept: %d free", len(p.free))
	}
	for range 4 {
		p.put(make([]byte, bigFrag))
	}
	// b, and one more of bigFrag: a second would take it over max.
	if p.bytes != int64(cap(b)+bigFrag) || len(p.free) != 2 {
		t.Errorf("the pool holds %d buffers, %d bytes; its bound is %d", len(p.free), p.bytes, p.max)
	}
}

// addBuffer is add through Buffer and AddBuffer, and returns the buffer.
func addBuffer(t *testing.T, s *Store, id SegmentID, n uint64, data []byte) []byte {
	t.Helper()
	b := s.Buffer(len(data))
	copy(b, data)
	ch := make(chan error, 1)
	if err := s.AddBuffer(id, 1, n, b, FrameSum(n, data), func(err error) { ch <- err }); err != nil {
		t.Fatalf("AddBuffer %d to %v: %v", n, id, err)
	}
	if err := <-ch; err != nil {
		t.Fatalf("AddBuffer %d to %v: %v", n, id, err)
	}
	return b
}

// A fragment's buffer is reused once the fragment has left memory, and the
// fragment is then read from the journal, intact.
func TestAddBufferReuses(t *testing.T) {
	// Room for four fragments in memory (frags grows them), and free buffers.
	s := open(t, vfs.NewMem(), func(o *Options) { o.MemBytes = 5 * bigFrag })
	want := frags(6, bigFrag)
	first := addBuffer(t, s, segA, 0, want[0])
	for n := 1; n < 5; n++ {
		addBuffer(t, s, segA, uint64(n), want[n]) // the last: 0 leaves memory
	}
	if last := addBuffer(t, s, segA, 5, want[5]); &last[0] != &first[0] {
		t.Errorf("the sixth fragment did not reuse the buffer of the first, which left memory")
	}
	checkFrags(t, s, segA, want)

	// A fragment already stored: its buffer is free at once.
	dup := s.Buffer(len(want[5]))
	copy(dup, want[5])
	if err := s.AddBuffer(segA, 1, 5, dup, FrameSum(5, want[5]), nil); err != nil {
		t.Fatal(err)
	}
	if again := s.Buffer(len(want[5])); &again[0] != &dup[0] {
		t.Errorf("the buffer of a fragment added twice was not reused")
	}

	// A dropped segment's fragments give theirs back too.
	before := s.bufs.bytes
	if err := s.Drop(segA); err != nil {
		t.Fatal(err)
	}
	if s.bufs.bytes <= before {
		t.Errorf("Drop gave back no buffer: the pool held %d bytes before, %d after", before, s.bufs.bytes)
	}
}

// gateBucket holds every PutIfAbsent until open is closed.
type gateBucket struct {
	blob.Bucket
	entered chan struct{}
	open    chan struct{}
}

func (g gateBucket) PutIfAbsent(ctx context.Context, key string, data ...[]byte) error {
	g.entered <- struct{}{}
	<-g.open
	return g.Bucket.PutIfAbsent(ctx, key, data...)
}

// An offload uploads from fragments' buffers after releasing the Store's
// lock: fragments that leave memory meanwhile must not have their buffers
// reused, or the object would hold the new fragments' bytes.
func TestOffloadHoldsBuffers(t *testing.T) {
	bucket := gateBucket{blob.NewMem(), make(chan struct{}, 1), make(chan struct{})}
	s := open(t, vfs.NewMem(), func(o *Options) {
		o.Bucket = bucket
		o.MemBytes = 5 * bigFrag
	})
	want := frags(2, bigFrag)
	for n, f := range want {
		addBuffer(t, s, segA, uint64(n), f)
	}
	if err := s.Seal(segA, 2); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Offload(t.Context(), segA, []Object{{"a", 0, 2}}) }()
	<-bucket.entered
	// segA's fragments, sealed, leave memory to make room for segB's.
	for n := range 4 {
		addBuffer(t, s, segB, uint64(n), bytes.Repeat([]byte{0xee}, bigFrag))
	}
	if segA := info(t, s, segA); segA.MemBytes != 0 {
		t.Fatalf("segA still holds %d bytes in memory", segA.MemBytes)
	}
	close(bucket.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, err := bucket.Get(t.Context(), "a"); err != nil || !bytes.Equal(got, bytes.Join(want, nil)) {
		t.Errorf("the object: %v, or other bytes than were added", err)
	}
}

// A read copies from a fragment's buffer after releasing the Store's lock:
// a fragment that leaves memory meanwhile must not have its buffer reused
// before the read is done with it.
func TestReadHoldsBuffer(t *testing.T) {
	s := open(t, vfs.NewMem(), func(o *Options) { o.MemBytes = 5 * bigFrag })
	want := frag(0, bigFrag)
	addBuffer(t, s, segA, 0, want)
	if err := s.Seal(segA, 1); err != nil { // to leave memory first
		t.Fatal(err)
	}
	testHookRead = func() {
		testHookRead = nil
		// Fragment 0 leaves memory to make room for the fifth; the
		// sixth would take its buffer.
		for n := range 6 {
			addBuffer(t, s, segB, uint64(n), bytes.Repeat([]byte{0xee}, bigFrag))
		}
		if segA := info(t, s, segA); segA.MemBytes != 0 {
			t.Fatalf("segA still holds %d bytes in memory", segA.MemBytes)
		}
	}
	defer func() { testHookRead = nil }()
	p := make([]byte, bigFrag)
	if k, err := s.Read(segA, 0, 0, p); err != nil || k != bigFrag {
		t.Fatalf("Read: %d bytes, %v", k, err)
	}
	if !bytes.Equal(p, want) {
		t.Errorf("Read returned other bytes than were added")
	}
}
