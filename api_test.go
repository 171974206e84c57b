package tern

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func openClient(t *testing.T, dir string) *Client {
	t.Helper()
	c, err := Open(t.Context(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func payload(i int) []byte { return fmt.Appendf(nil, "entry-%06d", i) }

// readAll reads [from, end) and checks offsets are dense.
func readAll(t *testing.T, l *Log, from Offset) []Entry {
	t.Helper()
	info, err := l.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.OpenReader(t.Context(), from)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []Entry
	for Offset(len(out))+from < info.End {
		es, err := r.NextBatch(t.Context(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if want := from + Offset(len(out)); e.Offset != want {
				t.Fatalf("read offset %d, want %d", e.Offset, want)
			}
			out = append(out, e)
		}
	}
	return out
}

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	l, err := c.CreateLog(t.Context(), "tenant/db/ch-1", LogOptions{SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < n; i += 4 {
				if _, err := w.Append(t.Context(), Entry{Payload: payload(i), Properties: map[string][]byte{"k": {byte(i)}}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := w.AppendBatch(t.Context(), []Entry{{Payload: []byte("a")}, {Payload: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	info, _ := l.Info(t.Context())
	if info.End != n+2 || info.Segments < 2 {
		t.Fatalf("info %+v, want End %d and several segments", info, n+2)
	}
	got := readAll(t, l, 0)
	seen := map[string]bool{}
	for _, e := range got[:n] {
		seen[string(e.Payload)] = true
	}
	if len(seen) != n || string(got[n].Payload) != "a" || string(got[n+1].Payload) != "b" {
		t.Fatalf("read %d distinct entries, last %q %q", len(seen), got[n].Payload, got[n+1].Payload)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = openClient(t, dir)
	l, err = c.OpenLog(t.Context(), "tenant/db/ch-1")
	if err != nil {
		t.Fatal(err)
	}
	again := readAll(t, l, 0)
	if len(again) != len(got) {
		t.Fatalf("after reopen read %d entries, want %d", len(again), len(got))
	}
	for i := range got {
		if !bytes.Equal(again[i].Payload, got[i].Payload) || !again[i].Time.Equal(got[i].Time) {
			t.Fatalf("entry %d changed across reopen", i)
		}
	}
}

func TestTailReaderIsWoken(t *testing.T) {
	c := openClient(t, t.TempDir())
	l, _ := c.CreateLog(t.Context(), "tail", LogOptions{})
	w, _ := l.OpenWriter(t.Context())
	r, err := l.OpenReader(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Entry)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e, err := r.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	if _, err := w.Append(t.Context(), Entry{Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	if e := <-got; string(e.Payload) != "hello" || e.Offset != 0 {
		t.Fatalf("tail reader got %+v", e)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
}
