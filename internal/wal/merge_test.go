package wal

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// clock is a fake Options.Now that tests move on.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const mergeDir = "/data/log"

// mergeOptions are those of a log whose segments roll by age (a minute),
// 64 KiB at most: sealed segments under 8 KiB are small, and merged files
// hold 32 KiB at most.
func mergeOptions(fs vfs.FS, epoch uint64, c *clock) Options {
	return Options{FS: fs, Dir: mergeDir, Epoch: epoch, SegmentBytes: 64 << 10, SegmentAge: time.Minute, Now: c.now}
}

// segmentFiles returns the Infos of the segment files in dir, read sealed
// (open ones with their header only), and the names of the other files.
func segmentFiles(t *testing.T, fs vfs.FS) (segs []segment.Info, other []string) {
	t.Helper()
	names, err := fs.List(mergeDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, ok := segment.ParseFileName(n); !ok {
			other = append(other, n)
			continue
		}
		info, err := segment.ReadSealed(fs, mergeDir+"/"+n)
		if err != nil {
			base, _ := segment.ParseFileName(n)
			info = segment.Info{Path: mergeDir + "/" + n, Base: base}
		}
		segs = append(segs, info)
	}
	return segs, other
}

// tinySegments appends n entries to the log, moving the clock on before
// each so that each lands in a segment of its own, and returns their
// payloads.
func tinySegments(t *testing.T, l *Log, c *clock, epoch uint64, n int, prefix string) []string {
	t.Helper()
	var out []string
	for i := range n {
		c.add(2 * time.Minute)
		p := fmt.Sprintf("%s%d-%s", prefix, i, strings.Repeat("z", 40+i%50))
		pend, err := l.Append(epoch, []record.Entry{{Payload: []byte(p), Time: c.now().UnixNano()}}, engine.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pend.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// readFrom reads the log from its start to its end and checks it holds want
// from offset from, in order, each once.
func readFrom(t *testing.T, l *Log, from uint64, want []string) {
	t.Helper()
	st := l.Stats()
	if st.Start != from || st.End != from+uint64(len(want)) {
		t.Fatalf("the log holds offsets %d to %d, want %d to %d", st.Start, st.End, from, from+uint64(len(want)))
	}
	r, err := l.NewReader(from, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, e := range readN(t, r, len(want), true) {
		if e.Offset != from+uint64(i) || string(e.Payload) != want[i] {
			t.Fatalf("entry %d: offset %d %.20q, want offset %d %.20q", i, e.Offset, e.Payload, from+uint64(i), want[i])
		}
	}
}

func TestMergeRun(t *testing.T) {
	seg := func(base, next uint64, size int64) segment.Info {
		return segment.Info{Path: segment.FileName(base), Base: base, Next: next, Size: size, Sealed: true}
	}
	segs := func(sizes ...int64) []segment.Info {
		var out []segment.Info
		for i, s := range sizes {
			out = append(out, seg(uint64(i), uint64(i+1), s))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		segs  []segment.Info
		k, n  int
		small int64
	}{
		{"none", nil, 0, 0, 100},
		{"one small", segs(10), 0, 0, 100},
		{"two small", segs(10, 10), 0, 2, 100},
		{"off", segs(10, 10), 0, 0, 0},
		{"large between", segs(10, 100, 10), 0, 0, 100},
		{"oldest run first", segs(100, 10, 10, 100, 10, 10), 1, 2, 100},
		{"capped at most bytes", segs(90, 90, 90, 90), 0, 2, 100},
		{"one merged file and one tiny: waits", segs(99, 2), 0, 0, 100},
		{"one merged file and an eighth of it", segs(80, 10), 0, 2, 100},
		{"small ones after a merged one merge apart", segs(99, 2, 2), 1, 2, 100},
		{"eight files merge whatever their sizes", segs(90, 1, 1, 1, 1, 1, 1, 1), 0, 8, 100},
		{"not adjacent", []segment.Info{seg(0, 1, 10), seg(2, 3, 10)}, 0, 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, n := mergeRun(tc.segs, tc.small, 200)
			if k != tc.k || n != tc.n {
				t.Fatalf("mergeRun = %d, %d; want %d, %d", k, n, tc.k, tc.n)
			}
		})
	}
}

// 100 segments of one entry each, sealed by age (the log appended to once a
// while), become a few files; the log reads back whole, in order, before
// and after a reopen, with what compression saved unchanged, compressed or not,
// and Check finds nothing wrong.
func TestMergeTinySegments(t *testing.T) {
	for _, codec := range []record.Codec{record.None, record.Zstd} {
		t.Run(fmt.Sprint("codec", codec), func(t *testing.T) {
			mem, c := vfs.NewMem(), newClock()
			o := mergeOptions(mem, 1, c)
			o.Codec, o.MergeSmall = codec, -1
			l, err := Open(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			want := tinySegments(t, l, c, 1, 100, "e")
			saved := l.LogicalBytes() - l.Stats().Bytes
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if segs, _ := segmentFiles(t, mem); len(segs) != 100 {
				t.Fatalf("without merging, %d segment files, want 100", len(segs))
			}
			o.MergeSmall = 0
			l, err = Open(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.mergeAll(t.Context()); err != nil {
				t.Fatal(err)
			}
			segs, other := segmentFiles(t, mem)
			if len(segs) > 3 {
				t.Fatalf("after merging, %d segment files, want 3 at most", len(segs))
			}
			for _, n := range other {
				if strings.HasSuffix(n, mergeSuffix) {
					t.Fatalf("a merge left %s", n)
				}
			}
			// The headers and footers merged away are gone from both.
			if got := l.LogicalBytes() - l.Stats().Bytes; got != saved {
				t.Fatalf("compression saved %d bytes after merging, %d before", got, saved)
			}
			if codec != record.None && saved <= 0 {
				t.Fatal("compression saved nothing: the test compares nothing")
			}
			readFrom(t, l, 0, want)
			if l.Stats().Segments != len(segs) {
				t.Fatalf("Stats counts %d segments, the directory holds %d", l.Stats().Segments, len(segs))
			}
			want = append(want, tinySegments(t, l, c, 1, 20, "f")...)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := Check(mem, mergeDir)
			if err != nil || r.Damaged() || len(r.Findings) > 0 || r.End != 120 {
				t.Fatalf("Check = %+v, %v; want no findings, the log ending at 120", r, err)
			}
			l, err = Open(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if _, err := l.mergeAll(t.Context()); err != nil {
				t.Fatal(err)
			}
			readFrom(t, l, 0, want)
			if segs, _ := segmentFiles(t, mem); len(segs) > 4 {
				t.Fatalf("after 120 tiny segments, %d segment files", len(segs))
			}
		})
	}
}

// A log appended to a few times and then cut by a power loss, 40 times
// over, each life minutes after the one before with a SegmentAge of a
// minute, leaves a segment file per life without merging (the first
// append of a life rolls the open segment recovery found, too old), and
// few files with merging, holding every acknowledged entry.
func TestMergeAfterCrashes(t *testing.T) {
	unmerged, _ := crashLives(t, -1)
	merged, _ := crashLives(t, 0)
	if unmerged < 20 || merged > 10 {
		t.Fatalf("after 40 crashes, %d segment files without merging, %d with; want 20 or more, 10 or fewer", unmerged, merged)
	}
}

// crashLives runs 40 lives of a log, each cut by a power loss after three
// appends, with Options.MergeSmall small, and returns how many segment
// files the log then has.
func crashLives(t *testing.T, small int64) (int, []string) {
	mem, c := vfs.NewMem(), newClock()
	var want []string
	opts := func(epoch uint64) Options {
		o := mergeOptions(mem, epoch, c)
		o.MergeSmall = small
		return o
	}
	for i := range 40 {
		l, err := Open(t.Context(), opts(uint64(i+1)))
		if err != nil {
			t.Fatalf("Open after crash %d: %v", i, err)
		}
		if _, err := l.mergeAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.add(2 * time.Minute)
		for j := range 3 {
			p := fmt.Sprintf("crash%d.%d-%s", i, j, strings.Repeat("c", 30))
			appendWait(t, l, uint64(i+1), p)
			want = append(want, p)
		}
		mem.CrashAfter(0)
		l.Close()
		mem = mem.Crash(rand.New(rand.NewPCG(uint64(i), 1)))
	}
	l, err := Open(t.Context(), opts(100))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.mergeAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	readFrom(t, l, 0, want)
	segs, _ := segmentFiles(t, mem)
	return len(segs), want
}

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
	l, err := Open(t.Context(), w.options(fs, 100, newClock(), true))
	if err != nil {
		t.Fatalf("Open after crash: %v", err)
	}
	defer l.Close()
	if _, err := l.mergeAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.End > st.Start {
		rd, err := l.NewReader(st.Start, false)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		for i, e := range readN(t, rd, int(st.End-st.Start), true) {
			p := string(e.Payload)
			if want := st.Start + uint64(i); e.Offset != want {
				t.Fatalf("entry %d read at offset %d, want %d", i, e.Offset, want)
			}
			if !w.attempted[p] {
				t.Fatalf("offset %d holds %.20q, which was never appended", e.Offset, p)
			}
			if q, ok := w.acked[e.Offset]; ok && q != p {
				t.Fatalf("offset %d holds %.20q, want %.20q, acknowledged there", e.Offset, p, q)
			}
		}
	}
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

// Readers following the log from its first offset while its segments are
// sealed one per entry and merged behind them read every entry once, in
// order: a reader whose segment's file a merge removed or replaced looks
// it up again.
func TestMergeReadersFollow(t *testing.T) {
	mem, c := vfs.NewMem(), newClock()
	l, err := Open(t.Context(), mergeOptions(mem, 1, c))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 300
	payload := func(i int) string { return fmt.Sprintf("follow%d-%s", i, strings.Repeat("f", i%40)) }
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := l.NewReader(0, false)
			if err != nil {
				errs <- err
				return
			}
			defer r.Close()
			for i := 0; i < n; {
				es, err := r.NextBatch(ctx, 1+k%2*5, 0)
				if err != nil {
					errs <- fmt.Errorf("reader %d at offset %d: %w", k, i, err)
					return
				}
				for _, e := range es {
					if e.Offset != uint64(i) || string(e.Payload) != payload(i) {
						errs <- fmt.Errorf("reader %d: offset %d %.20q, want offset %d %.20q", k, e.Offset, e.Payload, i, payload(i))
						return
					}
					i++
				}
			}
		}()
	}
	for i := range n {
		c.add(2 * time.Minute)
		if i%10 == 0 {
			// Now and then, a merge in the foreground as well.
			if _, err := l.mergeAll(ctx); err != nil {
				t.Fatal(err)
			}
		}
		appendWait(t, l, 1, payload(i))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := l.mergeAll(ctx); err != nil {
		t.Fatal(err)
	}
	if l.merges == 0 {
		t.Fatal("no merge happened")
	}
	if segs, _ := segmentFiles(t, mem); len(segs) > 12 {
		t.Fatalf("%d segment files after %d segments of one entry", len(segs), n)
	}
}

// Retention by age and Truncate see a merged segment as one: its newest
// entry's time is the newest of those merged, and it goes once all of its
// entries are below the start.
func TestMergeRetentionAndTruncate(t *testing.T) {
	mem, c := vfs.NewMem(), newClock()
	o := mergeOptions(mem, 1, c)
	o.MergeSmall = -1
	l, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := tinySegments(t, l, c, 1, 10, "old")
	old := c.now()
	l.Close()
	o.MergeSmall = 0
	if l, err = Open(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.mergeAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.add(time.Hour)
	for i := range 10 {
		p := fmt.Sprintf("new%d", i)
		appendWait(t, l, 1, p)
		want = append(want, p)
	}
	if _, err := l.mergeAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The old entries, 2 minutes apart, end up merged (the newest old
	// one with them once it is no longer the newest segment).
	segs, _ := segmentFiles(t, mem)
	first := segs[0]
	tLast := old.Add(-2 * time.Minute * time.Duration(10-first.Next))
	if len(segs) > 3 || first.Next < 9 || first.Next > 10 || first.MaxTime != tLast.UnixNano() {
		t.Fatalf("after merging, %d segment files, the first up to offset %d with max time %d; want the old sealed ones merged, with the newest's time %d",
			len(segs), first.Next, first.MaxTime, tLast.UnixNano())
	}
	// An age that keeps the newest old entry keeps the merged segment.
	if err := l.ApplyRetention(c.now(), engine.Retention{Age: c.now().Sub(tLast) + time.Minute, Keep: 1 << 62}); err != nil {
		t.Fatal(err)
	}
	readFrom(t, l, 0, want)
	if err := l.ApplyRetention(c.now(), engine.Retention{Age: c.now().Sub(tLast) - time.Minute, Keep: 1 << 62}); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Start != first.Next {
		t.Fatalf("retention by age left the log starting at %d, want %d (the merged segment dropped whole)", st.Start, first.Next)
	}
	readFrom(t, l, first.Next, want[first.Next:])
	if _, err := mem.Stat(segs[0].Path); err == nil {
		t.Fatalf("retention left %s", segs[0].Path)
	}
	if err := l.Truncate(15); err != nil {
		t.Fatal(err)
	}
	readFrom(t, l, 15, want[15:])
	if _, err := l.mergeAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	readFrom(t, l, 15, want[15:])
	if r, err := Check(mem, mergeDir); err != nil || r.Damaged() {
		t.Fatalf("Check = %+v, %v", r, err)
	}
}
