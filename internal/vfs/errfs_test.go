package vfs

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

func TestErrorFSSyncEIO(t *testing.T) {
	for _, impl := range []struct {
		name string
		fs   FS
		dir  string
	}{
		{"OS", OS, t.TempDir()},
		{"Mem", NewMem(), "."},
	} {
		t.Run(impl.name, func(t *testing.T) {
			fs := WithErrors(impl.fs, FailAfter(0, OpSync, syscall.EIO))
			name := impl.dir + "/a"
			f := create(t, fs, name, "x")
			defer f.Close()
			err := f.Sync()
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("Sync: %v, want EIO", err)
			}
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Op != "sync" || pe.Path != name {
				t.Errorf("Sync error %#v, want an *os.PathError for sync of %s", err, name)
			}
			if err := fs.SyncDir(impl.dir); err != nil {
				t.Errorf("SyncDir: %v", err)
			}
		})
	}
}

func TestErrorFSFailedWriteIsNotApplied(t *testing.T) {
	injected := errors.New("injected")
	fs := WithErrors(NewMem(), FailAfter(2, OpWrite, injected))
	f := create(t, fs, "a", "1")
	write(t, f, "2")
	if n, err := f.Write([]byte("3")); n != 0 || !errors.Is(err, injected) {
		t.Fatalf("third Write = %d, %v; want 0, injected", n, err)
	}
	checkSize(t, f, 2)
	if _, err := f.Write([]byte("4")); !errors.Is(err, injected) {
		t.Errorf("fourth Write: %v, want injected", err)
	}
}

// TestErrorFSSeesEveryOp checks which Op and name each call reports.
func TestErrorFSSeesEveryOp(t *testing.T) {
	var got []string
	fs := WithErrors(NewMem(), func(op Op, name string) error {
		got = append(got, op.String()+" "+name)
		return nil
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fs.MkdirAll("d"))
	f := create(t, fs, "d/a", "x")
	_, err := f.ReadAt(make([]byte, 1), 0)
	must(err)
	_, err = f.Size()
	must(err)
	must(f.Truncate(0))
	must(f.Sync())
	must(f.Close())
	must(fs.SyncDir("d"))
	_, err = fs.Stat("d/a")
	must(err)
	_, err = fs.List("d")
	must(err)
	f, err = fs.Open("d/a")
	must(err)
	must(f.Close())
	f, err = fs.OpenRW("d/a")
	must(err)
	must(f.Close())
	must(fs.Rename("d/a", "d/b"))
	must(fs.Remove("d/b"))
	must(fs.RemoveAll("d"))
	l, err := fs.Lock("LOCK")
	must(err)
	must(l.Close())

	want := []string{
		"mkdir d", "create d/a", "write d/a", "read d/a", "read d/a", "truncate d/a", "sync d/a",
		"syncdir d", "read d/a", "read d", "open d/a", "open d/a", "rename d/a", "remove d/b",
		"remove d", "lock LOCK",
	}
	if !slices.Equal(got, want) {
		t.Errorf("inject saw\n%q\nwant\n%q", got, want)
	}
}

func TestErrorFSInjectsEveryOp(t *testing.T) {
	injected := errors.New("injected")
	base := NewMem()
	if err := createSynced(base, "a", "x"); err != nil {
		t.Fatal(err)
	}
	var fail bool
	fs := WithErrors(base, func(Op, string) error {
		if fail {
			return injected
		}
		return nil
	})
	f, err := fs.OpenRW("a")
	if err != nil {
		t.Fatal(err)
	}
	fail = true
	for name, call := range map[string]func() error{
		"Create":    func() error { _, err := fs.Create("b"); return err },
		"Open":      func() error { _, err := fs.Open("a"); return err },
		"OpenRW":    func() error { _, err := fs.OpenRW("a"); return err },
		"Remove":    func() error { return fs.Remove("a") },
		"RemoveAll": func() error { return fs.RemoveAll("a") },
		"Rename":    func() error { return fs.Rename("a", "b") },
		"MkdirAll":  func() error { return fs.MkdirAll("d") },
		"List":      func() error { _, err := fs.List("."); return err },
		"Stat":      func() error { _, err := fs.Stat("a"); return err },
		"SyncDir":   func() error { return fs.SyncDir(".") },
		"Lock":      func() error { _, err := fs.Lock("LOCK"); return err },
		"Write":     func() error { _, err := f.Write([]byte("y")); return err },
		"ReadAt":    func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err },
		"Sync":      func() error { return f.Sync() },
		"Truncate":  func() error { return f.Truncate(0) },
		"Size":      func() error { _, err := f.Size(); return err },
	} {
		if err := call(); !errors.Is(err, injected) {
			t.Errorf("%s: %v, want injected", name, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if names, err := base.List("."); err != nil || !slices.Equal(names, []string{"a"}) {
		t.Errorf("after failed calls the FS holds %q, %v", names, err)
	}
	checkContent(t, base, "a", "x")
}

func TestFailAfterIsSafeForConcurrentUse(t *testing.T) {
	const n, calls = 100, 1000
	inject := FailAfter(n, OpWrite, syscall.EIO)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			if inject(OpSync, "a") != nil {
				t.Error("FailAfter failed another kind of op")
			}
			if errors.Is(inject(OpWrite, "a"), syscall.EIO) {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != calls-n {
		t.Errorf("%d writes failed, want %d", failed.Load(), calls-n)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{OpCreate: "create", OpSyncDir: "syncdir", OpLock: "lock", Op(99): "Op(99)"} {
		if got := fmt.Sprint(op); got != want {
			t.Errorf("Op %d prints as %q, want %q", int(op), got, want)
		}
	}
}
