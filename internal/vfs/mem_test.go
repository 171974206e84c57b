package vfs

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

const seeds = 2000

func seeded(seed int) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 0)) }

// setup returns a MemFS with a durable /d holding a durable, empty file
// /d/f.
func setup(t *testing.T) (*MemFS, File) {
	t.Helper()
	fs := NewMem()
	mkdir(t, fs, "/d")
	f, err := fs.Create("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	return fs, f
}

// mkdir creates dir durably.
func mkdir(t *testing.T, fs FS, dir string) {
	t.Helper()
	if err := MkdirAllSync(fs, dir); err != nil {
		t.Fatal(err)
	}
}

func syncFile(t *testing.T, f File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// pattern returns n bytes that differ from those at other positions and
// from the output of other calls with another tag.
func pattern(tag byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = tag ^ byte(i*7) ^ byte(i>>8)
	}
	return b
}

// TestCrashKeepsAPrefix checks every crash outcome against the model: the
// synced bytes, then some whole unsynced writes, then possibly part of the
// next write cut at a sector boundary, then possibly garbage up to the end of
// that sector but not past the write.
func TestCrashKeepsAPrefix(t *testing.T) {
	fs, f := setup(t)
	synced := pattern(1, 700)
	write(t, f, string(synced))
	syncFile(t, f)
	want := bytes.Clone(synced)
	ends := []int{len(want)} // where each unsynced write ends
	for i, n := range []int{10, 1500, 512, 3, 2000} {
		w := pattern(byte(i+2), n)
		write(t, f, string(w))
		want = append(want, w...)
		ends = append(ends, len(want))
	}

	var whole, torn, garbage int
	for seed := range seeds {
		got := content(t, fs.Crash(seeded(seed)), "/d/f")
		outcome, ok := classify(got, want, ends)
		if !ok {
			t.Fatalf("seed %d: %d bytes survive, which the crash model does not allow", seed, len(got))
		}
		switch outcome {
		case "whole":
			whole++
		case "torn":
			torn++
		case "garbage":
			garbage++
		}
	}
	t.Logf("over %d seeds: %d whole prefixes, %d torn, %d with garbage", seeds, whole, torn, garbage)
	if whole == 0 || torn == 0 || garbage == 0 {
		t.Errorf("over %d seeds: %d whole prefixes, %d torn, %d with garbage; want each", seeds, whole, torn, garbage)
	}
}

// classify reports how got arose from want, whose unsynced writes end at
// ends[1:], or false if the crash model does not allow it.
func classify(got, want []byte, ends []int) (string, bool) {
	if len(got) >= ends[0] && len(got) <= len(want) && bytes.Equal(got, want[:len(got)]) {
		if slices.Contains(ends, len(got)) {
			return "whole", true
		}
		if len(got)%SectorBytes == 0 {
			return "torn", true
		}
	}
	for i := 0; i+1 < len(ends); i++ {
		next := ends[i+1]
		for cut := ends[i]; cut < next; cut = (cut/SectorBytes + 1) * SectorBytes {
			if len(got) == min((cut/SectorBytes+1)*SectorBytes, next) && bytes.Equal(got[:cut], want[:cut]) {
				return "garbage", true
			}
		}
	}
	return "", false
}

// TestCrashReuse checks the crash outcomes of writes over a synced file
// opened by Reuse: the old bytes stay wherever the surviving prefix of the
// writes does not reach, and where it does, they are new, except for
// garbage after a tear, within its sector and the torn write.
func TestCrashReuse(t *testing.T) {
	fs, f := setup(t)
	old := pattern(1, 3000)
	write(t, f, string(old))
	syncFile(t, f)
	closeFile(t, f)
	f, err := fs.Reuse("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(old)
	ends := []int{0}
	for i, n := range []int{700, 1000, 13} {
		w := pattern(byte(i+2), n)
		write(t, f, string(w))
		copy(want[ends[i]:], w)
		ends = append(ends, ends[i]+n)
	}

	var outcomes [3]int // whole, torn, garbage
	untouched := 0
	for seed := range seeds {
		got := content(t, fs.Crash(seeded(seed)), "/d/f")
		kind, ok := classifyOver(got, old, want, ends)
		if !ok {
			t.Fatalf("seed %d: an outcome the crash model does not allow", seed)
		}
		outcomes[kind]++
		if bytes.Equal(got, old) {
			untouched++
		}
	}
	if slices.Contains(outcomes[:], 0) || untouched == 0 {
		t.Errorf("over %d seeds: %d whole prefixes (%d of none), %d torn, %d with garbage; want each", seeds, outcomes[0], untouched, outcomes[1], outcomes[2])
	}

	syncFile(t, f)
	if got := content(t, fs.Crash(seeded(0)), "/d/f"); !bytes.Equal(got, want) {
		t.Error("synced writes over the file did not all survive a crash")
	}
}

// classifyOver reports how got arose from the writes over old that make
// it want, whose ends are ends[1:]: 0 for a whole prefix of them, 1 for a
// tear, 2 for garbage after a tear (or at the start of a write); false if
// the model does not allow it.
func classifyOver(got, old, want []byte, ends []int) (int, bool) {
	if len(got) != len(old) {
		return 0, false
	}
	// The surviving bytes of each write: those before cut are new, and,
	// with garbage, those up to g are anything.
	match := func(garbage bool) (int, bool) {
		for i := 0; i+1 < len(ends); i++ {
			for cut := ends[i]; ; cut = (cut/SectorBytes + 1) * SectorBytes {
				cut = min(cut, ends[i+1])
				g := cut
				if garbage {
					g = min((cut/SectorBytes+1)*SectorBytes, ends[i+1])
				}
				if bytes.Equal(got[:cut], want[:cut]) && bytes.Equal(got[g:], old[g:]) {
					return cut, true
				}
				if cut == ends[i+1] {
					break
				}
			}
		}
		return 0, false
	}
	if cut, ok := match(false); ok {
		if slices.Contains(ends, cut) {
			return 0, true
		}
		return 1, true
	}
	_, ok := match(true)
	return 2, ok
}

func TestCrashKeepsSyncedData(t *testing.T) {
	fs, f := setup(t)
	synced := pattern(1, 3000)
	write(t, f, string(synced))
	if err := f.Truncate(2500); err != nil {
		t.Fatal(err)
	}
	synced = synced[:2500]
	syncFile(t, f)
	write(t, f, string(pattern(2, 1000)))
	if err := f.Truncate(100); err != nil {
		t.Fatal(err)
	}
	for seed := range seeds {
		got := content(t, fs.Crash(seeded(seed)), "/d/f")
		// Either the unsynced truncate was lost, or it was kept and
		// everything after it too.
		if len(got) < len(synced) {
			if !bytes.Equal(got, synced[:100]) {
				t.Fatalf("seed %d: %d bytes survive, not the truncated file", seed, len(got))
			}
		} else if !bytes.Equal(got[:len(synced)], synced) {
			t.Fatalf("seed %d: synced bytes lost", seed)
		}
	}
}

func TestCrashTruncateKeptOrDropped(t *testing.T) {
	fs, f := setup(t)
	write(t, f, "hello")
	syncFile(t, f)
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for seed := range 100 {
		got := string(content(t, fs.Crash(seeded(seed)), "/d/f"))
		if got != "hello" && got != "he" {
			t.Fatalf("seed %d: %q survives", seed, got)
		}
		seen[got] = true
	}
	if len(seen) != 2 {
		t.Errorf("outcomes %v; want the truncate both kept and dropped", seen)
	}
}

// TestCrashNamespace covers creations, removals and renames, which are lost
// unless their directory is synced.
func TestCrashNamespace(t *testing.T) {
	for _, c := range []struct {
		name    string
		run     func(fs *MemFS) error // after /d/f is durable with "old"
		want    map[string]string     // what survives of /d/f and /d/g
		wantNow map[string]string     // what survives after SyncDir("/d")
	}{
		{
			name:    "Create",
			run:     func(fs *MemFS) error { return createSynced(fs, "/d/g", "new") },
			want:    map[string]string{"f": "old"},
			wantNow: map[string]string{"f": "old", "g": "new"},
		},
		{
			name:    "Remove",
			run:     func(fs *MemFS) error { return fs.Remove("/d/f") },
			want:    map[string]string{"f": "old"},
			wantNow: map[string]string{},
		},
		{
			name:    "Rename",
			run:     func(fs *MemFS) error { return fs.Rename("/d/f", "/d/g") },
			want:    map[string]string{"f": "old"},
			wantNow: map[string]string{"g": "old"},
		},
		{
			name: "RenameReplacing",
			run: func(fs *MemFS) error {
				if err := createSynced(fs, "/d/g", "new"); err != nil {
					return err
				}
				if err := fs.SyncDir("/d"); err != nil {
					return err
				}
				return fs.Rename("/d/g", "/d/f")
			},
			want:    map[string]string{"f": "old", "g": "new"},
			wantNow: map[string]string{"f": "new"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, f := setup(t)
			write(t, f, "old")
			syncFile(t, f)
			if err := c.run(fs); err != nil {
				t.Fatal(err)
			}
			for seed := range 20 {
				checkFiles(t, fs.Crash(seeded(seed)), c.want)
			}
			if err := fs.SyncDir("/d"); err != nil {
				t.Fatal(err)
			}
			checkFiles(t, fs.Crash(seeded(0)), c.wantNow)
		})
	}
}

func createSynced(fs FS, name, content string) error {
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte(content)); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// checkFiles checks that /d holds exactly the files in want.
func checkFiles(t *testing.T, fs FS, want map[string]string) {
	t.Helper()
	names, err := fs.List("/d")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range names {
		got[n] = string(content(t, fs, "/d/"+n))
	}
	if !maps.Equal(got, want) {
		t.Errorf("after the crash /d holds %v, want %v", got, want)
	}
}

func TestCrashIsDeterministicPerSeed(t *testing.T) {
	fs, f := setup(t)
	for i := range 5 {
		write(t, f, string(pattern(byte(i), 999)))
	}
	for seed := range 50 {
		a := content(t, fs.Crash(seeded(seed)), "/d/f")
		b := content(t, fs.Crash(seeded(seed)), "/d/f")
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d gave two outcomes", seed)
		}
	}
}

func TestCrashSharesHardLinks(t *testing.T) {
	// A rename across directories with only the target synced leaves the
	// file under both names; both must show the same content.
	fs, f := setup(t)
	mkdir(t, fs, "/e")
	for i := range 5 {
		write(t, f, string(pattern(byte(i), 999)))
	}
	if err := fs.Rename("/d/f", "/e/f"); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir("/e"); err != nil {
		t.Fatal(err)
	}
	for seed := range 50 {
		after := fs.Crash(seeded(seed))
		if !bytes.Equal(content(t, after, "/d/f"), content(t, after, "/e/f")) {
			t.Fatalf("seed %d: the two names differ", seed)
		}
	}
}

// workload creates a durable file and appends one byte at a time, syncing
// after each; it returns the first error.
func workload(fs FS, n int) error {
	f, err := fs.Create("/d/f")
	if err != nil {
		return err
	}
	if err := fs.SyncDir("/d"); err != nil {
		return err
	}
	for i := range n {
		if _, err := f.Write([]byte{byte(i)}); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return f.Close()
}

func TestCrashAfter(t *testing.T) {
	const writes = 10
	fs := NewMem()
	mkdir(t, fs, "/d")
	base := fs.Ops()
	if err := workload(fs, writes); err != nil {
		t.Fatal(err)
	}
	total := fs.Ops() - base
	if total != 2+2*writes {
		t.Fatalf("workload took %d ops, want %d", total, 2+2*writes)
	}
	for n := range total {
		fs := NewMem()
		mkdir(t, fs, "/d")
		fs.CrashAfter(n)
		if err := workload(fs, writes); !errors.Is(err, ErrCrashed) {
			t.Fatalf("crash after %d: workload returned %v, want ErrCrashed", n, err)
		}
		if fs.Ops()-base != n {
			t.Errorf("crash after %d: %d ops counted", n, fs.Ops()-base)
		}
		if _, err := fs.Stat("/d"); !errors.Is(err, ErrCrashed) {
			t.Errorf("crash after %d: Stat after the crash returned %v, want ErrCrashed", n, err)
		}
		for seed := range 10 {
			after := fs.Crash(seeded(seed))
			if n < 2 {
				if _, err := after.Stat("/d/f"); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("crash after %d: Stat of the file: %v, want os.ErrNotExist", n, err)
				}
				continue
			}
			// Ops 3, 5, ... are writes, 4, 6, ... syncs.
			synced, written := (n-2)/2, (n-1)/2
			got := content(t, after, "/d/f")
			if len(got) != synced && len(got) != written {
				t.Errorf("crash after %d: %d bytes survive, want %d or %d", n, len(got), synced, written)
			}
			// The last unsynced byte may be garbage.
			for i, b := range got[:synced] {
				if b != byte(i) {
					t.Errorf("crash after %d: byte %d is %d", n, i, b)
				}
			}
		}
	}
}

func TestCrashAfterZeroStopsReads(t *testing.T) {
	fs, f := setup(t)
	write(t, f, "x")
	fs.CrashAfter(0)
	for name, err := range map[string]error{
		"ReadAt": func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }(),
		"Write":  func() error { _, err := f.Write([]byte("y")); return err }(),
		"Open":   func() error { _, err := fs.Open("/d/f"); return err }(),
		"List":   func() error { _, err := fs.List("/d"); return err }(),
		"Lock":   func() error { _, err := fs.Lock("/d/LOCK"); return err }(),
		"Close":  f.Close(),
	} {
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("%s: %v, want ErrCrashed", name, err)
		}
	}
	// The failed Write is not applied: at most "x", or garbage in its
	// place, survives.
	for seed := range 20 {
		if got := content(t, fs.Crash(seeded(seed)), "/d/f"); len(got) > 1 {
			t.Fatalf("seed %d: %q survives", seed, got)
		}
	}
}

