package replica

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/vfs"
)

var (
	segA = SegmentID{Log: 1, Seq: 1}
	segB = SegmentID{Log: 1, Seq: 2}
	segC = SegmentID{Log: 2, Seq: 7}
)

func TestAddListRead(t *testing.T) {
	for _, fs := range []struct {
		name string
		fs   func(t *testing.T) vfs.FS
	}{
		{"Mem", func(*testing.T) vfs.FS { return vfs.NewMem() }},
		{"OS", func(t *testing.T) vfs.FS { return chroot{vfs.OS, t.TempDir()} }},
	} {
		t.Run(fs.name, func(t *testing.T) {
			s := open(t, fs.fs(t))
			want := frags(20, 300)
			addAll(t, s, segA, 1, 0, want)
			mustAdd(t, s, segB, 1, 0, []byte{})
			checkFrags(t, s, segA, want)
			checkFrags(t, s, segB, [][]byte{{}})

			p := make([]byte, 10)
			if n, err := s.Read(segA, 0, 295, p); n != 5 || err != io.EOF || !bytes.Equal(p[:5], want[0][295:]) {
				t.Errorf("Read over the end = %d, %v", n, err)
			}
			if n, err := s.Read(segA, 0, 300, p); n != 0 || err != io.EOF {
				t.Errorf("Read at the end = %d, %v", n, err)
			}
			_, err := s.Read(segA, 20, 0, p)
			wantErr(t, "Read beyond the count", err, rpcerr.ErrSegmentNotFound)
			_, err = s.Read(segC, 0, 0, p)
			wantErr(t, "Read of an unknown segment", err, rpcerr.ErrSegmentNotFound)
			_, err = s.List(segC)
			wantErr(t, "List of an unknown segment", err, rpcerr.ErrSegmentNotFound)

			s = reopen(t, s)
			checkFrags(t, s, segA, want)
			checkFrags(t, s, segB, [][]byte{{}})
			addAll(t, s, segA, 1, 20, frags(2, 10))
			if got := info(t, s, segA); got.Count != 22 || got.Epoch != 1 || got.Sealed {
				t.Errorf("Segments: %+v", got)
			}
		})
	}
}

// chroot runs an FS under a directory, so that tests on the OS can use the
// same absolute paths as on MemFS.
type chroot struct {
	vfs.FS
	root string
}

func (c chroot) p(name string) string                  { return c.root + name }
func (c chroot) Create(name string) (vfs.File, error)  { return c.FS.Create(c.p(name)) }
func (c chroot) OpenRW(name string) (vfs.File, error)  { return c.FS.OpenRW(c.p(name)) }
func (c chroot) Reuse(name string) (vfs.File, error)   { return c.FS.Reuse(c.p(name)) }
func (c chroot) Open(name string) (vfs.File, error)    { return c.FS.Open(c.p(name)) }
func (c chroot) Remove(name string) error              { return c.FS.Remove(c.p(name)) }
func (c chroot) RemoveAll(name string) error           { return c.FS.RemoveAll(c.p(name)) }
func (c chroot) Rename(a, b string) error              { return c.FS.Rename(c.p(a), c.p(b)) }
func (c chroot) MkdirAll(dir string) error             { return c.FS.MkdirAll(c.p(dir)) }
func (c chroot) List(dir string) ([]string, error)     { return c.FS.List(c.p(dir)) }
func (c chroot) Stat(name string) (os.FileInfo, error) { return c.FS.Stat(c.p(name)) }
func (c chroot) SyncDir(dir string) error              { return c.FS.SyncDir(c.p(dir)) }
func (c chroot) Lock(name string) (io.Closer, error)   { return c.FS.Lock(c.p(name)) }

