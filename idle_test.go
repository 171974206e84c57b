package tern

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/vfs"
)

// readCountingFS counts the files opened and the reads made through it.
type readCountingFS struct {
	vfs.FS
	reads atomic.Int64
}

func (fs *readCountingFS) Open(name string) (vfs.File, error) {
	fs.reads.Add(1)
	f, err := fs.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &readCountingFile{File: f, fs: fs}, nil
}

func (fs *readCountingFS) OpenRW(name string) (vfs.File, error) {
	fs.reads.Add(1)
	f, err := fs.FS.OpenRW(name)
	if err != nil {
		return nil, err
	}
	return &readCountingFile{File: f, fs: fs}, nil
}

type readCountingFile struct {
	vfs.File
	fs *readCountingFS
}

func (f *readCountingFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.reads.Add(1)
	return f.File.ReadAt(p, off)
}

// An idle tail reader and an idle subscriber cost no metadata request and no
// disk read while nothing is appended; an append reaches both at once.
func TestIdleCostsNothing(t *testing.T) {
	ctx := t.Context()
	e, err := meta.StartEtcd(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	fs := &readCountingFS{FS: vfs.OS}
	c, err := Open(ctx, Options{Dir: t.TempDir(), Etcd: e.Endpoints(), fs: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store := embeddedOf(c).meta.(*lockedStore).Store.(*meta.Etcd)

	l, w := createLog(t, c, "idle", LogOptions{})
	appendN(t, w, 0, 10)
	if _, err := l.CreateSubscription(ctx, "sub", SubOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := l.OpenReader(ctx, 0, WithTicks())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := l.Subscribe(ctx, "sub", WithTicks())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := r.NextBatch(ctx, 10); err != nil {
		t.Fatal(err)
	}
	es, err := s.NextBatch(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(es[len(es)-1].Offset); err != nil {
		t.Fatal(err)
	}
	// Let the acknowledgement be committed, then measure an idle second
	// with both waiting at the tail.
	time.Sleep(3 * embeddedOf(c).opts.CommitInterval)
	requests, reads := store.Requests(), fs.reads.Load()
	got := make(chan Entry, 2)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		e, err := r.Next(waitCtx)
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	go func() {
		e, err := s.Next(waitCtx)
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	time.Sleep(time.Second)
	if n := store.Requests() - requests; n != 0 {
		t.Errorf("idle reader and subscriber made %d metadata requests in a second", n)
	}
	if n := fs.reads.Load() - reads; n != 0 {
		t.Errorf("idle reader and subscriber made %d file opens and reads in a second", n)
	}
	// A tick wakes both without a read from disk.
	if err := w.AppendTimeTick(ctx, 42); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if e := <-got; !e.IsTick || e.Tick != 42 || e.Offset != 10 {
			t.Fatalf("woken with %+v, want tick 42 at offset 10", e)
		}
	}
	if n := fs.reads.Load() - reads; n != 0 {
		t.Errorf("delivering a tick made %d file opens and reads", n)
	}
}
