package segment_test

import (
	"bytes"
	"errors"
	iofs "io/fs"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// freeSegment writes a sealed segment of old batches from offset 0 and
// moves it to dir/free, as a log keeps the file of a deleted segment to
// write over, and returns its free path and the offset after its batches.
func freeSegment(t *testing.T, fs vfs.FS, dir string, old []batch) (string, uint64) {
	t.Helper()
	info := writeSealed(t, fs, dir, 0, old)
	if err := fs.MkdirAll(filepath.Join(dir, "free")); err != nil {
		t.Fatal(err)
	}
	free := filepath.Join(dir, "free", "old.free")
	if err := fs.Rename(info.Path, free); err != nil {
		t.Fatal(err)
	}
	return free, info.Next
}

// again encodes the entries of bs anew with dense offsets from base: the
// same sizes, so the new batches end exactly where old ones do.
func again(bs []batch, base uint64) []batch {
	out := make([]batch, len(bs))
	off := base
	for i, b := range bs {
		data := record.Encode(off, testEpoch, b.entries)
		h, err := record.ParseHeader(data)
		if err != nil {
			panic(err)
		}
		out[i] = batch{data: data, h: h, maxTime: b.maxTime, entries: b.entries}
		off = h.NextOffset()
	}
	return out
}

// A segment created over the file of a deleted one recovers to exactly its
// own batches, whether the old batches after them start right where they
// end (a valid batch with an offset below the segment's base) or in the
// middle of one, and whether the new batches are fewer or more than the
// old; the old bytes are cut off. Sealed, it is byte for byte a segment
// written into a new file.
func TestCreateOverRecoversExactly(t *testing.T) {
	for _, tf := range filesystems(t) {
		t.Run(tf.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(9, 33))
			old := makeBatches(rng, 0, 60, 3000)
			cases := []struct {
				name string
				bs   func(base uint64) []batch
			}{
				{"empty", func(uint64) []batch { return nil }},
				{"aligned", func(base uint64) []batch { return again(old[:20], base) }},
				{"unaligned", func(base uint64) []batch { return makeBatches(rng, base, 15, 3000) }},
				{"longer", func(base uint64) []batch { return makeBatches(rng, base, 90, 3000) }},
			}
			for _, c := range cases {
				for _, seal := range []bool{false, true} {
					fs, dir := tf.fs, t.TempDir()
					if tf.name == "mem" {
						dir = "/seg/" + c.name
						if seal {
							dir += "-sealed"
						}
						if err := fs.MkdirAll(dir); err != nil {
							t.Fatal(err)
						}
					}
					free, next := freeSegment(t, fs, dir, old)
					base := next + uint64(rng.IntN(3))
					bs := c.bs(base)
					w, err := segment.CreateOver(fs, dir, free, base, testEpoch, testCreated)
					if err != nil {
						t.Fatalf("%s: CreateOver: %v", c.name, err)
					}
					if _, err := fs.Stat(free); !errors.Is(err, iofs.ErrNotExist) {
						t.Fatalf("%s: the free file is still there after CreateOver: %v", c.name, err)
					}
					appendAll(t, w, bs)
					path := w.Info().Path
					if seal {
						info, err := w.Seal()
						if err != nil {
							t.Fatalf("%s: Seal: %v", c.name, err)
						}
						checkInfo(t, c.name+": sealed", info, sealedInfo(path, base, bs))
						if got, want := readFile(t, fs, path), segmentBytes(t, base, bs, true); !bytes.Equal(got, want) {
							t.Fatalf("%s: sealed over an old file: %d bytes, unlike the %d of a new one", c.name, len(got), len(want))
						}
						if _, err := segment.ReadSealed(fs, path); err != nil {
							t.Fatalf("%s: ReadSealed: %v", c.name, err)
						}
						continue
					}
					if err := w.Sync(); err != nil {
						t.Fatal(err)
					}
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
					d, err := segment.Inspect(fs, path)
					if err != nil {
						t.Fatal(err)
					}
					if d.Damaged() && !d.TornTail() {
						t.Fatalf("%s: Inspect takes the old bytes for damage: %+v", c.name, d)
					}
					rw := recoverOpen(t, fs, path, bs, segmentBytes(t, base, bs, false))
					rw.Close()
				}
			}
		})
	}
}

// Damage to a batch of a segment created over an old file is still damage
// when a valid batch of the segment follows it: recovery refuses with a
// *rpcerr.CorruptError at the damaged batch instead of cutting acknowledged
// entries, whatever old batches lie after.
func TestCreateOverDamageRefused(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/seg"); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(10, 33))
	old := makeBatches(rng, 0, 60, 3000)
	free, next := freeSegment(t, fs, "/seg", old)
	bs := again(old[:20], next)
	w, err := segment.CreateOver(fs, "/seg", free, next, testEpoch, testCreated)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, w, bs)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	path := w.Info().Path
	w.Close()
	pos, _ := positions(bs)
	// One byte in the middle of batch 10 flips.
	at := pos[10] + int64(len(bs[10].data))/2
	data := readFile(t, fs, path)
	data[at] ^= 0xff
	writeFile(t, fs, path, data)

	_, _, err = segment.Recover(fs, path, 0)
	checkCorrupt(t, err, path, pos[10])
	if got := readFile(t, fs, path); !bytes.Equal(got, data) {
		t.Fatal("Recover refused the damaged segment but changed it")
	}
	d, err := segment.Inspect(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Pos != pos[10] || d.Batches != 9 || d.TornTail() {
		t.Fatalf("Inspect: damage at byte %d with %d valid batches after, want byte %d and 9: %+v", d.Pos, d.Batches, pos[10], d)
	}
}

// Recovery searches the whole rest of a file for a valid batch after
// damage, a chunk at a time: one whose magic straddles the end of a chunk,
// more than a chunk after the damage, is still found, and the damage
// refused.
func TestRecoverFindsBatchAcrossChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 33))
	bs := makeBatches(rng, 50, 3, 100)
	data := segmentBytes(t, 50, bs, false)
	from := int64(len(data))
	garbage := make([]byte, 1<<20-2) // the next batch's magic starts 3 bytes before the end of the first chunk searched
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	garbage[0] = 'X' // not the magic
	data = append(data, garbage...)
	data = append(data, makeBatches(rng, 60, 1, 100)[0].data...)
	data = append(data, 1, 2, 3)
	fs, path := memFile(t, 50, data)
	_, _, err := segment.Recover(fs, path, 0)
	checkCorrupt(t, err, path, from)
}
