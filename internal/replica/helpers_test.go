package replica

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/vfs"
)

const testDir = "/data/replica"

// open opens a Store in testDir of fs, closed at the end of the test.
func open(t *testing.T, fs vfs.FS, opts ...func(*Options)) *Store {
	t.Helper()
	s, err := openErr(fs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openErr(fs vfs.FS, opts ...func(*Options)) (*Store, error) {
	o := Options{FS: fs, Dir: testDir, Bucket: blob.NewMem()}
	for _, f := range opts {
		f(&o)
	}
	return Open(o)
}

// reopen closes s and opens the store again on the same FS.
func reopen(t *testing.T, s *Store, opts ...func(*Options)) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return open(t, s.fs, opts...)
}

// add adds a fragment and waits for it to be durable.
func add(s *Store, id SegmentID, epoch, n uint64, data []byte) error {
	ch := make(chan error, 1)
	if err := s.Add(id, epoch, n, data, FrameSum(n, data), func(err error) { ch <- err }); err != nil {
		return err
	}
	return <-ch
}

func mustAdd(t *testing.T, s *Store, id SegmentID, epoch, n uint64, data []byte) {
	t.Helper()
	if err := add(s, id, epoch, n, data); err != nil {
		t.Fatalf("add %d to %v at epoch %d: %v", n, id, epoch, err)
	}
}

// addAll pipelines frags as fragments from, from+1, ... and waits for all.
func addAll(t *testing.T, s *Store, id SegmentID, epoch, from uint64, frags [][]byte) {
	t.Helper()
	ch := make(chan error, len(frags))
	for i, f := range frags {
		if err := s.Add(id, epoch, from+uint64(i), f, FrameSum(from+uint64(i), f), func(err error) { ch <- err }); err != nil {
			t.Fatalf("add %d: %v", from+uint64(i), err)
		}
	}
	for range frags {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

// fragment returns test data: n's bytes, size long.
func frag(n, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(n*31 + i*7)
	}
	return b
}

func frags(count, size int) [][]byte {
	out := make([][]byte, count)
	for i := range out {
		out[i] = frag(i, size+i*37)
	}
	return out
}

// checkFrags checks that seg holds exactly want, through List and Read.
func checkFrags(t *testing.T, s *Store, id SegmentID, want [][]byte) {
	t.Helper()
	sizes, err := s.List(id)
	if err != nil {
		t.Fatalf("List %v: %v", id, err)
	}
	if len(sizes) != len(want) {
		t.Fatalf("List %v: %d fragments, want %d", id, len(sizes), len(want))
	}
	for n, w := range want {
		if sizes[n] != int64(len(w)) {
			t.Errorf("fragment %d: size %d, want %d", n, sizes[n], len(w))
		}
		if got := readAll(t, s, id, uint64(n)); !bytes.Equal(got, w) {
			t.Errorf("fragment %d of %v differs", n, id)
		}
	}
}

func readAll(t *testing.T, s *Store, id SegmentID, n uint64) []byte {
	t.Helper()
	b, err := readFragment(s, id, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readFragment reads a whole fragment, checking the io.ReaderAt contract
// at its end.
func readFragment(s *Store, id SegmentID, n uint64) ([]byte, error) {
	var out []byte
	p := make([]byte, 100)
	for off := int64(0); ; {
		k, err := s.Read(id, n, off, p)
		out = append(out, p[:k]...)
		off += int64(k)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if k != len(p) {
			return nil, fmt.Errorf("short read of %d bytes without EOF", k)
		}
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

func info(t *testing.T, s *Store, id SegmentID) SegmentInfo {
	t.Helper()
	for _, i := range s.Segments() {
		if i.ID == id {
			return i
		}
	}
	t.Fatalf("no segment %v", id)
	return SegmentInfo{}
}

// testNonce is the nonce of the journals tests write by hand.
const testNonce = 0x5eed_7e57

// appendFrame appends fragment n framed to dst, as the journal of nonce
// holds it.
func appendFrame(dst []byte, nonce, n uint64, data []byte) []byte {
	var h [frameHeaderBytes]byte
	putFrameHeader(&h, nonce, n, len(data), FrameSum(n, data))
	return append(append(dst, h[:]...), data...)
}

// journalNonce returns the nonce in the header of the journal at path.
func journalNonce(t *testing.T, fs vfs.FS, path string) uint64 {
	t.Helper()
	h, err := decodeHeader(readFile(t, fs, path))
	if err != nil {
		t.Fatalf("header of %s: %v", path, err)
	}
	return h.nonce
}

// send sends fragment n with its checksum.
func send(s Sender, n uint64, data []byte) error { return s.Send(n, data, FrameSum(n, data)) }

// appendClientFrame appends to b an add connection's frame of kind for
// fragment n with data, and the fragment's checksum.
func appendClientFrame(b []byte, kind byte, n uint64, data string) []byte {
	var h [clientFrameBytes]byte
	var sum uint32
	if kind == kindFragment {
		sum = FrameSum(n, []byte(data))
	}
	putClientFrame(&h, kind, n, len(data), sum)
	return append(append(b, h[:]...), data...)
}
