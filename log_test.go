package tern

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func createLog(t *testing.T, c *Client, name string, opts LogOptions) (*Log, *Writer) {
	t.Helper()
	l, err := c.CreateLog(t.Context(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return l, w
}

func appendN(t *testing.T, w *Writer, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := w.Append(t.Context(), Entry{Payload: payload(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFencing(t *testing.T) {
	c := openClient(t, t.TempDir())
	l, old := createLog(t, c, "fenced", LogOptions{})

	// The old writer appends as fast as it can while the new one opens.
	var oldAcked []Offset
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			off, err := old.Append(t.Context(), Entry{Payload: []byte("old")})
			if errors.Is(err, ErrFenced) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			oldAcked = append(oldAcked, off)
		}
	})
	appendN(t, old, 0, 1) // let the old writer get going
	nw, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	first, err := nw.Append(t.Context(), Entry{Payload: []byte("new")})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, off := range oldAcked {
		if off >= first {
			t.Fatalf("the fenced writer had offset %d acknowledged, after the new writer's first offset %d", off, first)
		}
	}
	if _, err := old.Append(t.Context(), Entry{Payload: []byte("late")}); !errors.Is(err, ErrFenced) {
		t.Fatalf("append by a fenced writer: %v, want ErrFenced", err)
	}
	if _, err := old.AppendBatch(t.Context(), []Entry{{Payload: []byte("late")}}); !errors.Is(err, ErrFenced) {
		t.Fatalf("batch by a fenced writer: %v, want ErrFenced", err)
	}
	info, _ := l.Info(t.Context())
	if info.Epoch != 2 {
		t.Fatalf("epoch %d after two writers, want 2", info.Epoch)
	}
}

func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	l, w := createLog(t, c, "trunc", LogOptions{SegmentBytes: 4096})
	appendN(t, w, 0, 500)
	before, _ := l.Info(t.Context())

	if err := l.Truncate(t.Context(), 300); err != nil {
		t.Fatal(err)
	}
	info, _ := l.Info(t.Context())
	if info.Start != 300 || info.End != 500 || info.Segments >= before.Segments {
		t.Fatalf("after Truncate(300): %+v (before: %d segments)", info, before.Segments)
	}
	_, err := l.OpenReader(t.Context(), 299)
	var te *TruncatedError
	if !errors.As(err, &te) || te.Start != 300 || !errors.Is(err, ErrTruncated) {
		t.Fatalf("read below the start: %v, want a TruncatedError saying the log starts at 300", err)
	}
	if got := readAll(t, l, 300); string(got[0].Payload) != string(payload(300)) || len(got) != 200 {
		t.Fatalf("read from the start: %d entries, first %q", len(got), got[0].Payload)
	}
	// The start never moves back, and cannot pass the end.
	if err := l.Truncate(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	if info, _ := l.Info(t.Context()); info.Start != 300 {
		t.Fatalf("Truncate(100) moved the start to %d", info.Start)
	}
	if err := l.Truncate(t.Context(), 501); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Truncate past the end: %v, want ErrOutOfRange", err)
	}
	// A reader that falls below a new start is told so.
	r, _ := l.OpenReader(t.Context(), 300)
	if _, err := r.Next(t.Context()); err != nil {
		t.Fatal(err)
	}
	l.Truncate(t.Context(), 490)
	for {
		if _, err := r.Next(t.Context()); err != nil {
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("reader below the new start: %v, want ErrTruncated", err)
			}
			break
		}
	}
	// The start survives a restart.
	c.Close()
	c = openClient(t, dir)
	l, _ = c.OpenLog(t.Context(), "trunc")
	if info, _ := l.Info(t.Context()); info.Start != 490 || info.End != 500 {
		t.Fatalf("after reopen: %+v", info)
	}
}

func TestRetention(t *testing.T) {
	old := time.Now().Add(-2 * time.Hour)
	for _, tc := range []struct {
		name  string
		opts  LogOptions
		entry func(i int) Entry
		check func(info LogInfo) bool
	}{
		{"bytes", LogOptions{RetentionBytes: 16 << 10},
			func(i int) Entry { return Entry{Payload: make([]byte, 500)} },
			func(info LogInfo) bool { return info.Bytes >= 16<<10 && info.Bytes <= 16<<10+4096 }},
		{"entries", LogOptions{RetentionEntries: 100},
			func(i int) Entry { return Entry{Payload: payload(i)} },
			func(info LogInfo) bool { return info.End-info.Start <= 100+4096/10 && info.End-info.Start >= 100 }},
		{"age", LogOptions{RetentionAge: time.Hour},
			func(i int) Entry {
				if i < 900 {
					return Entry{Payload: payload(i), Time: old}
				}
				return Entry{Payload: payload(i)}
			},
			func(info LogInfo) bool { return info.Start > 0 && info.Start <= 900 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := openClient(t, dir)
			tc.opts.SegmentBytes = 4096
			l, w := createLog(t, c, "ret", tc.opts)
			for i := range 1000 {
				if _, err := w.Append(t.Context(), tc.entry(i)); err != nil {
					t.Fatal(err)
				}
			}
			c.Close()
			c = openClient(t, dir) // retention runs when a log is opened
			l, _ = c.OpenLog(t.Context(), "ret")
			info, _ := l.Info(t.Context())
			if info.End != 1000 || !tc.check(info) {
				t.Fatalf("after retention: %+v", info)
			}
			if _, err := l.OpenReader(t.Context(), 0); !errors.Is(err, ErrTruncated) {
				t.Fatalf("read from 0: %v, want ErrTruncated", err)
			}
			segs, _ := filepath.Glob(filepath.Join(dir, "logs", "*", "*.seg"))
			if len(segs) != info.Segments {
				t.Fatalf("%d segment files on disk, Info says %d", len(segs), info.Segments)
			}
		})
	}
}

// segmentFiles returns the log's segment files, oldest first.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "logs", "*", "*.seg"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("segment files: %v, %v", segs, err)
	}
	return segs
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, at)
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// abandon leaves c's logs as a crash would, with the last segment open (Close
// would seal it), and releases the data directory for the next Open.
func abandon(t *testing.T, c *Client) {
	t.Helper()
	embeddedOf(c).mu.Lock()
	embeddedOf(c).closed = true
	embeddedOf(c).mu.Unlock()
	embeddedOf(c).cancel()
	embeddedOf(c).wg.Wait()
	if err := embeddedOf(c).meta.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCorruption(t *testing.T) {
	setup := func(t *testing.T) (string, []string) {
		dir := t.TempDir()
		c := openClient(t, dir)
		_, w := createLog(t, c, "bad", LogOptions{SegmentBytes: 4096})
		appendN(t, w, 0, 300)
		abandon(t, c)
		return dir, segmentFiles(t, dir)
	}
	t.Run("open segment, valid data follows", func(t *testing.T) {
		dir, segs := setup(t)
		last := segs[len(segs)-1]
		flipByte(t, last, 100)
		before, _ := os.Stat(last)
		c := openClient(t, dir)
		l, err := c.OpenLog(t.Context(), "bad")
		if err != nil {
			t.Fatalf("open: %v, want the log opened degraded", err)
		}
		w, err := l.OpenWriter(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(t.Context(), Entry{Payload: []byte("x")}); !errors.Is(err, ErrDamaged) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), last) {
			t.Fatalf("append: %v, want ErrDamaged naming %s", err, last)
		}
		c.Close()
		if after, _ := os.Stat(last); after.Size() != before.Size() {
			t.Fatalf("the corrupt segment went from %d to %d bytes", before.Size(), after.Size())
		}
	})
	t.Run("torn tail", func(t *testing.T) {
		dir, segs := setup(t)
		last := segs[len(segs)-1]
		st, _ := os.Stat(last)
		os.Truncate(last, st.Size()-3)
		c := openClient(t, dir)
		l, err := c.OpenLog(t.Context(), "bad")
		if err != nil {
			t.Fatalf("open after a torn tail: %v", err)
		}
		if info, _ := l.Info(t.Context()); info.End != 299 {
			t.Fatalf("end %d after losing the last batch, want 299", info.End)
		}
	})
	t.Run("sealed segment", func(t *testing.T) {
		dir, segs := setup(t)
		flipByte(t, segs[0], 200)
		c := openClient(t, dir)
		l, err := c.OpenLog(t.Context(), "bad")
		if err != nil {
			t.Fatal(err) // sealed segments are not scanned at open
		}
		r, _ := l.OpenReader(t.Context(), 0)
		for {
			_, err := r.Next(t.Context())
			if err == nil {
				continue
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != segs[0] || ce.Pos > 200 {
				t.Fatalf("read over a flipped byte: %v, want a CorruptError in %s before byte 200", err, segs[0])
			}
			break
		}
	})
}

func TestLimitsAndNames(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	l, w := createLog(t, c, "limits", LogOptions{MaxEntryBytes: 1000})
	if _, err := w.Append(t.Context(), Entry{Payload: make([]byte, 1001)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize entry: %v, want ErrTooLarge", err)
	}
	if _, err := w.Append(t.Context(), Entry{Payload: make([]byte, 900), Properties: map[string][]byte{"key": make([]byte, 100)}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("entry oversize through its properties: %v, want ErrTooLarge", err)
	}
	if _, err := w.Append(t.Context(), Entry{Payload: make([]byte, 1000)}); err != nil {
		t.Fatal(err)
	}
	if info, _ := l.Info(t.Context()); info.End != 1 {
		t.Fatalf("end %d: a refused entry took an offset", info.End)
	}
	for _, bad := range []string{"", "a b", "/a", "a/", "a//b", "é", strings.Repeat("a", 256), ".", "..", "a/..", "../a", "a/./b"} {
		if _, err := c.CreateLog(t.Context(), bad, LogOptions{}); !errors.Is(err, ErrInvalidName) {
			t.Errorf("CreateLog(%q): %v, want ErrInvalidName", bad, err)
		}
	}
	if _, err := c.CreateLog(t.Context(), "t/db/ch_1.v-2", LogOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLog(t.Context(), ".../a./.b/..c", LogOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLog(t.Context(), "limits", LogOptions{}); !errors.Is(err, ErrExist) {
		t.Fatalf("duplicate CreateLog: %v, want ErrExist", err)
	}
	if _, err := c.OpenLog(t.Context(), "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OpenLog of a missing log: %v, want ErrNotFound", err)
	}
	if _, err := c.CreateLog(t.Context(), "x", LogOptions{SegmentBytes: 10}); err == nil {
		t.Fatal("a 10-byte segment size was accepted")
	}
	if _, err := Open(t.Context(), Options{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of the same directory: %v, want ErrLocked", err)
	}
}

func TestDeleteAndList(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	for _, name := range []string{"a/1", "a/2", "b/1"} {
		_, w := createLog(t, c, name, LogOptions{})
		appendN(t, w, 0, 3)
	}
	infos, err := c.ListLogs(t.Context(), "a/")
	if err != nil || len(infos) != 2 || infos[0].Name != "a/1" || infos[1].End != 3 {
		t.Fatalf("ListLogs(a/): %+v, %v", infos, err)
	}
	l, _ := c.OpenLog(t.Context(), "a/1")
	r, _ := l.OpenReader(t.Context(), 3)
	if err := c.DeleteLog(t.Context(), "a/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("reader of a deleted log: %v, want ErrNotFound", err)
	}
	if _, err := c.OpenLog(t.Context(), "a/1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OpenLog of a deleted log: %v", err)
	}
	dirs, _ := filepath.Glob(filepath.Join(dir, "logs", "*"))
	if len(dirs) != 2 {
		t.Fatalf("%d log directories after deleting one of three", len(dirs))
	}
	// Re-created under the same name, it is a new, empty log.
	l, err = c.CreateLog(t.Context(), "a/1", LogOptions{})
	if info, _ := l.Info(t.Context()); err != nil || info.End != 0 {
		t.Fatalf("re-created log: %+v, %v", info, err)
	}
}

func TestUnsafeFsyncModes(t *testing.T) {
	for _, mode := range []string{"interval:5ms", "never"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			fsync, err := ParseFsync(mode)
			if err != nil {
				t.Fatal(err)
			}
			c := openClient(t, dir)
			_, w := createLog(t, c, "fast", LogOptions{Fsync: fsync})
			appendN(t, w, 0, 100)
			c.Close() // a clean close syncs
			c = openClient(t, dir)
			l, _ := c.OpenLog(t.Context(), "fast")
			if got := readAll(t, l, 0); len(got) != 100 || l.Options().Fsync != fsync {
				t.Fatalf("after a clean close: %d entries, fsync %v", len(got), l.Options().Fsync)
			}
		})
	}
	for _, bad := range []string{"sometimes", "interval:", "interval:-1s"} {
		if _, err := ParseFsync(bad); err == nil {
			t.Errorf("ParseFsync(%q) succeeded", bad)
		}
	}
}
