package segment_test

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// A writer whose rounds are small keeps zeros written ahead of its
// batches, in a new file and past the end of one written over, and the
// zeros change nothing a reader or recovery sees: recovery ends the segment
// exactly at its last batch and says it cut zeros, Inspect reports no damage
// but zeros, and Seal leaves a file byte for byte a segment written without
// them.
func TestZeroAheadRecoversExactly(t *testing.T) {
	for _, tf := range filesystems(t) {
		t.Run(tf.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 7))
			for _, over := range []bool{false, true} {
				for _, seal := range []bool{false, true} {
					fs, dir := tf.fs, t.TempDir()
					if tf.name == "mem" {
						dir = filepath.Join("/ahead", map[bool]string{false: "new", true: "over"}[over], map[bool]string{false: "open", true: "sealed"}[seal])
						if err := fs.MkdirAll(dir); err != nil {
							t.Fatal(err)
						}
					}
					var w *segment.Writer
					base := uint64(0)
					if over {
						free, next := freeSegment(t, fs, dir, makeBatches(rng, 0, 10, 500))
						base = next
						var err error
						if w, err = segment.CreateOver(fs, dir, free, base, testEpoch, testCreated); err != nil {
							t.Fatal(err)
						}
					} else {
						w = create(t, fs, dir, base)
					}
					w.ZeroAhead(8<<10, 1<<20)
					bs := makeBatches(rng, base, 80, 600)
					grew := false
					for _, b := range bs {
						appendAll(t, w, []batch{b})
						if err := w.Sync(); err != nil {
							t.Fatal(err)
						}
						size := int64(len(readFile(t, fs, w.Info().Path)))
						grew = grew || size > w.Info().End
					}
					if !grew {
						t.Fatalf("over %v: the file never held zeros past its batches", over)
					}
					path := w.Info().Path
					if seal {
						if _, err := w.Seal(); err != nil {
							t.Fatal(err)
						}
						if got, want := readFile(t, fs, path), segmentBytes(t, base, bs, true); !bytes.Equal(got, want) {
							t.Fatalf("over %v: sealed: %d bytes, unlike the %d of a segment written without zeros", over, len(got), len(want))
						}
						continue
					}
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
					d, err := segment.Inspect(fs, path)
					if err != nil {
						t.Fatal(err)
					}
					if !d.Zeros || d.Batches != 0 || d.Prefix.Next != bs[len(bs)-1].h.NextOffset() {
						t.Fatalf("over %v: Inspect: %+v, want the batches then zeros", over, d)
					}
					rw := recoverOpen(t, fs, path, bs, segmentBytes(t, base, bs, false))
					if rw.Cut() == 0 || !rw.CutZeros() {
						t.Fatalf("over %v: recovery reports %d bytes cut (zeros: %v), want the zeros", over, rw.Cut(), rw.CutZeros())
					}
					rw.Close()
				}
			}
		})
	}
}

// aheadWriter creates a segment from offset 0 in a new MemFS, with
// ZeroAhead(ahead, round).
func aheadWriter(t *testing.T, ahead, round int64) (vfs.FS, *segment.Writer) {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/seg"); err != nil {
		t.Fatal(err)
	}
	w := create(t, fs, "/seg", 0)
	w.ZeroAhead(ahead, round)
	return fs, w
}

// Large rounds get no zeros: the writer measures the bytes appended per
// sync and writes none ahead when they average more than the round it was
// given, as zeros would then cost more writing than they spare.
func TestZeroAheadSkipsLargeRounds(t *testing.T) {
	fs, w := aheadWriter(t, 8<<10, 1<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	bs := makeBatches(rng, 0, 200, 600)
	for i := 0; i < len(bs); i += 10 { // about 3 KiB per sync
		appendAll(t, w, bs[i:i+10])
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		if size := int64(len(readFile(t, fs, w.Info().Path))); size != w.Info().End {
			t.Fatalf("the file has %d bytes after batches ending at %d: zeros written for rounds of about 3 KiB", size, w.Info().End)
		}
	}
}

// Rewind after a failed sync cuts the zeros with the batches after its
// mark, and the writer writes them again as it goes on.
func TestZeroAheadRewind(t *testing.T) {
	fs, w := aheadWriter(t, 4<<10, 1<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	bs := makeBatches(rng, 0, 60, 400)
	appendAll(t, w, bs[:20])
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	mark := w.Mark()
	appendAll(t, w, bs[20:40])
	if err := w.Rewind(mark); err != nil {
		t.Fatal(err)
	}
	if size := int64(len(readFile(t, fs, w.Info().Path))); size != mark.Info().End {
		t.Fatalf("after Rewind the file has %d bytes, want %d", size, mark.Info().End)
	}
	again := again(bs[20:], bs[19].h.NextOffset())
	for _, b := range again {
		appendAll(t, w, []batch{b})
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if size := int64(len(readFile(t, fs, w.Info().Path))); size <= w.Info().End {
		t.Fatalf("after going on the file has %d bytes, no zeros past %d", size, w.Info().End)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rw := recoverOpen(t, fs, w.Info().Path, append(bs[:20:20], again...), segmentBytes(t, 0, append(bs[:20:20], again...), false))
	rw.Close()
}