func TestMemLockIsPerFS(t *testing.T) {
	a, b := NewMem(), NewMem()
	la, err := a.Lock("LOCK")
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	lb, err := b.Lock("LOCK")
	if err != nil {
		t.Fatalf("Lock in another MemFS: %v", err)
	}
	lb.Close()
}

// TestCrashDirectories covers the creation and removal of directories,
// which are lost, or come back, unless their parent is synced.
func TestCrashDirectories(t *testing.T) {
	syncDir := func(dir string) func(fs *MemFS) error {
		return func(fs *MemFS) error { return fs.SyncDir(dir) }
	}
	// Each run starts from a durable /d holding a durable /d/f with "f"
	// and a durable, empty /d/old.
	for _, c := range []struct {
		name string
		run  []func(fs *MemFS) error
		want []string // what tree lists under /d after a crash
	}{
		{
			name: "MkdirAll",
			run:  []func(fs *MemFS) error{mkdirWithFile("/d/e")},
			want: []string{"f=f", "old/"},
		},
		{
			name: "MkdirAllSynced",
			run:  []func(fs *MemFS) error{mkdirWithFile("/d/e"), syncDir("/d")},
			want: []string{"e/", "e/g=g", "f=f", "old/"},
		},
		{
			name: "NestedChildSynced",
			run:  []func(fs *MemFS) error{mkdirWithFile("/d/a/b"), syncDir("/d/a")},
			want: []string{"f=f", "old/"},
		},
		{
			name: "NestedParentSynced",
			run:  []func(fs *MemFS) error{mkdirWithFile("/d/a/b"), syncDir("/d")},
			want: []string{"a/", "f=f", "old/"},
		},
		{
			name: "NestedAllSynced",
			run:  []func(fs *MemFS) error{mkdirWithFile("/d/a/b"), syncDir("/d/a"), syncDir("/d")},
			want: []string{"a/", "a/b/", "a/b/g=g", "f=f", "old/"},
		},
		{
			name: "Remove",
			run:  []func(fs *MemFS) error{func(fs *MemFS) error { return fs.Remove("/d/old") }},
			want: []string{"f=f", "old/"},
		},
		{
			name: "RemoveSynced",
			run:  []func(fs *MemFS) error{func(fs *MemFS) error { return fs.Remove("/d/old") }, syncDir("/d")},
			want: []string{"f=f"},
		},
		{
			name: "RemoveAll",
			run:  []func(fs *MemFS) error{func(fs *MemFS) error { return fs.RemoveAll("/d") }},
			want: []string{"f=f", "old/"},
		},
		{
			name: "RemoveAllNested",
			run: []func(fs *MemFS) error{
				mkdirWithFile("/d/a/b"), syncDir("/d/a"), syncDir("/d"),
				func(fs *MemFS) error { return fs.RemoveAll("/d/a") },
			},
			want: []string{"a/", "a/b/", "a/b/g=g", "f=f", "old/"},
		},
		{
			name: "RemoveAllSynced",
			run: []func(fs *MemFS) error{
				mkdirWithFile("/d/a/b"), syncDir("/d/a"), syncDir("/d"),
				func(fs *MemFS) error { return fs.RemoveAll("/d/a") }, syncDir("/d"),
			},
			want: []string{"f=f", "old/"},
		},
		{
			// The old directory comes back, not the new one.
			name: "RemoveAndMkdir",
			run: []func(fs *MemFS) error{
				func(fs *MemFS) error { return fs.Remove("/d/old") },
				mkdirWithFile("/d/old"),
			},
			want: []string{"f=f", "old/"},
		},
		{
			name: "FileInNewDirectorySynced",
			run: []func(fs *MemFS) error{
				func(fs *MemFS) error { return fs.MkdirAll("/d/e") },
				func(fs *MemFS) error { return createSynced(fs, "/d/e/g", "g") },
				syncDir("/d/e"),
			},
			want: []string{"f=f", "old/"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, f := setup(t)
			write(t, f, "f")
			syncFile(t, f)
			mkdir(t, fs, "/d/old")
			for _, step := range c.run {
				if err := step(fs); err != nil {
					t.Fatal(err)
				}
			}
			for seed := range 5 {
				if got := tree(t, fs.Crash(seeded(seed)), "/d"); !slices.Equal(got, c.want) {
					t.Errorf("seed %d: after the crash /d holds %q, want %q", seed, got, c.want)
				}
			}
		})
	}
}

