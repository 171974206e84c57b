package segment_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

func TestFileName(t *testing.T) {
	for _, base := range []uint64{0, 4096, math.MaxUint64} {
		name := segment.FileName(base)
		if len(name) != 24 {
			t.Errorf("FileName(%d) = %q, want 20 digits and .seg", base, name)
		}
		if got, ok := segment.ParseFileName("/some/dir/" + name); !ok || got != base {
			t.Errorf("ParseFileName(%q) = %d, %v", name, got, ok)
		}
	}
	if segment.FileName(9) >= segment.FileName(10) {
		t.Error("file names do not sort by base offset")
	}
	for _, name := range []string{"", "1.seg", "0000000000000000000a.seg", "00000000000000000000.log",
		"99999999999999999999.seg", "00000000000000000000.seg.tmp"} {
		if base, ok := segment.ParseFileName(name); ok {
			t.Errorf("ParseFileName(%q) = %d, true; want false", name, base)
		}
	}
}

func TestSealAndReadSealed(t *testing.T) {
	for _, tf := range filesystems(t) {
		t.Run(tf.name, func(t *testing.T) {
			const base = 1000
			rng := rand.New(rand.NewPCG(1, 1))
			bs := makeBatches(rng, base, 300, 1500)
			path := filepath.Join(tf.dir, segment.FileName(base))

			w := create(t, tf.fs, tf.dir, base)
			checkInfo(t, "new writer", w.Info(), expectedInfo(path, base, nil))
			appendAll(t, w, bs)
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "writer", w.Info(), expectedInfo(path, base, bs))
			sealed, err := w.Seal()
			if err != nil {
				t.Fatal(err)
			}
			want := sealedInfo(path, base, bs)
			if len(want.Index) < 5 {
				t.Fatalf("only %d index entries: the test needs more data", len(want.Index))
			}
			checkInfo(t, "Seal", sealed, want)
			if size := int64(len(readFile(t, tf.fs, path))); size != want.Size {
				t.Fatalf("file has %d bytes, Info.Size %d", size, want.Size)
			}

			got, err := segment.ReadSealed(tf.fs, path)
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "ReadSealed", got, want)
			info, w2, err := segment.Recover(tf.fs, path, 0)
			if err != nil || w2 != nil {
				t.Fatalf("Recover of a sealed segment: writer %v, %v", w2, err)
			}
			checkInfo(t, "Recover", info, want)
			checkBatches(t, scanAll(t, tf.fs, path, segment.HeaderBytes, got.End), bs)

			next := makeBatches(rng, want.Next, 1, 10)[0]
			if err := w.Append(next.data, next.h, next.maxTime); err == nil {
				t.Fatal("Append after Seal succeeded")
			}
		})
	}
}

func TestSealEmpty(t *testing.T) {
	fs := vfs.NewMem()
	w := create(t, fs, "/", 42)
	sealed, err := w.Seal()
	if err != nil {
		t.Fatal(err)
	}
	want := sealedInfo("/"+segment.FileName(42), 42, nil)
	checkInfo(t, "Seal", sealed, want)
	got, err := segment.ReadSealed(fs, want.Path)
	if err != nil {
		t.Fatal(err)
	}
	checkInfo(t, "ReadSealed", got, want)
	if got.Entries() != 0 || got.Find(42) != segment.HeaderBytes {
		t.Fatalf("empty segment: %d entries, Find(42) = %d", got.Entries(), got.Find(42))
	}
}

func TestIndexIsSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	bs := makeBatches(rng, 0, 400, 2000)
	fs := vfs.NewMem()
	info, err := segment.ReadSealed(fs, writeSealed(t, fs, "/", 0, bs).Path)
	if err != nil {
		t.Fatal(err)
	}
	pos, end := positions(bs)
	maxLen := 0
	for _, b := range bs {
		maxLen = max(maxLen, len(b.data))
	}
	batchAt := make(map[int64]uint64) // batch position -> base offset
	for i, p := range pos {
		batchAt[p] = bs[i].h.BaseOffset
	}
	ix := info.Index
	if len(ix) == 0 || ix[0] != (segment.IndexEntry{Offset: 0, Pos: segment.HeaderBytes}) {
		t.Fatalf("index does not start with the first batch: %v", ix)
	}
	for k, e := range ix {
		if off, ok := batchAt[e.Pos]; !ok || off != e.Offset {
			t.Fatalf("index entry %d %+v does not locate a batch", k, e)
		}
		if k > 0 && (e.Offset <= ix[k-1].Offset || e.Pos-ix[k-1].Pos < segment.IndexIntervalBytes) {
			t.Fatalf("index entries %d and %d are too close or out of order: %+v %+v", k-1, k, ix[k-1], e)
		}
	}
	// Every batch is within IndexIntervalBytes (plus the batch that crosses
	// the interval) of the entry before it.
	for i, p := range pos {
		if from := info.Find(bs[i].h.BaseOffset); p-from >= segment.IndexIntervalBytes+int64(maxLen) {
			t.Fatalf("batch %d at %d is %d bytes past its index entry", i, p, p-from)
		}
	}
	if n, data := len(ix), end-segment.HeaderBytes; int64(n) > data/segment.IndexIntervalBytes+1 ||
		int64(n) < data/(segment.IndexIntervalBytes+int64(maxLen)) {
		t.Fatalf("%d index entries for %d bytes of batches", n, data)
	}
}