func TestPrefix(t *testing.T) {
	s := open(t, vfs.NewMem())
	wantErr(t, "first add at 1", add(s, segA, 1, 1, []byte("x")), rpcerr.ErrFragmentGap)
	if got := s.Segments(); len(got) != 0 {
		t.Errorf("a refused add created %v", got)
	}
	mustAdd(t, s, segA, 1, 0, []byte("zero"))
	wantErr(t, "add at 2 after 0", add(s, segA, 1, 2, []byte("two")), rpcerr.ErrFragmentGap)
	mustAdd(t, s, segA, 1, 0, []byte("zero"))
	wantErr(t, "add of 0 with other bytes", add(s, segA, 1, 0, []byte("nought")), rpcerr.ErrFragmentMismatch)
	mustAdd(t, s, segA, 1, 1, []byte("one"))
	// Re-adding queued fragments is idempotent too, done in order.
	ch := make(chan uint64, 3)
	for _, n := range []uint64{2, 1, 2} {
		data := [][]byte{nil, []byte("one"), []byte("two")}[n]
		if err := s.Add(segA, 1, n, data, FrameSum(n, data), func(err error) {
			if err != nil {
				t.Error(err)
			}
			ch <- n
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []uint64{2, 1, 2} {
		if got := <-ch; got != want {
			t.Errorf("done for %d, want %d", got, want)
		}
	}
	checkFrags(t, s, segA, [][]byte{[]byte("zero"), []byte("one"), []byte("two")})
}

func TestFence(t *testing.T) {
	s := open(t, vfs.NewMem())
	addAll(t, s, segA, 1, 0, frags(2, 10))
	if count, err := s.Fence(segA, 2); count != 2 || err != nil {
		t.Fatalf("Fence = %d, %v; want 2", count, err)
	}
	wantErr(t, "add below the fence", add(s, segA, 1, 2, []byte("x")), rpcerr.ErrSegmentFenced)
	wantErr(t, "re-add below the fence", add(s, segA, 1, 0, frag(0, 10)), rpcerr.ErrSegmentFenced)
	_, err := s.Fence(segA, 1)
	wantErr(t, "Fence below the fence", err, rpcerr.ErrSegmentFenced)
	if count, err := s.Fence(segA, 2); count != 2 || err != nil {
		t.Fatalf("Fence again = %d, %v; want 2", count, err)
	}
	mustAdd(t, s, segA, 2, 2, []byte("copied"))
	mustAdd(t, s, segA, 3, 3, []byte("newer"))

	// Fencing an unknown segment creates it empty.
	if count, err := s.Fence(segC, 5); count != 0 || err != nil {
		t.Fatalf("Fence of a new segment = %d, %v", count, err)
	}
	if sizes, err := s.List(segC); len(sizes) != 0 || err != nil {
		t.Errorf("List of a fenced new segment = %v, %v", sizes, err)
	}

	s = reopen(t, s)
	wantErr(t, "add below the fence after reopening", add(s, segA, 1, 4, []byte("x")), rpcerr.ErrSegmentFenced)
	wantErr(t, "add below the fence of a new segment", add(s, segC, 4, 0, []byte("x")), rpcerr.ErrSegmentFenced)
	_, err = s.Fence(segC, 4)
	wantErr(t, "Fence below after reopening", err, rpcerr.ErrSegmentFenced)
	if got := info(t, s, segA); got.Epoch != 2 || got.Count != 4 {
		t.Errorf("after reopening: %+v", got)
	}
	mustAdd(t, s, segC, 5, 0, []byte("x"))
}

func TestFirstAddEpochPersists(t *testing.T) {
	s := open(t, vfs.NewMem())
	mustAdd(t, s, segA, 5, 0, []byte("a"))
	// A fence-created segment takes the first add's higher epoch.
	if _, err := s.Fence(segB, 3); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, segB, 6, 0, []byte("b"))
	// Only the first add fences.
	mustAdd(t, s, segA, 7, 1, []byte("a"))
	s = reopen(t, s)
	wantErr(t, "add below the first add's epoch", add(s, segA, 4, 2, []byte("x")), rpcerr.ErrSegmentFenced)
	wantErr(t, "add below the first add's raised epoch", add(s, segB, 5, 1, []byte("x")), rpcerr.ErrSegmentFenced)
	mustAdd(t, s, segA, 6, 2, []byte("x"))
}

// blockingFS holds every Sync until release is closed.
func blockingFS(release <-chan struct{}) vfs.FS {
	return vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, _ string) error {
		if op == vfs.OpSync {
			<-release
		}
		return nil
	})
}

func TestFenceWaitsForQueuedAdds(t *testing.T) {
	release := make(chan struct{})
	s := open(t, blockingFS(release))
	added := make(chan error, 1)
	if err := s.Add(segA, 1, 0, []byte("x"), FrameSum(0, []byte("x")), func(err error) { added <- err }); err != nil {
		t.Fatal(err)
	}
	fenced := make(chan uint64)
	go func() {
		count, err := s.Fence(segA, 2)
		if err != nil {
			t.Error(err)
		}
		fenced <- count
	}()
	close(release)
	count := <-fenced
	select {
	case err := <-added:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("Fence returned before the add queued before it was durable")
	}
	if count != 1 {
		t.Errorf("Fence = %d, want 1", count)
	}
}

