package tern

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ternwal/tern/internal/vfs"
)

// faultyFS fails the operations of one kind while armed.
type faultyFS struct {
	op    vfs.Op
	err   error
	armed atomic.Int32 // how many more operations of kind op fail
}

func (f *faultyFS) inject(op vfs.Op, name string) error {
	if op == f.op && strings.HasSuffix(name, ".seg") && f.armed.Add(-1) >= 0 {
		return f.err
	}
	return nil
}

func TestIOErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   vfs.Op
		err  error
	}{
		{"EIO on fsync", vfs.OpSync, syscall.EIO},
		{"EIO on write", vfs.OpWrite, syscall.EIO},
		{"ENOSPC on write", vfs.OpWrite, syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ff := &faultyFS{op: tc.op, err: tc.err}
			c, err := Open(t.Context(), Options{Dir: dir, fs: vfs.WithErrors(vfs.OS, ff.inject)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			l, _ := c.CreateLog(t.Context(), "faults", LogOptions{})
			w, _ := l.OpenWriter(t.Context())
			for i := range 10 {
				if _, err := w.Append(t.Context(), Entry{Payload: payload(i)}); err != nil {
					t.Fatal(err)
				}
			}

			ff.armed.Store(1)
			if _, err := w.Append(t.Context(), Entry{Payload: []byte("failed")}); !errors.Is(err, tc.err) {
				t.Fatalf("append during the fault: %v, want %v", err, tc.err)
			}
			// The fault has passed: the log goes on after its last good entry.
			off, err := w.Append(t.Context(), Entry{Payload: payload(10)})
			if err != nil || off != 10 {
				t.Fatalf("append after the fault: offset %d, %v; want offset 10", off, err)
			}
			checkPayloads := func(l *Log) {
				t.Helper()
				got := readAll(t, l, 0)
				if len(got) != 11 {
					t.Fatalf("read %d entries, want 11", len(got))
				}
				for i, e := range got {
					if string(e.Payload) != string(payload(i)) {
						t.Fatalf("offset %d holds %q, want %q", i, e.Payload, payload(i))
					}
				}
			}
			checkPayloads(l)
			c.Close()
			c = openClient(t, dir)
			l, err = c.OpenLog(t.Context(), "faults")
			if err != nil {
				t.Fatal(err)
			}
			checkPayloads(l)
		})
	}
}

// TestFsyncFailureIsNotRetried checks that when an fdatasync fails and so
// does the cut back to the last synced size, nothing more is acknowledged
// until the log is reopened, and reopening recovers every acknowledged entry.
func TestFsyncFailureIsNotRetried(t *testing.T) {
	dir := t.TempDir()
	ff := &faultyFS{op: vfs.OpSync, err: syscall.EIO}
	c, err := Open(t.Context(), Options{Dir: dir, fs: vfs.WithErrors(vfs.OS, ff.inject)})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := c.CreateLog(t.Context(), "faults", LogOptions{})
	w, _ := l.OpenWriter(t.Context())
	for i := range 5 {
		if _, err := w.Append(t.Context(), Entry{Payload: payload(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ff.armed.Store(2) // the append's fsync and the fsync after cutting back
	if _, err := w.Append(t.Context(), Entry{Payload: []byte("lost")}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append: %v, want EIO", err)
	}
	_, err = w.Append(t.Context(), Entry{Payload: []byte("refused")})
	if err == nil || !strings.Contains(err.Error(), "reopened") {
		t.Fatalf("append after a failed fsync and a failed cut back: %v, want an error saying to reopen", err)
	}
	c.Close()

	c = openClient(t, dir)
	l, err = c.OpenLog(t.Context(), "faults")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range readAll(t, l, 0) {
		if i >= 5 {
			// The failed entry may have reached the disk, but nothing after it.
			if string(e.Payload) != "lost" || i > 5 {
				t.Fatalf("offset %d holds %q after recovery", i, e.Payload)
			}
			continue
		}
		if string(e.Payload) != string(payload(i)) {
			t.Fatalf("offset %d holds %q, want %q", i, e.Payload, payload(i))
		}
	}
}