func TestFind(t *testing.T) {
	const base = 77
	rng := rand.New(rand.NewPCG(3, 3))
	bs := makeBatches(rng, base, 250, 2000)
	fs := vfs.NewMem()
	info, err := segment.ReadSealed(fs, writeSealed(t, fs, "/", base, bs).Path)
	if err != nil {
		t.Fatal(err)
	}
	pos, _ := positions(bs)
	f, err := fs.Open(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, b := range bs {
		if i%5 != 0 && i != len(bs)-1 {
			continue
		}
		for off := b.h.BaseOffset; off < b.h.NextOffset(); off++ {
			from := info.Find(off)
			if from > pos[i] {
				t.Fatalf("Find(%d) = %d, past the batch holding it at %d", off, from, pos[i])
			}
			s := segment.NewScanner(f, from, info.End)
			for {
				got, at, err := s.Next()
				if err != nil {
					t.Fatalf("scanning from Find(%d) = %d: %v at %d", off, from, err, at)
				}
				if got.BaseOffset <= off && off < got.NextOffset() {
					if at != pos[i] {
						t.Fatalf("offset %d found at %d, want %d", off, at, pos[i])
					}
					break
				}
				if got.BaseOffset > off {
					t.Fatalf("scanning from Find(%d) = %d skipped the offset", off, from)
				}
			}
		}
	}
	if got := info.Find(0); got != segment.HeaderBytes {
		t.Errorf("Find below the base = %d, want %d", got, segment.HeaderBytes)
	}
	if got, want := info.Find(info.Next+100), info.Index[len(info.Index)-1].Pos; got != want {
		t.Errorf("Find past the end = %d, want the last index entry %d", got, want)
	}
}

// bigBatches returns small batches around one batch larger than a Scanner's
// chunk, so that chunk boundaries cut batches.
func bigBatches(rng *rand.Rand, base uint64) []batch {
	bs := makeBatches(rng, base, 40, 5000)
	big := record.Entry{Time: 5, Payload: bytes.Repeat([]byte("big"), segment.ChunkBytes/2)}
	data := record.Encode(bs[len(bs)-1].h.NextOffset(), testEpoch, []record.Entry{big})
	h, err := record.ParseHeader(data)
	if err != nil {
		panic(err)
	}
	bs = append(bs, batch{data: data, h: h, maxTime: 5, entries: []record.Entry{big}})
	return append(bs, makeBatches(rng, h.NextOffset(), 40, 5000)...)
}

func TestScannerReadsAll(t *testing.T) {
	for _, tf := range filesystems(t) {
		t.Run(tf.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(4, 4))
			bs := bigBatches(rng, 10)
			info := writeSealed(t, tf.fs, tf.dir, 10, bs)
			// scanAll keeps every batch and compares them at the end, which
			// checks that later calls to Next leave earlier batches intact.
			checkBatches(t, scanAll(t, tf.fs, info.Path, segment.HeaderBytes, info.End), bs)
		})
	}
}

func TestScannerLimit(t *testing.T) {
	fs := vfs.NewMem()
	rng := rand.New(rand.NewPCG(5, 5))
	bs := bigBatches(rng, 0)
	info := writeSealed(t, fs, "/", 0, bs)
	pos, end := positions(bs)
	f, err := fs.Open(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// Limits that cut a batch, then the limit moved on.
	for _, i := range []int{0, 3, 40, 41} {
		for _, cut := range []int64{pos[i], pos[i] + 1, pos[i] + record.HeaderBytes, pos[i] + int64(len(bs[i].data)) - 1} {
			s := segment.NewScanner(f, segment.HeaderBytes, cut)
			var got []record.Batch
			for {
				b, _, err := s.Next()
				if err != nil {
					want := io.ErrUnexpectedEOF
					if cut == pos[i] {
						want = io.EOF
					}
					if err != want {
						t.Fatalf("limit %d: Next: %v, want %v", cut, err, want)
					}
					break
				}
				got = append(got, b)
			}
			if s.Pos() != pos[i] {
				t.Fatalf("limit %d: scanner at %d, want %d", cut, s.Pos(), pos[i])
			}
			s.SetLimit(end)
			for {
				b, _, err := s.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("limit %d then %d: %v", cut, end, err)
				}
				got = append(got, b)
			}
			checkBatches(t, got, bs)
		}
	}
}

