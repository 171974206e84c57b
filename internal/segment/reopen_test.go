package segment_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ternwal/tern/internal/segment"
)

// A sealed segment reopened, appended to and sealed again is byte for
// byte the segment written in one go (the sparse index goes on where the
// footer's left off); reopened and left, it recovers as an open segment
// ending at its last batch.
func TestReopen(t *testing.T) {
	for _, tf := range filesystems(t) {
		t.Run(tf.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 33))
			bs := bigBatches(rng, 100)
			for _, k := range []int{1, len(bs) / 3, len(bs) - 1} {
				fs, dir := tf.fs, tf.dir
				first := writeSealed(t, fs, dir, 100, bs[:k])
				w, err := segment.Reopen(fs, first)
				if err != nil {
					t.Fatalf("Reopen: %v", err)
				}
				checkInfo(t, "reopened", w.Info(), expectedInfo(first.Path, 100, bs[:k]))
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				info, w, err := segment.Recover(fs, first.Path, first.Next)
				if err != nil || w == nil {
					t.Fatalf("Recover of the reopened segment: %v, %v; want it open", w, err)
				}
				checkInfo(t, "recovered", info, expectedInfo(first.Path, 100, bs[:k]))
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				w, err = segment.Reopen(fs, first)
				if err != nil {
					t.Fatalf("Reopen: %v", err)
				}
				appendAll(t, w, bs[k:])
				sealed, err := w.Seal()
				if err != nil {
					t.Fatalf("Seal: %v", err)
				}
				checkInfo(t, "sealed again", sealed, sealedInfo(first.Path, 100, bs))
				if got, want := readFile(t, fs, first.Path), segmentBytes(t, 100, bs, true); !bytes.Equal(got, want) {
					t.Fatalf("after reopening at batch %d the file differs from one written in one go", k)
				}
				if err := fs.Remove(first.Path); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
