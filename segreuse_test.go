package tern

import (
	"fmt"
	"path/filepath"
	"testing"
)

// Thirty short writers, some in a process of their own (a Client opened
// and closed around them, as `tern append` does) and some one after
// another on one Client, continue one segment file instead of leaving one
// tiny file each, and every entry reads back at its offset.
func TestShortWritersShareASegment(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(t.Context(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	l, err := c.CreateLog(t.Context(), "short", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const writers = 30
	for i := range writers {
		if i%2 == 0 {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if c, err = Open(t.Context(), Options{Dir: dir}); err != nil {
				t.Fatal(err)
			}
			if l, err = c.OpenLog(t.Context(), "short"); err != nil {
				t.Fatal(err)
			}
		}
		w, err := l.OpenWriter(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		off, err := w.Append(t.Context(), Entry{Payload: fmt.Appendf(nil, "writer %d", i)})
		if err != nil || off != Offset(i) {
			t.Fatalf("writer %d: append at offset %d, %v; want offset %d", i, off, err, i)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	segs, err := filepath.Glob(filepath.Join(dir, "logs", "*", "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("%d short writers left segment files %q (%v), want one", writers, segs, err)
	}
	got := readAll(t, l, 0)
	if len(got) != writers {
		t.Fatalf("read %d entries, want %d", len(got), writers)
	}
	for i, e := range got {
		if want := fmt.Sprintf("writer %d", i); e.Offset != Offset(i) || string(e.Payload) != want {
			t.Fatalf("entry %d: %q at offset %d, want %q at offset %d", i, e.Payload, e.Offset, want, i)
		}
	}
}