// TestScannerFollowsWriter reads a growing segment through its own handle,
// as a reader tailing the open segment does.
func TestScannerFollowsWriter(t *testing.T) {
	for _, tf := range filesystems(t) {
		t.Run(tf.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(6, 6))
			bs := bigBatches(rng, 3)
			w := create(t, tf.fs, tf.dir, 3)
			f, err := tf.fs.Open(w.Info().Path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s := segment.NewScanner(f, segment.HeaderBytes, w.Info().End)
			var got []record.Batch
			for i, b := range bs {
				if _, _, err := s.Next(); err != io.EOF {
					t.Fatalf("before batch %d: Next: %v, want io.EOF", i, err)
				}
				at := w.Info().End
				appendAll(t, w, []batch{b})
				s.SetLimit(w.Info().End)
				rb, pos, err := s.Next()
				if err != nil || pos != at {
					t.Fatalf("batch %d: at %d, %v; want at %d", i, pos, err, at)
				}
				got = append(got, rb)
			}
			checkBatches(t, got, bs)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMarkRewind(t *testing.T) {
	for _, tf := range filesystems(t) {
		t.Run(tf.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 7))
			bs := makeBatches(rng, 0, 30, 3000)
			w := create(t, tf.fs, tf.dir, 0)
			empty := w.Mark()
			appendAll(t, w, bs[:10])
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			m, atMark := w.Mark(), w.Info()
			markIndex := slices.Clone(atMark.Index)
			appendAll(t, w, bs[10:])
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			before := w.Info()
			if len(before.Index) <= len(atMark.Index) {
				t.Fatal("the test needs the index to grow after the mark")
			}
			beforeIndex := slices.Clone(before.Index)

			if err := w.Rewind(m); err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "after Rewind", w.Info(), atMark)
			if size := int64(len(readFile(t, tf.fs, atMark.Path))); size != atMark.End {
				t.Fatalf("file has %d bytes after Rewind, want %d", size, atMark.End)
			}
			// Different batches for the same offsets.
			other := makeBatches(rng, atMark.Next, 30, 3000)
			appendAll(t, w, other)
			if !slices.Equal(before.Index, beforeIndex) || !slices.Equal(atMark.Index, markIndex) {
				t.Fatal("appends after Rewind changed the Index of an Info returned earlier")
			}
			// A second Rewind to the same mark, then to an earlier one.
			if err := w.Rewind(m); err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "after second Rewind", w.Info(), atMark)
			if err := w.Rewind(empty); err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "after Rewind to empty", w.Info(), expectedInfo(atMark.Path, 0, nil))
			appendAll(t, w, bs[:10])
			appendAll(t, w, other)

			all := append(slices.Clone(bs[:10]), other...)
			sealed, err := w.Seal()
			if err != nil {
				t.Fatal(err)
			}
			want := sealedInfo(atMark.Path, 0, all)
			checkInfo(t, "Seal", sealed, want)
			got, err := segment.ReadSealed(tf.fs, want.Path)
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "ReadSealed", got, want)
			checkBatches(t, scanAll(t, tf.fs, want.Path, segment.HeaderBytes, got.End), all)
		})
	}
}

var errInjected = errors.New("injected error")

// faultFS returns fs with errInjected returned for every operation of kind
// op while the returned flag is set.
func faultFS(fs vfs.FS, op vfs.Op) (vfs.FS, *atomic.Bool) {
	var fail atomic.Bool
	return vfs.WithErrors(fs, func(o vfs.Op, _ string) error {
		if o == op && fail.Load() {
			return errInjected
		}
		return nil
	}), &fail
}