func TestSeal(t *testing.T) {
	s := open(t, vfs.NewMem())
	want := frags(5, 700)
	addAll(t, s, segA, 1, 0, want)
	wantErr(t, "Seal beyond the count", s.Seal(segA, 6), rpcerr.ErrInvalid)
	if err := s.Seal(segA, 3); err != nil {
		t.Fatal(err)
	}
	checkFrags(t, s, segA, want[:3])
	wantErr(t, "add after Seal", add(s, segA, 1, 3, want[3]), rpcerr.ErrSegmentSealed)
	wantErr(t, "re-add after Seal", add(s, segA, 1, 0, want[0]), rpcerr.ErrSegmentSealed)
	if err := s.Seal(segA, 3); err != nil {
		t.Errorf("Seal again: %v", err)
	}
	wantErr(t, "Seal at another count", s.Seal(segA, 2), rpcerr.ErrSegmentSealed)
	// The fragments kept stay in memory, for the offload.
	if got := info(t, s, segA); !got.Sealed || got.MemBytes != 700+737+774 || got.Count != 3 {
		t.Errorf("after Seal: %+v", got)
	}
	fi, err := s.fs.Stat(journalPath(testDir, segA))
	if err != nil {
		t.Fatal(err)
	}
	if wantSize := headerBytes + frameBytes(700) + frameBytes(737) + frameBytes(774); fi.Size() != wantSize {
		t.Errorf("journal of %d bytes after Seal, want %d", fi.Size(), wantSize)
	}

	// Seal of an empty segment, and a fence of a sealed one.
	if _, err := s.Fence(segB, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(segB, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fence(segA, 9); err != nil {
		t.Fatal(err)
	}

	s = reopen(t, s)
	checkFrags(t, s, segA, want[:3])
	wantErr(t, "add after reopening", add(s, segA, 9, 3, want[3]), rpcerr.ErrSegmentSealed)
	wantErr(t, "Seal at another count after reopening", s.Seal(segA, 4), rpcerr.ErrSegmentSealed)
	_, err = s.Fence(segA, 8)
	wantErr(t, "Fence of a sealed segment below its fence", err, rpcerr.ErrSegmentFenced)
	if got := info(t, s, segB); !got.Sealed || got.Count != 0 || got.Epoch != 4 {
		t.Errorf("empty sealed segment after reopening: %+v", got)
	}
}

// TestSealCutShort reopens a store whose seal persisted its state but did
// not truncate the journal.
func TestSealCutShort(t *testing.T) {
	fs := vfs.NewMem()
	s := open(t, fs)
	want := frags(4, 100)
	addAll(t, s, segA, 1, 0, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fs, statePath(testDir, segA), encodeState(segA, state{epoch: 1, sealed: true, count: 2}))
	s = open(t, fs)
	checkFrags(t, s, segA, want[:2])
	fi, err := fs.Stat(journalPath(testDir, segA))
	if err != nil {
		t.Fatal(err)
	}
	if wantSize := headerBytes + frameBytes(100) + frameBytes(137); fi.Size() != wantSize {
		t.Errorf("journal of %d bytes, want %d", fi.Size(), wantSize)
	}
}

func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLimits(t *testing.T) {
	t.Run("Memory", func(t *testing.T) {
		// Durable fragments leave memory to make room, and are read
		// from the journal.
		s := open(t, vfs.NewMem(), func(o *Options) { o.MemBytes = 1000 })
		mustAdd(t, s, segA, 1, 0, frag(0, 600))
		mustAdd(t, s, segA, 1, 1, frag(1, 600))
		mustAdd(t, s, segB, 1, 0, frag(2, 600))
		for _, seg := range s.Segments() {
			if want := map[SegmentID]int64{segA: 0, segB: 600}[seg.ID]; seg.MemBytes != want {
				t.Errorf("segment %v holds %d bytes in memory, want %d", seg.ID, seg.MemBytes, want)
			}
		}
		checkFrags(t, s, segA, [][]byte{frag(0, 600), frag(1, 600)})

		// A sealed segment's fragments leave first, even if newer.
		s2 := open(t, vfs.NewMem(), func(o *Options) { o.MemBytes = 1000 })
		mustAdd(t, s2, segA, 1, 0, frag(0, 400))
		mustAdd(t, s2, segB, 1, 0, frag(1, 400))
		if err := s2.Seal(segB, 1); err != nil {
			t.Fatal(err)
		}
		mustAdd(t, s2, segA, 1, 1, frag(2, 400))
		for _, seg := range s2.Segments() {
			if want := map[SegmentID]int64{segA: 800, segB: 0}[seg.ID]; seg.MemBytes != want {
				t.Errorf("segment %v holds %d bytes in memory, want %d", seg.ID, seg.MemBytes, want)
			}
		}
		checkFrags(t, s2, segB, [][]byte{frag(1, 400)})

		// A re-add compares with the journal's copy.
		mustAdd(t, s, segA, 1, 0, frag(0, 600))
		wantErr(t, "re-add of a fragment out of memory, other bytes", add(s, segA, 1, 0, frag(9, 600)), rpcerr.ErrFragmentMismatch)

		// Fragments not yet durable stay, and past the limit an add is
		// refused until the disk catches up.
		release := make(chan struct{})
		s = open(t, blockingFS(release), func(o *Options) { o.MemBytes = 1000 })
		done := make(chan error, 2)
		if err := s.Add(segA, 1, 0, frag(0, 600), FrameSum(0, frag(0, 600)), func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "add over the limit", s.Add(segA, 1, 1, frag(1, 600), FrameSum(1, frag(1, 600)), nil), rpcerr.ErrReplicaFull)
		wantErr(t, "new segment over the limit", s.Add(segB, 1, 0, frag(1, 600), FrameSum(0, frag(1, 600)), nil), rpcerr.ErrReplicaFull)
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		mustAdd(t, s, segA, 1, 1, frag(1, 600))
		checkFrags(t, s, segA, [][]byte{frag(0, 600), frag(1, 600)})

		// An empty fragment re-added before its journal exists.
		release = make(chan struct{})
		s = open(t, blockingFS(release))
		for range 2 {
			if err := s.Add(segA, 1, 0, nil, FrameSum(0, nil), func(err error) { done <- err }); err != nil {
				t.Fatal(err)
			}
		}
		close(release)
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("Disk", func(t *testing.T) {
		limit := int64(2*headerBytes + 3*frameBytes(100))
		s := open(t, vfs.NewMem(), func(o *Options) { o.DiskBytes = limit })
		addAll(t, s, segA, 1, 0, frags(3, 100)[:1])
		mustAdd(t, s, segA, 1, 1, frag(1, 100))
		mustAdd(t, s, segB, 1, 0, frag(2, 100))
		wantErr(t, "add over the limit", add(s, segB, 1, 1, frag(3, 100)), rpcerr.ErrReplicaFull)
		if err := s.Seal(segA, 1); err != nil { // cuts fragment 1
			t.Fatal(err)
		}
		mustAdd(t, s, segB, 1, 1, frag(3, 100))
		wantErr(t, "add over the limit", add(s, segB, 1, 2, frag(4, 100)), rpcerr.ErrReplicaFull)
		if err := s.Drop(segA); err != nil {
			t.Fatal(err)
		}
		mustAdd(t, s, segB, 1, 2, frag(4, 100))
	})
}

// one makes an object of each fragment.
func one(keys ...string) []Object {
	objs := make([]Object, len(keys))
	for i, k := range keys {
		objs[i] = Object{Key: k, From: uint64(i), To: uint64(i + 1)}
	}
	return objs
}

func TestOffload(t *testing.T) {
	bucket := blob.NewMem()
	s := open(t, vfs.NewMem(), func(o *Options) { o.Bucket = bucket })
	ctx := t.Context()
	want := frags(6, 1000)
	addAll(t, s, segA, 1, 0, want)
	keys := []string{"1/1/0", "1/1/1", "1/1/2", "1/1/3", "1/1/4", "1/1/5"}
	wantErr(t, "Offload of an unsealed segment", s.Offload(ctx, segA, one(keys...)), rpcerr.ErrInvalid)
	if err := s.Seal(segA, 6); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Offload of too few fragments", s.Offload(ctx, segA, one(keys[:5]...)), rpcerr.ErrInvalid)
	wantErr(t, "Offload with a gap", s.Offload(ctx, segA, []Object{{"a", 0, 2}, {"b", 3, 6}}), rpcerr.ErrInvalid)
	wantErr(t, "Offload of an empty object", s.Offload(ctx, segA, []Object{{"a", 0, 0}, {"b", 0, 6}}), rpcerr.ErrInvalid)
	wantErr(t, "Offload of an unknown segment", s.Offload(ctx, segB, nil), rpcerr.ErrSegmentNotFound)
	// An earlier attempt stored some of them.
	if err := bucket.PutIfAbsent(ctx, keys[2], want[2]); err != nil {
		t.Fatal(err)
	}
	if err := s.Offload(ctx, segA, one(keys...)); err != nil {
		t.Fatal(err)
	}
	if got := info(t, s, segA); got.MemBytes != 0 {
		t.Errorf("after Offload the segment holds %d bytes in memory, want 0", got.MemBytes)
	}
	if err := s.Offload(ctx, segA, one(keys...)); err != nil {
		t.Fatalf("Offload again: %v", err)
	}
	for i, key := range keys {
		got, err := bucket.Get(ctx, key)
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Errorf("object %s: %v, or other bytes", key, err)
		}
	}
	// Fragments joined into objects.
	if err := s.Offload(ctx, segA, []Object{{"j/0", 0, 4}, {"j/4", 4, 6}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Object{{"j/0", 0, 4}, {"j/4", 4, 6}} {
		got, err := bucket.Get(ctx, o.Key)
		if err != nil || !bytes.Equal(got, bytes.Join(want[o.From:o.To], nil)) {
			t.Errorf("object %s: %v, or other bytes", o.Key, err)
		}
	}

	addAll(t, s, segB, 1, 0, want[:2])
	if err := s.Seal(segB, 2); err != nil {
		t.Fatal(err)
	}
	if err := bucket.PutIfAbsent(ctx, "1/2/1", []byte("someone else")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Offload over another object", s.Offload(ctx, segB, one("1/2/0", "1/2/1")), rpcerr.ErrFragmentMismatch)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	wantErr(t, "Offload with a cancelled context", s.Offload(cancelled, segB, one("1/2/0", "1/2/x")), context.Canceled)
}

// A replica writes the checksum the writer sent, without computing it
// again: a fragment damaged on its way (its bytes no longer match the sum)
// fails the check once it is read from the journal, rather than being
// served as good.
func TestAddKeepsTheWritersSum(t *testing.T) {
	s := open(t, vfs.NewMem(), func(o *Options) { o.MemBytes = 1000 })
	sent, damaged := frag(0, 400), frag(0, 400)
	damaged[7] ^= 0x10
	done := make(chan error, 1)
	if err := s.Add(segA, 1, 0, damaged, FrameSum(0, sent), func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Two more push fragment 0 out of memory.
	addAll(t, s, segA, 1, 1, [][]byte{frag(1, 400), frag(2, 400)})
	if got := info(t, s, segA); got.MemBytes != 800 {
		t.Fatalf("%d bytes in memory, want 800: fragment 0 is still there", got.MemBytes)
	}
	p := make([]byte, 400)
	_, err := s.Read(segA, 0, 0, p)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Pos != headerBytes {
		t.Errorf("Read of the damaged fragment: %v, want a *CorruptError at %d", err, headerBytes)
	}
	for n := 1; n <= 2; n++ {
		if got := readAll(t, s, segA, uint64(n)); !bytes.Equal(got, frag(n, 400)) {
			t.Errorf("fragment %d differs", n)
		}
	}
}

// TestOffloadChecksFrames offloads fragments shorter and longer than a frame
// header, joined into objects, from a journal on disk; then a bit flipped
// in a sealed fragment makes Offload fail with rpcerr.ErrJournalCorrupt and store nothing.
func TestOffloadChecksFrames(t *testing.T) {
	root := t.TempDir()
	bucket := blob.NewMem()
	s := open(t, chroot{vfs.OS, root}, func(o *Options) { o.Bucket = bucket })
	ctx := t.Context()
	var want [][]byte
	for i, size := range []int{1, 7, 19, 20, 21, 500, 3, 4096} {
		want = append(want, frag(i, size))
	}
	addAll(t, s, segA, 1, 0, want)
	if err := s.Seal(segA, uint64(len(want))); err != nil {
		t.Fatal(err)
	}
	// The first Offload takes the fragments from memory, the second from
	// the journal, since the first took them out of memory.
	for _, objs := range [][]Object{{{"a", 0, 1}, {"b", 1, 5}, {"c", 5, 8}}, {{"a2", 0, 3}, {"b2", 3, 8}}} {
		if err := s.Offload(ctx, segA, objs); err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			got, err := bucket.Get(ctx, o.Key)
			if err != nil || !bytes.Equal(got, bytes.Join(want[o.From:o.To], nil)) {
				t.Errorf("object %s: %v, or other bytes", o.Key, err)
			}
		}
	}

	f, err := os.OpenFile(root+journalPath(testDir, segA), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	pos := int64(headerBytes)
	for _, w := range want[:5] {
		pos += frameBytes(len(w))
	}
	pos += frameHeaderBytes + 100 // in fragment 5's data
	b := []byte{0}
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = s.Offload(ctx, segA, []Object{{"d", 0, 8}})
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, rpcerr.ErrJournalCorrupt) || ce.Pos != pos-frameHeaderBytes-100 {
		t.Fatalf("Offload of a flipped fragment: %v, want rpcerr.ErrJournalCorrupt at %d", err, pos-frameHeaderBytes-100)
	}
	if _, err := bucket.Get(ctx, "d"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("the flipped fragment was stored, or: %v", err)
	}
}

// TestOffloadFromMemory offloads a sealed segment whose journal is damaged
// while its fragments are still in memory: the objects hold what was added,
// taken from memory without reading the disk.
func TestOffloadFromMemory(t *testing.T) {
	bucket := blob.NewMem()
	s := open(t, vfs.NewMem(), func(o *Options) { o.Bucket = bucket })
	want := frags(4, 3000)
	addAll(t, s, segA, 1, 0, want)
	if err := s.Seal(segA, 4); err != nil {
		t.Fatal(err)
	}
	flipVia(t, s.fs, journalPath(testDir, segA), headerBytes+frameHeaderBytes+10)
	if err := s.Offload(t.Context(), segA, []Object{{"all", 0, 4}}); err != nil {
		t.Fatalf("Offload from memory: %v", err)
	}
	if got, err := bucket.Get(t.Context(), "all"); err != nil || !bytes.Equal(got, bytes.Join(want, nil)) {
		t.Errorf("the object: %v, or other bytes than were added", err)
	}
}

func TestDrop(t *testing.T) {
	s := open(t, vfs.NewMem())
	addAll(t, s, segA, 1, 0, frags(3, 100))
	if _, err := s.Fence(segA, 2); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, segB, 1, 0, []byte("b"))
	if err := s.Drop(segA); err != nil {
		t.Fatal(err)
	}
	_, err := s.List(segA)
	wantErr(t, "List after Drop", err, rpcerr.ErrSegmentNotFound)
	_, err = s.Read(segA, 0, 0, make([]byte, 1))
	wantErr(t, "Read after Drop", err, rpcerr.ErrSegmentNotFound)
	for _, path := range []string{journalPath(testDir, segA), statePath(testDir, segA)} {
		if _, err := s.fs.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Drop: %v", path, err)
		}
	}
	if err := s.Drop(segA); err != nil {
		t.Errorf("Drop again: %v", err)
	}
	if err := s.Drop(segC); err != nil {
		t.Errorf("Drop of an unknown segment: %v", err)
	}
	if got := info(t, s, segB); got.MemBytes != 1 {
		t.Errorf("segment B after dropping A: %+v", got)
	}
	s = reopen(t, s)
	_, err = s.List(segA)
	wantErr(t, "List after reopening", err, rpcerr.ErrSegmentNotFound)
	// The ID is free again, at any epoch.
	mustAdd(t, s, segA, 1, 0, []byte("again"))
	checkFrags(t, s, segA, [][]byte{[]byte("again")})
	checkFrags(t, s, segB, [][]byte{[]byte("b")})
}

// TestReuseJournal checks that a dropped segment's journal is written over
// by the next new one, and that the frames it held before cannot pass for
// the new journal's: not when the store reads it, nor when Open recovers
// it, even where the new frames fall where the old ones were.
func TestReuseJournal(t *testing.T) {
	fs := vfs.NewMem()
	s := open(t, fs)
	old := frags(4, 300)
	addAll(t, s, segA, 1, 0, old)
	oldSize := int64(len(readFile(t, fs, journalPath(testDir, segA))))
	if err := s.Drop(segA); err != nil {
		t.Fatal(err)
	}
	free := filepath.Join(testDir, freeDir)
	if names, err := fs.List(free); err != nil || len(names) != 1 {
		t.Fatalf("free directory after a Drop: %q, %v; want one journal", names, err)
	}

	// Fragments of the same sizes, as a writer's fragments often are.
	fresh := [][]byte{frag(10, 300), frag(11, 300)}
	addAll(t, s, segB, 1, 0, fresh)
	if names, err := fs.List(free); err != nil || len(names) != 0 {
		t.Fatalf("free directory after a new segment: %q, %v; want it taken", names, err)
	}
	path := journalPath(testDir, segB)
	if got := int64(len(readFile(t, fs, path))); got != oldSize {
		t.Fatalf("new journal of %d bytes, want the %d of the one it was written over", got, oldSize)
	}
	checkFrags(t, s, segB, fresh)

	// A crash, and the journal as the disk holds it.
	s.Close()
	s = open(t, fs.Crash(rand.New(rand.NewPCG(1, 2))))
	checkFrags(t, s, segB, fresh)
	if got, want := int64(len(readFile(t, s.fs, path))), headerBytes+2*frameBytes(300); got != want {
		t.Errorf("recovered journal of %d bytes, want %d: cut after its own frames", got, want)
	}
	mustAdd(t, s, segB, 1, 2, frag(12, 5))
	checkFrags(t, reopen(t, s), segB, append(fresh, frag(12, 5)))
}

// TestReuseJournalsBound checks that a store keeps at most ReuseJournals
// dropped journals, none when it is negative, and that Open removes those
// over the bound.
func TestReuseJournalsBound(t *testing.T) {
	free := filepath.Join(testDir, freeDir)
	count := func(fs vfs.FS) int {
		names, err := fs.List(free)
		if isNotExist(err) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	for _, c := range []struct{ opt, want int }{{0, DefaultReuseJournals}, {3, 3}, {-1, 0}} {
		fs := vfs.NewMem()
		s := open(t, fs, func(o *Options) { o.ReuseJournals = c.opt })
		for seq := range uint64(5) {
			mustAdd(t, s, SegmentID{Log: 1, Seq: seq}, 1, 0, []byte("x"))
		}
		for seq := range uint64(5) {
			if err := s.Drop(SegmentID{Log: 1, Seq: seq}); err != nil {
				t.Fatal(err)
			}
		}
		if got := count(fs); got != c.want {
			t.Errorf("ReuseJournals %d: %d journals kept, want %d", c.opt, got, c.want)
		}
		s.Close()
		s = open(t, fs, func(o *Options) { o.ReuseJournals = 1 })
		if got := count(fs); got != min(c.want, 1) {
			t.Errorf("ReuseJournals %d, then 1: %d journals kept after Open, want %d", c.opt, got, min(c.want, 1))
		}
		s.Close()
	}
}

func TestIOErrorFailsSegment(t *testing.T) {
	bad := journalPath(testDir, segA)
	var fail atomic.Bool
	s := open(t, vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, name string) error {
		if fail.Load() && op == vfs.OpSync && name == bad {
			return syscall.EIO
		}
		return nil
	}))
	mustAdd(t, s, segA, 1, 0, []byte("a"))
	mustAdd(t, s, segB, 1, 0, []byte("b"))
	fail.Store(true)
	wantErr(t, "add with a failing sync", add(s, segA, 1, 1, []byte("a")), syscall.EIO)
	wantErr(t, "add after the failure", add(s, segA, 1, 2, []byte("a")), syscall.EIO)
	_, err := s.Fence(segA, 2)
	wantErr(t, "Fence after the failure", err, syscall.EIO)
	if sizes, err := s.List(segA); err != nil || len(sizes) != 1 {
		t.Errorf("List = %v, %v; want the one durable fragment", sizes, err)
	}
	mustAdd(t, s, segB, 1, 1, []byte("b"))
	if err := s.Drop(segA); err != nil {
		t.Fatal(err)
	}
	fail.Store(false)
	mustAdd(t, s, segA, 1, 0, []byte("again"))
}

func TestRecoverTornTail(t *testing.T) {
	fs := vfs.NewMem()
	s := open(t, fs)
	want := frags(3, 100)
	addAll(t, s, segA, 1, 0, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := journalPath(testDir, segA)
	size := int64(len(readFile(t, fs, path)))
	// A frame cut short, then garbage.
	appendFile(t, fs, path, appendFrame(nil, journalNonce(t, fs, path), 3, frag(3, 100))[:50])
	s = open(t, fs)
	checkFrags(t, s, segA, want)
	if got := int64(len(readFile(t, fs, path))); got != size {
		t.Errorf("journal of %d bytes after recovery, want %d", got, size)
	}
	mustAdd(t, s, segA, 1, 3, frag(3, 100))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	appendFile(t, fs, path, []byte("garbage"))
	s = open(t, fs)
	checkFrags(t, s, segA, append(want, frag(3, 100)))
}

func TestRecoverRefusesDamage(t *testing.T) {
	fs := vfs.NewMem()
	s := open(t, fs)
	addAll(t, s, segA, 1, 0, frags(3, 100))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := journalPath(testDir, segA)
	b := readFile(t, fs, path)
	pos := headerBytes + frameBytes(100) + frameHeaderBytes + 5 // in fragment 1's data
	b[pos] ^= 1
	writeFile(t, fs, path, b)
	_, err := openErr(fs)
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, rpcerr.ErrJournalCorrupt) || ce.Path != path || ce.Pos != headerBytes+frameBytes(100) {
		t.Fatalf("Open of a damaged journal: %v", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
	if got := readFile(t, fs, path); !bytes.Equal(got, b) {
		t.Error("Open changed a damaged journal")
	}
}

func TestRecoverUnfinishedCreation(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll(logDir(testDir, 1)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fs, journalPath(testDir, segA), encodeHeader(header{id: segA, epoch: 1, nonce: testNonce})[:20])
	writeFile(t, fs, statePath(testDir, segB)+tmpSuffix, []byte("partial"))
	writeFile(t, fs, statePath(testDir, segB), encodeState(segB, state{epoch: 3}))
	s := open(t, fs)
	if got := s.Segments(); len(got) != 0 {
		t.Errorf("segments %v, want none", got)
	}
	names, err := fs.List(logDir(testDir, 1))
	if err != nil || len(names) != 0 {
		t.Errorf("log directory holds %q, %v", names, err)
	}
}

// TestRecoverRefusesVersion1 checks that a journal of the format before
// nonces, even one holding only its header (an empty segment, fenced), is
// refused with a *CorruptError that says what to do, not taken for a
// creation cut short and removed.
func TestRecoverRefusesVersion1(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll(logDir(testDir, 1)); err != nil {
		t.Fatal(err)
	}
	v1 := encodeHeader(header{id: segA, epoch: 4, nonce: testNonce})[:40]
	v1[4] = 1
	path := journalPath(testDir, segA)
	writeFile(t, fs, path, v1)
	_, err := openErr(fs)
	if _, ok := errors.AsType[*CorruptError](err); !ok || !strings.Contains(err.Error(), "drain the node") {
		t.Fatalf("Open of a version 1 journal: %v, want a *CorruptError saying what to do", err)
	}
	if got := readFile(t, fs, path); !bytes.Equal(got, v1) {
		t.Error("Open changed a version 1 journal")
	}
}

func appendFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.OpenRW(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	if err := vfs.WriteFile(fs, path, b); err != nil {
		t.Fatal(err)
	}
}

func TestClosed(t *testing.T) {
	s := open(t, vfs.NewMem())
	mustAdd(t, s, segA, 1, 0, []byte("a"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Add after Close", add(s, segA, 1, 1, []byte("a")), rpcerr.ErrReplicaClosed)
	_, err := s.Fence(segA, 2)
	wantErr(t, "Fence after Close", err, rpcerr.ErrReplicaClosed)
	_, err = s.Read(segA, 0, 0, make([]byte, 1))
	wantErr(t, "Read after Close", err, rpcerr.ErrReplicaClosed)
	wantErr(t, "Seal after Close", s.Seal(segA, 1), rpcerr.ErrReplicaClosed)
	wantErr(t, "Drop after Close", s.Drop(segA), rpcerr.ErrReplicaClosed)
	open(t, s.fs)
}

func TestLocked(t *testing.T) {
	fs := vfs.NewMem()
	open(t, fs)
	_, err := openErr(fs)
	wantErr(t, "second Open", err, vfs.ErrLocked)
}
