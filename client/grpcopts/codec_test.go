package grpcopts

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/client/ternpb"
)

func TestTieredPool(t *testing.T) {
	p := new(tieredPool)
	for _, c := range []struct{ size, cap int }{{0, 1}, {1, 1}, {3, 4}, {4096, 4096}, {4097, 8192}, {1<<20 + 70<<10, 2 << 20}, {1<<26 + 1, 1<<26 + 1}} {
		b := p.Get(c.size)
		if len(*b) != c.size || cap(*b) != c.cap {
			t.Errorf("Get(%d): len %d cap %d, want cap %d", c.size, len(*b), cap(*b), c.cap)
		}
		p.Put(b)
	}
	// A buffer that is not a power of two is not kept: a Get of its
	// nominal tier must not find one too small.
	odd := make([]byte, 6000)
	p.Put(&odd)
	for range 3 {
		if g := p.Get(8192); cap(*g) < 8192 {
			t.Fatalf("Get(8192) returned a buffer of capacity %d", cap(*g))
		}
	}
}

// A message goes through the codec unchanged, whether it arrives in one
// buffer or in several, large or small.
func TestCodecRoundTrip(t *testing.T) {
	for _, n := range []int{10, 1 << 20} {
		in := &ternpb.Entry{Offset: 7, Payload: bytes.Repeat([]byte{0xab}, n)}
		enc, err := codec{}.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		wire := enc.Materialize()
		enc.Free()
		for _, parts := range []int{1, 3} {
			out := new(ternpb.Entry)
			if err := (codec{}).Unmarshal(split(wire, parts), out); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(in, out) {
				t.Errorf("%d bytes in %d parts: decoded a different message", n, parts)
			}
		}
	}
	if _, err := (codec{}).Marshal("not a message"); err == nil {
		t.Error("a value that is not a message was encoded")
	}
}