// TestFailureBreaksWriter checks that a failed Append or Sync makes the Writer
// refuse everything but Rewind, which makes it usable again.
func TestFailureBreaksWriter(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync} {
		t.Run(op.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			fs, fail := faultFS(mem, op)
			rng := rand.New(rand.NewPCG(8, 8))
			bs := makeBatches(rng, 0, 6, 100)
			w := create(t, fs, "/", 0)
			appendAll(t, w, bs[:3])
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			m, atMark := w.Mark(), w.Info()

			fail.Store(true)
			err := w.Append(bs[3].data, bs[3].h, bs[3].maxTime)
			if err == nil {
				err = w.Sync()
			}
			if !errors.Is(err, errInjected) {
				t.Fatalf("Append and Sync: %v, want the injected error", err)
			}
			fail.Store(false)
			next := bs[3]
			if op == vfs.OpSync {
				next = bs[4]
			}
			if err := w.Append(next.data, next.h, next.maxTime); err == nil {
				t.Fatal("Append on a broken writer succeeded")
			}
			if err := w.Sync(); err == nil {
				t.Fatal("Sync on a broken writer succeeded")
			}
			if _, err := w.Seal(); err == nil {
				t.Fatal("Seal on a broken writer succeeded")
			}

			if err := w.Rewind(m); err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "after Rewind", w.Info(), atMark)
			appendAll(t, w, bs[3:])
			sealed, err := w.Seal()
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "Seal", sealed, sealedInfo(atMark.Path, 0, bs))
			checkBatches(t, scanAll(t, mem, sealed.Path, segment.HeaderBytes, sealed.End), bs)
		})
	}
}

// shortFS makes the Writes of files it creates write half their bytes and
// fail while fail is set.
type shortFS struct {
	vfs.FS
	fail *atomic.Bool
}

func (s shortFS) Create(name string) (vfs.File, error) {
	f, err := s.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return shortFile{File: f, fail: s.fail}, nil
}

type shortFile struct {
	vfs.File
	fail *atomic.Bool
}

func (f shortFile) Write(p []byte) (int, error) {
	if !f.fail.Load() {
		return f.File.Write(p)
	}
	n, err := f.File.Write(p[:len(p)/2])
	if err == nil {
		err = errInjected
	}
	return n, err
}

// TestRewindAfterShortWrite checks that Rewind removes the part of a batch a
// failed write left in the file.
func TestRewindAfterShortWrite(t *testing.T) {
	for _, tf := range filesystems(t) {
		t.Run(tf.name, func(t *testing.T) {
			fs := shortFS{FS: tf.fs, fail: new(atomic.Bool)}
			rng := rand.New(rand.NewPCG(9, 9))
			bs := makeBatches(rng, 0, 4, 300)
			w := create(t, fs, tf.dir, 0)
			appendAll(t, w, bs[:2])
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			m := w.Mark()
			fs.fail.Store(true)
			if err := w.Append(bs[2].data, bs[2].h, bs[2].maxTime); !errors.Is(err, errInjected) {
				t.Fatalf("Append: %v, want the injected error", err)
			}
			fs.fail.Store(false)
			if err := w.Rewind(m); err != nil {
				t.Fatal(err)
			}
			appendAll(t, w, bs[2:])
			sealed, err := w.Seal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := segment.ReadSealed(tf.fs, sealed.Path)
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "ReadSealed", got, sealedInfo(sealed.Path, 0, bs))
			checkBatches(t, scanAll(t, tf.fs, sealed.Path, segment.HeaderBytes, got.End), bs)
		})
	}
}

// TestFailedRewindLeavesWriterBroken checks that a Writer whose Rewind failed
// refuses appends: the file may have been cut back already, so the Writer no
// longer knows where its batches end.
func TestFailedRewindLeavesWriterBroken(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpTruncate, vfs.OpSync} {
		t.Run(op.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			fs, fail := faultFS(mem, op)
			rng := rand.New(rand.NewPCG(10, 10))
			bs := makeBatches(rng, 0, 5, 100)
			w := create(t, fs, "/", 0)
			appendAll(t, w, bs[:2])
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			m, atMark := w.Mark(), w.Info()
			appendAll(t, w, bs[2:3])

			fail.Store(true)
			if err := w.Rewind(m); !errors.Is(err, errInjected) {
				t.Fatalf("Rewind: %v, want the injected error", err)
			}
			fail.Store(false)
			if err := w.Append(bs[3].data, bs[3].h, bs[3].maxTime); err == nil {
				t.Fatalf("Append after a failed Rewind succeeded: writer says the batches end at %d, the file has %d bytes",
					w.Info().End, len(readFile(t, mem, atMark.Path)))
			}
			if err := w.Rewind(m); err != nil {
				t.Fatal(err)
			}
			appendAll(t, w, bs[2:])
			sealed, err := w.Seal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := segment.ReadSealed(mem, sealed.Path)
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "ReadSealed", got, sealedInfo(atMark.Path, 0, bs))
		})
	}
}

func TestCreateFailureRemovesFile(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir} {
		t.Run(op.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			fs, fail := faultFS(mem, op)
			fail.Store(true)
			if _, err := segment.Create(fs, "/", 5, testEpoch, testCreated); !errors.Is(err, errInjected) {
				t.Fatalf("Create: %v, want the injected error", err)
			}
			if names, err := mem.List("/"); err != nil || len(names) != 0 {
				t.Fatalf("files left after a failed Create: %v, %v", names, err)
			}
		})
	}
}
