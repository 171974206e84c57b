package segment_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// WriteMerged makes of adjacent sealed segments the file one sealed segment
// holding their batches would be: the same bytes, Info (index and max time
// included) and batches, which ReadSealed and Verify accept once it is
// renamed over the first segment's file; the first segment's batches stay
// at their positions. The segments span index intervals and the merge's
// write buffer.
func TestWriteMerged(t *testing.T) {
	for _, tfs := range filesystems(t) {
		t.Run(tfs.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 3))
			var all []batch
			var segs []segment.Info
			base := uint64(1000)
			for _, n := range []int{3, 40, 1, 300, 12} {
				bs := makeBatches(rng, base, n, 9000)
				segs = append(segs, writeSealed(t, tfs.fs, tfs.dir, base, bs))
				all = append(all, bs...)
				base = bs[len(bs)-1].h.NextOffset()
			}
			first := readFile(t, tfs.fs, segs[0].Path)
			tmp := segs[0].Path + ".merging"
			got, err := segment.WriteMerged(context.Background(), tfs.fs, tmp, segs)
			if err != nil {
				t.Fatal(err)
			}
			want := sealedInfo(segs[0].Path, 1000, all)
			checkInfo(t, "merged", got, want)
			// Written by a Writer in one segment: the same bytes.
			ref := segmentBytes(t, 1000, all, true)
			merged := readFile(t, tfs.fs, tmp)
			if !bytes.Equal(merged, ref) {
				t.Fatalf("the merged file (%d bytes) differs from one segment written with the same batches (%d bytes)", len(merged), len(ref))
			}
			if !bytes.Equal(merged[:segs[0].End], first[:segs[0].End]) {
				t.Fatal("the first segment's batches moved")
			}
			if err := tfs.fs.Rename(tmp, segs[0].Path); err != nil {
				t.Fatal(err)
			}
			for _, read := range []func(vfs.FS, string) (segment.Info, error){segment.ReadSealed, segment.Verify} {
				info, err := read(tfs.fs, segs[0].Path)
				if err != nil {
					t.Fatal(err)
				}
				checkInfo(t, "read back", info, want)
			}
			checkBatches(t, scanAll(t, tfs.fs, segs[0].Path, segment.HeaderBytes, want.End), all)
		})
	}
}

// A segment whose file no longer holds what its Info says (dropped and
// written over meanwhile) fails the merge, which leaves no file behind.
func TestWriteMergedRefusesChangedFile(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/seg"); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	a := makeBatches(rng, 0, 5, 100)
	b := makeBatches(rng, a[4].h.NextOffset(), 5, 100)
	sa := writeSealed(t, fs, "/seg", 0, a)
	sb := writeSealed(t, fs, "/seg", sa.Next, b)
	// b's file now holds other batches, of higher offsets.
	later := makeBatches(rng, 500, 5, 100)
	writeFile(t, fs, sb.Path, segmentBytes(t, 500, later, true))
	if _, err := segment.WriteMerged(context.Background(), fs, "/seg/x.merging", []segment.Info{sa, sb}); err == nil {
		t.Fatal("WriteMerged of a segment whose file changed succeeded")
	}
	if _, err := fs.Stat("/seg/x.merging"); err == nil {
		t.Fatal("a failed merge left its file")
	}
}
