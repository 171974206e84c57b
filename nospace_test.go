package tern

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ternwal/tern/internal/vfs"
)

// A full disk fails an embedded client's appends with ErrNoSpace naming
// the data directory, and Health reports it until an append succeeds
// again; reads go on meanwhile.
func TestHealthReportsFullDisk(t *testing.T) {
	dir := t.TempDir()
	ff := &faultyFS{op: vfs.OpWrite, err: syscall.ENOSPC}
	c, err := Open(t.Context(), Options{Dir: dir, fs: vfs.WithErrors(vfs.OS, ff.inject)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.CreateLog(t.Context(), "full", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := w.Append(t.Context(), Entry{Payload: payload(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := c.Health(); err != nil || h.NoSpace != "" {
		t.Fatalf("Health before the disk is full: %+v, %v", h, err)
	}
	ff.armed.Store(1 << 30)
	_, err = w.Append(t.Context(), Entry{Payload: []byte("refused")})
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("append on a full disk: %v; want ErrNoSpace naming %s", err, dir)
	}
	if h, err := c.Health(); err != nil || h.NoSpace != dir {
		t.Fatalf("Health on a full disk: %+v, %v; want NoSpace %s", h, err, dir)
	}
	if got := readAll(t, l, 0); len(got) != 3 {
		t.Fatalf("read %d entries on a full disk, want 3", len(got))
	}
	ff.armed.Store(0)
	if off, err := w.Append(t.Context(), Entry{Payload: payload(3)}); err != nil || off != 3 {
		t.Fatalf("append once the disk has room: offset %d, %v; want 3", off, err)
	}
	if h, err := c.Health(); err != nil || h.NoSpace != "" {
		t.Fatalf("Health once an append succeeded: %+v, %v; want NoSpace empty", h, err)
	}
}

// A log whose directory does not fit on a full disk fails to open, at its
// first use, with ErrNoSpace, and opens once there is room.
func TestCreateLogOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	var full atomic.Bool
	inject := func(op vfs.Op, name string) error {
		if full.Load() && op == vfs.OpMkdir {
			return syscall.ENOSPC
		}
		return nil
	}
	c, err := Open(t.Context(), Options{Dir: dir, fs: vfs.WithErrors(vfs.OS, inject)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	full.Store(true)
	// A log's engine, and so its directory, opens at its first use.
	l, err := c.CreateLog(t.Context(), "full", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.OpenWriter(t.Context()); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("open a writer of a new log on a full disk: %v; want ErrNoSpace naming %s", err, dir)
	}
	full.Store(false)
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatalf("open a writer once there is room: %v", err)
	}
	if off, err := w.Append(t.Context(), Entry{Payload: payload(0)}); err != nil || off != 0 {
		t.Fatalf("append: offset %d, %v", off, err)
	}
}