// mkdirWithFile makes dir, not durably, holding a synced file g with "g".
func mkdirWithFile(dir string) func(fs *MemFS) error {
	return func(fs *MemFS) error {
		if err := fs.MkdirAll(dir); err != nil {
			return err
		}
		if err := createSynced(fs, dir+"/g", "g"); err != nil {
			return err
		}
		return fs.SyncDir(dir)
	}
}

// tree lists what is under dir, sorted: "name/" for a directory and
// "name=content" for a file, with paths relative to dir. A missing dir holds
// nothing.
func tree(t *testing.T, fs FS, dir string) []string {
	t.Helper()
	var out []string
	var walk func(rel string)
	walk = func(rel string) {
		names, err := fs.List(dir + "/" + rel)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := rel + n
			fi, err := fs.Stat(dir + "/" + p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				out = append(out, p+"/")
				walk(p + "/")
				continue
			}
			out = append(out, p+"="+string(content(t, fs, dir+"/"+p)))
		}
	}
	walk("")
	return out
}

// TestMkdirAllSync checks that MkdirAllSync makes every level it creates
// durable, and makes durable a directory that an earlier MkdirAll left
// unsynced.
func TestMkdirAllSync(t *testing.T) {
	fs := NewMem()
	mkdir(t, fs, "/a/b/c")
	if err := fs.MkdirAll("/a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, fs.Crash(seeded(0)), "/a"), []string{"b/", "b/c/"}; !slices.Equal(got, want) {
		t.Fatalf("after MkdirAll: /a holds %q, want %q", got, want)
	}
	mkdir(t, fs, "/a/b/c/d")
	if got, want := tree(t, fs.Crash(seeded(0)), "/a"), []string{"b/", "b/c/", "b/c/d/"}; !slices.Equal(got, want) {
		t.Fatalf("after MkdirAllSync: /a holds %q, want %q", got, want)
	}
	// Over a file: MkdirAll's error.
	if err := createSynced(fs, "/a/file", ""); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllSync(fs, "/a/file/x"); err == nil {
		t.Fatal("MkdirAllSync under a file succeeded")
	}
}
