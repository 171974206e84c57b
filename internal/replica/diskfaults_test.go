package replica

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/vfs"
)

// flipInFragment flips a bit at byte at of fragment k's data in the journal
// of id under root, whose fragments are want, and returns the position of
// fragment k's frame.
func flipInFragment(t *testing.T, root string, id SegmentID, want [][]byte, k, at int) int64 {
	t.Helper()
	frame := int64(headerBytes)
	for _, w := range want[:k] {
		frame += frameBytes(len(w))
	}
	f, err := os.OpenFile(root+journalPath(testDir, id), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pos := frame + frameHeaderBytes + int64(at)
	b := []byte{0}
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x04
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
	return frame
}

// TestReadChecksFrames flips a bit in a fragment read from the journal, of
// a sealed segment and of an unsealed one whose fragment has left memory:
// Read, of the whole fragment or of a part that does not hold the flipped
// byte, fails with a *CorruptError at the frame and returns no bytes, so
// that the reader goes to another replica; the other fragments read as
// written.
func TestReadChecksFrames(t *testing.T) {
	root := t.TempDir()
	s := open(t, chroot{vfs.OS, root}, func(o *Options) { o.MemBytes = 1500 })
	sealed, unsealed := frags(6, 300), frags(8, 400)
	for i, f := range sealed {
		mustAdd(t, s, segA, 1, uint64(i), f) // one at a time: little memory
	}
	if err := s.Seal(segA, uint64(len(sealed))); err != nil {
		t.Fatal(err)
	}
	for i, f := range unsealed {
		mustAdd(t, s, segB, 1, uint64(i), f)
	}
	if in := info(t, s, segB); in.MemBytes >= in.Bytes {
		t.Fatalf("segment B is all in memory: %+v", in)
	}
	for _, tc := range []struct {
		name string
		id   SegmentID
		want [][]byte
	}{
		{"sealed", segA, sealed},
		{"unsealed, out of memory", segB, unsealed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const k = 0 // the oldest fragment leaves memory first
			frame := flipInFragment(t, root, tc.id, tc.want, k, 200)
			for _, r := range []struct{ off, n int }{{0, len(tc.want[k])}, {0, 1000}, {10, 5}, {250, 50}} {
				p := make([]byte, r.n)
				n, err := s.Read(tc.id, k, int64(r.off), p)
				ce, ok := errors.AsType[*CorruptError](err)
				if n != 0 || !ok || !errors.Is(err, rpcerr.ErrJournalCorrupt) || ce.Pos != frame || ce.Path != journalPath(testDir, tc.id) {
					t.Fatalf("Read [%d, %d) of the damaged fragment: %d bytes, %v; want a *CorruptError at byte %d", r.off, r.off+r.n, n, err, frame)
				}
			}
			for i := k + 1; i < len(tc.want); i++ {
				if got := readAll(t, s, tc.id, uint64(i)); !bytes.Equal(got, tc.want[i]) {
					t.Fatalf("fragment %d reads other bytes", i)
				}
			}
		})
	}
}

// flipVia flips a bit at byte pos of the file at path, through fs (which
// may have no WriteAt: the file is cut there and its rest written again).
func flipVia(t *testing.T, fs vfs.FS, path string, pos int64) {
	t.Helper()
	b, err := vfs.ReadFile(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	b[pos] ^= 0x04
	f, err := fs.OpenRW(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(pos); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b[pos:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestNodeReadOfDamagedFragment reads a damaged fragment through a Node, in
// process and over gRPC: the error says rpcerr.ErrJournalCorrupt on both, so that the
// log's owner knows the copy is damaged (and says so) as it reads another
// replica.
func TestNodeReadOfDamagedFragment(t *testing.T) {
	forEachNode(t, func(t *testing.T, env *nodeEnv) {
		want := frags(3, 200)
		addAll(t, env.store, segA, 1, 0, want)
		if err := env.store.Seal(segA, 3); err != nil {
			t.Fatal(err)
		}
		// Offloaded, it leaves memory: it is read from the journal.
		if err := env.store.Offload(t.Context(), segA, one("a", "b", "c")); err != nil {
			t.Fatal(err)
		}
		path := journalPath(testDir, segA)
		frame := int64(headerBytes) + frameBytes(len(want[0]))
		flipVia(t, env.store.fs, path, frame+frameHeaderBytes+100)
		p := make([]byte, 1000)
		n, err := env.node.Read(t.Context(), segA, 1, 0, p)
		if n != 0 || !errors.Is(err, rpcerr.ErrJournalCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("Read of the damaged fragment: %d bytes, %v; want rpcerr.ErrJournalCorrupt naming %s", n, err, path)
		}
		if sizes, err := env.node.List(t.Context(), segA); err != nil || len(sizes) != 3 {
			t.Fatalf("List after a damaged read: %v, %v", sizes, err)
		}
		if got := readAll(t, env.store, segA, 2); !bytes.Equal(got, want[2]) {
			t.Fatal("fragment 2 reads other bytes")
		}
	})
}
