package wal

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// mergeWork is a log of tiny segments merged: six entries appended a few
// minutes apart, each sealed in a segment of its own by age, with merging
// off; then the log opened again with merging on, merged, and appended to.
// It records every append acknowledged and stops at the first error, which
// is what a crash looks like from inside.
type mergeWork struct {
	acked     map[uint64]string
	attempted map[string]bool
}

func (w *mergeWork) options(fs vfs.FS, epoch uint64, c *clock, merge bool) Options {
	o := mergeOptions(fs, epoch, c)
	o.Logger = slog.New(slog.DiscardHandler)
	if !merge {
		o.MergeSmall = -1
	}
	return o
}

func (w *mergeWork) append(l *Log, epoch uint64, p string) bool {
	w.attempted[p] = true
	pend, err := l.Append(epoch, []record.Entry{{Payload: []byte(p)}}, engine.AppendOptions{})
	if err != nil {
		return false
	}
	off, err := pend.Wait(context.Background())
	if err != nil {
		return false
	}
	w.acked[off] = p
	return true
}

func (w *mergeWork) run(t *testing.T, fs vfs.FS) {
	w.acked, w.attempted = map[uint64]string{}, map[string]bool{}
	c := newClock()
	l, err := Open(context.Background(), w.options(fs, 1, c, false))
	if err != nil {
		return
	}
	for i := range 6 {
		c.add(2 * time.Minute)
		if !w.append(l, 1, fmt.Sprintf("tiny%d-%s", i, strings.Repeat("t", 20*i))) {
			l.Close()
			return
		}
	}
	if l.Close() != nil {
		return
	}
	l, err = Open(context.Background(), w.options(fs, 2, c, true))
	if err != nil {
		return
	}
	defer l.Close()
	if n, err := l.mergeAll(context.Background()); err != nil || n == 0 {
		return
	}
	for i := range 3 {
		if !w.append(l, 2, fmt.Sprintf("after%d", i)) {
			return
		}
	}
}

// check opens the log after a crash: Check finds no damage in it (a merge's
// temporary file, or a file a merge covered, are notes), and once open it
// holds every acknowledged entry once, at its offset, and nothing never
// appended, in contiguous files none of which overlaps another, and takes
// an append at its end.
func (w *mergeWork) check(t *testing.T, fs vfs.FS) {
	t.Helper()
	r, err := Check(fs, mergeDir)
	if errors.Is(err, iofs.ErrNotExist) {
		err = nil // the crash came before the directory was made
	}
	if err != nil || r.Damaged() {
		t.Fatalf("Check after crash: %+v, %v", r, err)
	}
	for _, f := range r.Findings {
		switch {
		case strings.HasSuffix(f.Path, mergeSuffix):
			mergeCrashSeen.temp++
		case strings.Contains(f.What, "merged into"):
			mergeCrashSeen.covered++
		}
	}
	l := openMerged(t, w.options(fs, 100, newClock(), true))
	defer l.Close()
	st := l.Stats()
	readsBack(t, l, st, w.attempted, w.acked, nil)
	for off, p := range w.acked {
		if off < st.Start || off >= st.End {
			t.Fatalf("the log holds offsets %d to %d and lost %.20q, acknowledged at offset %d", st.Start, st.End, p, off)
		}
	}
	segs, other := segmentFiles(t, fs)
	for _, n := range other {
		if strings.HasSuffix(n, mergeSuffix) {
			t.Fatalf("Open left %s", n)
		}
	}
	for i := 1; i < len(segs); i++ {
		if segs[i-1].Sealed && segs[i-1].Next != segs[i].Base {
			t.Fatalf("segment %s ends at offset %d, the next file starts at %d", segs[i-1].Path, segs[i-1].Next, segs[i].Base)
		}
	}
	if off := appendWait(t, l, 100, "after"); off != st.End {
		t.Fatalf("append after recovery got offset %d, want %d", off, st.End)
	}
}

// mergeCrashSeen counts the merge's temporary files and the files a merge
// covered that the crashes of TestMergeCrashAtEveryPoint left.
var mergeCrashSeen struct{ temp, covered int }

// A power loss after any filesystem operation of a merge (the temporary
// file written and synced, the rename over the first segment's file, the
// directory synced, the other files removed) or of the appends around it
// leaves a log that Check finds undamaged and that opens with every
// acknowledged entry, once, in files merged or not, never overlapping.
func TestMergeCrashAtEveryPoint(t *testing.T) {
	mem := vfs.NewMem()
	var ref mergeWork
	ref.run(t, mem)
	if len(ref.acked) != 9 {
		t.Fatalf("reference run acknowledged %d entries, want 9", len(ref.acked))
	}
	if segs, _ := segmentFiles(t, mem); len(segs) != 2 {
		t.Fatalf("the reference run left %d segment files, want 2 (five merged, the newest reopened)", len(segs))
	}
	ref.check(t, mem)
	mergeCrashSeen.temp, mergeCrashSeen.covered = 0, 0
	crashAtEveryPoint(t, mem.Ops(), func() crashWork { return new(mergeWork) })
	// A power loss never leaves the temporary file, whose name is not
	// synced (TestMergeLeftovers has a killed process leave one).
	if mergeCrashSeen.covered == 0 {
		t.Fatalf("of %d crash points, none left a file a merge covered: the merge was not cut where it matters", mem.Ops())
	}
	t.Logf("%d crash points; the crashes left %d covered files", mem.Ops(), mergeCrashSeen.covered)
}

// What a killed process leaves of a merge: its temporary file, or the
// merged file under the first segment's name and the other segments'
// files still there. Check takes both for harmless notes; Open removes the
// files and reads every entry once. A merge stopped midway (Close) leaves
// nothing.
func TestMergeLeftovers(t *testing.T) {
	mem, c := vfs.NewMem(), newClock()
	o := mergeOptions(mem, 1, c)
	o.MergeSmall = -1
	l, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := tinySegments(t, l, c, 1, 6, "left")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := segmentFiles(t, mem)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := segment.WriteMerged(ctx, mem, segs[0].Path+mergeSuffix, segs[:3]); err == nil {
		t.Fatal("WriteMerged with its context done succeeded")
	}
	if _, other := segmentFiles(t, mem); len(other) != 1 { // "closed"
		t.Fatalf("a merge cut short left %q", other)
	}
	// Killed after the rename: the merged file covers two others.
	merged, err := segment.WriteMerged(t.Context(), mem, segs[0].Path+mergeSuffix, segs[:3])
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Rename(segs[0].Path+mergeSuffix, merged.Path); err != nil {
		t.Fatal(err)
	}
	// Killed while writing the next merge.
	if _, err := segment.WriteMerged(t.Context(), mem, segs[3].Path+mergeSuffix, segs[3:5]); err != nil {
		t.Fatal(err)
	}
	r, err := Check(mem, mergeDir)
	if err != nil || r.Damaged() || len(r.Findings) != 3 || r.Segments != 4 || r.End != 6 {
		t.Fatalf("Check = %+v, %v; want 3 notes (a temporary file, 2 covered files), 4 segments, the end at 6", r, err)
	}
	l, err = Open(t.Context(), mergeOptions(mem, 2, c))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	segs, other := segmentFiles(t, mem)
	if len(segs) > 4 || len(other) != 1 {
		t.Fatalf("after Open, segment files %d, other files %q; want 4 at most and \"closed\"", len(segs), other)
	}
	readFrom(t, l, 0, want)
}
