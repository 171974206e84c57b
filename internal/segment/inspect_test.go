package segment_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// Inspect finds the valid prefix of an open segment and counts the valid
// batches after a damaged one, without changing the file; Cut truncates
// it there, and Recover then opens it for appends.
func TestInspectAndCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	bs := makeBatches(rng, 100, 12, 300)
	pos, end := positions(bs)
	fs := vfs.NewMem()
	path := writeOpen(t, fs, "/", 100, bs)

	d, err := segment.Inspect(fs, path)
	if err != nil || d.Damaged() || d.Prefix.Next != bs[11].h.NextOffset() || d.Pos != end {
		t.Fatalf("whole file: %+v, %v", d, err)
	}

	data := readFile(t, fs, path)
	data[pos[4]+30] ^= 0x40
	writeFile(t, fs, path, data)
	d, err = segment.Inspect(fs, path)
	var entries uint64
	for _, b := range bs[5:] {
		entries += uint64(b.h.Count)
	}
	if err != nil || !d.Damaged() || d.TornTail() || d.Pos != pos[4] || d.Prefix.Next != bs[4].h.BaseOffset ||
		d.Prefix.End != pos[4] || d.Batches != 7 || d.Entries != entries || d.CutBytes() != end-pos[4] {
		t.Fatalf("damaged batch 4: %+v, %v; want the prefix to end at byte %d, 7 batches of %d entries after", d, err, pos[4], entries)
	}
	if got := readFile(t, fs, path); len(got) != len(data) {
		t.Fatal("Inspect changed the file")
	}
	// Recover still refuses it: that is the caller's to accept.
	if _, _, err := segment.Recover(fs, path, 0); !errors.Is(err, rpcerr.ErrCorrupt) {
		t.Fatalf("Recover: %v, want ErrCorrupt", err)
	}
	if err := segment.Cut(fs, path, d.Pos); err != nil {
		t.Fatal(err)
	}
	info, w, err := segment.Recover(fs, path, 0)
	if err != nil || w == nil || info.Next != bs[4].h.BaseOffset || info.End != pos[4] {
		t.Fatalf("Recover after the cut: %+v, %v", info, err)
	}
	w.Close()
}

// Verify reads every batch of a sealed segment: a flipped bit in a batch,
// which ReadSealed (footer only) does not see, is a CorruptError at that
// batch.
func TestVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	bs := makeBatches(rng, 0, 10, 300)
	pos, _ := positions(bs)
	fs := vfs.NewMem()
	info := writeSealed(t, fs, "/", 0, bs)
	if got, err := segment.Verify(fs, info.Path); err != nil || got.Next != info.Next {
		t.Fatalf("Verify of a whole segment: %+v, %v", got, err)
	}
	data := readFile(t, fs, info.Path)
	data[pos[6]+40] ^= 1
	writeFile(t, fs, info.Path, data)
	if _, err := segment.ReadSealed(fs, info.Path); err != nil {
		t.Fatalf("ReadSealed: %v (the footer is whole)", err)
	}
	_, err := segment.Verify(fs, info.Path)
	if ce, ok := rpcerr.As[*rpcerr.CorruptError](err); !ok || ce.Path != info.Path || ce.Pos != pos[6] {
		t.Fatalf("Verify: %v, want a CorruptError at byte %d", err, pos[6])
	}
}
