package wal

import (
	"fmt"
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

// segmentFiles returns the Infos of the segment files in mergeDir, read
// sealed (open ones with their header only), and the names of the other
// files.
func segmentFiles(t *testing.T, fs vfs.FS) (segs []segment.Info, other []string) {
	t.Helper()
	return segmentFilesIn(t, fs, mergeDir)
}

// segmentFilesIn is segmentFiles of dir.
func segmentFilesIn(t *testing.T, fs vfs.FS, dir string) (segs []segment.Info, other []string) {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, ok := segment.ParseFileName(n); !ok {
			other = append(other, n)
			continue
		}
		info, err := segment.ReadSealed(fs, dir+"/"+n)
		if err != nil {
			base, _ := segment.ParseFileName(n)
			info = segment.Info{Path: dir + "/" + n, Base: base}
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
	timed := func(segs []segment.Info, times ...int64) []segment.Info {
		for i, t := range times {
			segs[i].MaxTime = t
		}
		return segs
	}
	for _, tc := range []struct {
		name  string
		segs  []segment.Info
		k, n  int
		small int64
		span  int64
	}{
		{"none", nil, 0, 0, 100, 0},
		{"one small", segs(10), 0, 0, 100, 0},
		{"two small", segs(10, 10), 0, 2, 100, 0},
		{"off", segs(10, 10), 0, 0, 0, 0},
		{"large between", segs(10, 100, 10), 0, 0, 100, 0},
		{"oldest run first", segs(100, 10, 10, 100, 10, 10), 1, 2, 100, 0},
		{"capped at most bytes", segs(90, 90, 90, 90), 0, 2, 100, 0},
		{"one merged file and one tiny: waits", segs(99, 2), 0, 0, 100, 0},
		{"one merged file and an eighth of it", segs(80, 10), 0, 2, 100, 0},
		{"small ones after a merged one merge apart", segs(99, 2, 2), 1, 2, 100, 0},
		{"eight files merge whatever their sizes", segs(90, 1, 1, 1, 1, 1, 1, 1), 0, 8, 100, 0},
		{"not adjacent", []segment.Info{seg(0, 1, 10), seg(2, 3, 10)}, 0, 0, 100, 0},
		{"within the span", timed(segs(10, 10, 10), 0, 5, 9), 0, 3, 100, 10},
		{"past the span", timed(segs(10, 10, 10, 10), 0, 5, 11, 12), 0, 2, 100, 10},
		{"past the span, the next run", timed(segs(10, 10, 10, 10), 0, 20, 25, 40), 1, 2, 100, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, n := mergeRun(tc.segs, tc.small, 200, tc.span)
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
			l = openMerged(t, o)
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
			l = openMerged(t, o)
			defer l.Close()
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
		l := openMerged(t, opts(uint64(i+1)))
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
	l := openMerged(t, opts(100))
	defer l.Close()
	readFrom(t, l, 0, want)
	segs, _ := segmentFiles(t, mem)
	return len(segs), want
}

// openMerged opens a log with o and merges its small sealed segments, as
// its merger does in the background; the caller closes it.
func openMerged(t *testing.T, o Options) *Log {
	t.Helper()
	l, err := Open(t.Context(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := l.mergeAll(t.Context()); err != nil {
		l.Close()
		t.Fatal(err)
	}
	return l
}
