package vfs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestFS runs the FS contract against every implementation: each subtest
// gets a fresh FS and an existing, empty directory in it.
func TestFS(t *testing.T) {
	never := func(Op, string) error { return nil }
	impls := []struct {
		name string
		new  func(t *testing.T) (FS, string)
	}{
		{"OS", func(t *testing.T) (FS, string) { return OS, t.TempDir() }},
		{"Mem", func(t *testing.T) (FS, string) { return memWithDir(t, NewMem()) }},
		{"MemRelative", func(t *testing.T) (FS, string) { return NewMem(), "." }},
		{"WithErrors(OS)", func(t *testing.T) (FS, string) { return WithErrors(OS, never), t.TempDir() }},
		{"WithErrors(Mem)", func(t *testing.T) (FS, string) { return memWithDir(t, WithErrors(NewMem(), never)) }},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			for _, c := range fsCases {
				t.Run(c.name, func(t *testing.T) {
					fs, dir := impl.new(t)
					c.run(t, fs, dir)
				})
			}
		})
	}
}

func memWithDir(t *testing.T, fs FS) (FS, string) {
	t.Helper()
	const dir = "/data/test"
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	return fs, dir
}

var fsCases = []struct {
	name string
	run  func(t *testing.T, fs FS, dir string)
}{
	{"WriteBuffers", func(t *testing.T, fs FS, dir string) {
		// More buffers than one writev takes, empty ones among them, after
		// a plain Write, and one more Write after.
		name := filepath.Join(dir, "a")
		f := create(t, fs, name, "head:")
		var bufs [][]byte
		var want strings.Builder
		want.WriteString("head:")
		for i := range 2500 {
			b := []byte(strings.Repeat(string(rune('a'+i%26)), i%7))
			bufs = append(bufs, b)
			want.Write(b)
		}
		n, err := WriteBuffers(f, bufs)
		if err != nil || n != int64(want.Len()-len("head:")) {
			t.Fatalf("WriteBuffers = %d, %v; want %d", n, err, want.Len()-len("head:"))
		}
		if n, err := WriteBuffers(f, [][]byte{nil, {}}); n != 0 || err != nil {
			t.Fatalf("WriteBuffers of empty buffers = %d, %v", n, err)
		}
		write(t, f, ":tail")
		want.WriteString(":tail")
		checkSize(t, f, int64(want.Len()))
		closeFile(t, f)
		checkContent(t, fs, name, want.String())
	}},
	{"CreateIsExclusive", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "a")
		closeFile(t, create(t, fs, name, "x"))
		if _, err := fs.Create(name); !errors.Is(err, os.ErrExist) {
			t.Fatalf("Create of an existing file: %v, want os.ErrExist", err)
		}
		checkContent(t, fs, name, "x")
	}},
	{"WriteFile", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "w")
		for _, want := range []string{"first, and longer", "second"} {
			if err := WriteFile(fs, name, []byte(want)); err != nil {
				t.Fatal(err)
			}
			checkContent(t, fs, name, want)
		}
		if err := WriteFile(fs, filepath.Join(dir, "no", "w"), nil); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("WriteFile in a missing directory: %v, want os.ErrNotExist", err)
		}
	}},
	{"Missing", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "missing")
		calls := map[string]func() error{
			"Open":            func() error { _, err := fs.Open(name); return err },
			"OpenRW":          func() error { _, err := fs.OpenRW(name); return err },
			"Reuse":           func() error { _, err := fs.Reuse(name); return err },
			"Stat":            func() error { _, err := fs.Stat(name); return err },
			"Remove":          func() error { return fs.Remove(name) },
			"Rename":          func() error { return fs.Rename(name, filepath.Join(dir, "b")) },
			"List":            func() error { _, err := fs.List(name); return err },
			"SyncDir":         func() error { return fs.SyncDir(name) },
			"CreateInMissing": func() error { _, err := fs.Create(filepath.Join(name, "a")); return err },
		}
		for call, f := range calls {
			if err := f(); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %v, want os.ErrNotExist", call, err)
			}
		}
		if err := fs.RemoveAll(name); err != nil {
			t.Errorf("RemoveAll of a missing path: %v", err)
		}
	}},
	{"WriteAppendsAndReadAt", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "a")
		f := create(t, fs, name, "hello")
		write(t, f, " world")
		if f.Name() != name {
			t.Errorf("Name = %q, want %q", f.Name(), name)
		}
		checkSize(t, f, 11)
		buf := make([]byte, 5)
		if n, err := f.ReadAt(buf, 6); n != 5 || err != nil || string(buf) != "world" {
			t.Errorf("ReadAt(6) = %d, %v, %q", n, err, buf)
		}
		if n, err := f.ReadAt(buf, 8); n != 3 || err != io.EOF || string(buf[:n]) != "rld" {
			t.Errorf("ReadAt over the end = %d, %v, %q; want 3, EOF, \"rld\"", n, err, buf[:n])
		}
		if n, err := f.ReadAt(buf, 11); n != 0 || err != io.EOF {
			t.Errorf("ReadAt at the end = %d, %v; want 0, EOF", n, err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		closeFile(t, f)

		f, err := fs.OpenRW(name)
		if err != nil {
			t.Fatal(err)
		}
		write(t, f, "!")
		closeFile(t, f)
		checkContent(t, fs, name, "hello world!")
		fi, err := fs.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != 12 || fi.IsDir() || fi.Name() != "a" {
			t.Errorf("Stat = size %d, dir %v, name %q", fi.Size(), fi.IsDir(), fi.Name())
		}
	}},
	{"TruncateThenAppend", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "a")
		f := create(t, fs, name, "hello")
		if err := f.Truncate(3); err != nil {
			t.Fatal(err)
		}
		checkSize(t, f, 3)
		write(t, f, "XY")
		if err := f.Truncate(7); err != nil {
			t.Fatal(err)
		}
		write(t, f, "Z")
		closeFile(t, f)
		checkContent(t, fs, name, "helXY\x00\x00Z")
	}},
	{"ReuseWritesOver", func(t *testing.T, fs FS, dir string) {
		// Over the start, leaving the old bytes after it, then past the
		// end; a Truncate moves the write position to the new end.
		name := filepath.Join(dir, "a")
		f := create(t, fs, name, "hello world")
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		closeFile(t, f)
		f, err := fs.Reuse(name)
		if err != nil {
			t.Fatal(err)
		}
		write(t, f, "HE")
		checkSize(t, f, 11)
		if _, err := WriteBuffers(f, [][]byte{[]byte("LL"), []byte("O")}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 11)
		if n, err := f.ReadAt(buf, 0); n != 11 || err != nil || string(buf) != "HELLO world" {
			t.Errorf("ReadAt(0) = %d, %v, %q; want \"HELLO world\"", n, err, buf[:n])
		}
		write(t, f, " WORLD and more")
		checkSize(t, f, 20)
		if err := f.Truncate(7); err != nil {
			t.Fatal(err)
		}
		write(t, f, "!")
		closeFile(t, f)
		checkContent(t, fs, name, "HELLO W!")
	}},
	{"OpenIsReadOnly", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "a")
		closeFile(t, create(t, fs, name, "x"))
		f, err := fs.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write([]byte("y")); err == nil {
			t.Error("Write to a read-only file succeeded")
		}
		checkContent(t, fs, name, "x")
	}},
	{"ListIsSorted", func(t *testing.T, fs FS, dir string) {
		for _, n := range []string{"c", "a", "b"} {
			closeFile(t, create(t, fs, filepath.Join(dir, n), ""))
		}
		if err := fs.MkdirAll(filepath.Join(dir, "d", "e")); err != nil {
			t.Fatal(err)
		}
		got, err := fs.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
			t.Errorf("List = %q, want %q", got, want)
		}
		fi, err := fs.Stat(filepath.Join(dir, "d"))
		if err != nil || !fi.IsDir() {
			t.Errorf("Stat of a directory = %v, %v", fi, err)
		}
		if err := fs.SyncDir(dir); err != nil {
			t.Error(err)
		}
	}},
	{"RenameReplaces", func(t *testing.T, fs FS, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		closeFile(t, create(t, fs, a, "1"))
		closeFile(t, create(t, fs, b, "2"))
		if err := fs.Rename(a, b); err != nil {
			t.Fatal(err)
		}
		checkContent(t, fs, b, "1")
		if _, err := fs.Stat(a); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Stat of the old name: %v, want os.ErrNotExist", err)
		}
	}},
	{"Remove", func(t *testing.T, fs FS, dir string) {
		a, sub := filepath.Join(dir, "a"), filepath.Join(dir, "sub")
		closeFile(t, create(t, fs, a, "1"))
		if err := fs.MkdirAll(sub); err != nil {
			t.Fatal(err)
		}
		closeFile(t, create(t, fs, filepath.Join(sub, "x"), "1"))
		if err := fs.Remove(sub); err == nil {
			t.Error("Remove of a non-empty directory succeeded")
		}
		for _, name := range []string{a, filepath.Join(sub, "x"), sub} {
			if err := fs.Remove(name); err != nil {
				t.Fatal(err)
			}
			if _, err := fs.Stat(name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Stat after Remove: %v, want os.ErrNotExist", err)
			}
		}
	}},
	{"RemoveAll", func(t *testing.T, fs FS, dir string) {
		top := filepath.Join(dir, "top")
		if err := fs.MkdirAll(filepath.Join(top, "a", "b")); err != nil {
			t.Fatal(err)
		}
		closeFile(t, create(t, fs, filepath.Join(top, "a", "b", "x"), "1"))
		closeFile(t, create(t, fs, filepath.Join(top, "y"), "1"))
		if err := fs.RemoveAll(top); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{top, filepath.Join(top, "a", "b"), filepath.Join(top, "a", "b", "x")} {
			if _, err := fs.Stat(name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Stat(%s) after RemoveAll: %v, want os.ErrNotExist", name, err)
			}
		}
		if err := fs.MkdirAll(filepath.Join(top, "a")); err != nil {
			t.Fatal(err)
		}
		if names, err := fs.List(top); err != nil || !slices.Equal(names, []string{"a"}) {
			t.Errorf("List of a recreated directory = %q, %v", names, err)
		}
	}},
	{"LockIsExclusive", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "LOCK")
		l, err := fs.Lock(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Stat(name); err != nil {
			t.Errorf("Lock did not create the file: %v", err)
		}
		if l2, err := fs.Lock(name); !errors.Is(err, ErrLocked) {
			t.Errorf("second Lock: %v, want ErrLocked", err)
			if err == nil {
				l2.Close()
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = fs.Lock(name)
		if err != nil {
			t.Fatalf("Lock after Close: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}},
	{"ReadAtWhileWriting", func(t *testing.T, fs FS, dir string) {
		f := create(t, fs, filepath.Join(dir, "a"), "")
		defer f.Close()
		const n = 200
		chunk := bytes.Repeat([]byte{'x'}, 100)
		var wg sync.WaitGroup
		wg.Go(func() {
			for range n {
				if _, err := f.Write(chunk); err != nil {
					t.Error(err)
					return
				}
			}
		})
		buf := make([]byte, len(chunk))
		for size := int64(0); size < n*int64(len(chunk)); {
			var err error
			if size, err = f.Size(); err != nil {
				t.Fatal(err)
			}
			if size >= int64(len(chunk)) {
				if _, err := f.ReadAt(buf, size-int64(len(chunk))); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf, chunk) {
					t.Fatalf("ReadAt read %q", buf)
				}
			}
		}
		wg.Wait()
	}},
}

func create(t *testing.T, fs FS, name, content string) File {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, content)
	return f
}

func write(t *testing.T, f File, s string) {
	t.Helper()
	if n, err := f.Write([]byte(s)); n != len(s) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
}

func closeFile(t *testing.T, f File) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func checkSize(t *testing.T, f File, want int64) {
	t.Helper()
	if got, err := f.Size(); got != want || err != nil {
		t.Errorf("Size = %d, %v; want %d", got, err, want)
	}
}

// content returns a file's bytes.
func content(t *testing.T, fs FS, name string) []byte {
	t.Helper()
	b, err := ReadFile(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkContent(t *testing.T, fs FS, name, want string) {
	t.Helper()
	if got := content(t, fs, name); string(got) != want {
		t.Errorf("%s holds %q, want %q", name, got, want)
	}
}
