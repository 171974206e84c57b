package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/ternwal/tern"
)

// TestTimeTicksThroughServer: time ticks sent through the server reach a
// remote reader and a remote subscriber in their place between the entries,
// and leave no trace: not on disk, not after a restart, which the reader
// and the subscriber ride through.
func TestTimeTicksThroughServer(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, data)
	c := openClient(t, srv.addr)
	ctx := deadline(t)
	l, err := c.CreateLog(ctx, "ticks", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateSubscription(ctx, "s", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendEntry := func(payload string) {
		t.Helper()
		if _, err := w.Append(ctx, tern.Entry{Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	tick := func(v uint64) {
		t.Helper()
		if err := w.AppendTimeTick(ctx, v); err != nil {
			t.Fatal(err)
		}
	}

	appendEntry("e0")
	r, err := l.OpenReader(ctx, 0, tern.WithTicks())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Subscribe(ctx, "s", tern.WithTicks())
	if err != nil {
		t.Fatal(err)
	}
	readers := []struct {
		name string
		next func() (tern.Entry, error)
	}{
		{"reader", func() (tern.Entry, error) { return r.Next(ctx) }},
		{"subscriber", func() (tern.Entry, error) { return s.Next(ctx) }},
	}
	// A remote OpenReader or Subscribe may return before the server has
	// opened the reader, and a tick reaches only the open ones: once e0 has
	// arrived, both are open.
	for _, rd := range readers {
		e, err := rd.next()
		if err != nil {
			t.Fatal(err)
		}
		if e.IsTick || string(e.Payload) != "e0" {
			t.Fatalf("%s: first %s, want e0", rd.name, show(e))
		}
	}
	tick(10)
	tick(11)
	appendEntry("e1")
	appendEntry("e2")
	tick(12)
	appendEntry("e3")

	for _, rd := range readers {
		var got []tern.Entry
		for len(got) == 0 || got[len(got)-1].IsTick || got[len(got)-1].Offset < 3 {
			e, err := rd.next()
			if err != nil {
				t.Fatalf("%s: %v", rd.name, err)
			}
			got = append(got, e)
		}
		// Ticks 10 and 11 are at the same position: a reader that had not
		// taken 10 when 11 came receives only 11 (coalescing).
		var at1 []uint64
		for len(got) > 0 && got[0].IsTick && got[0].Offset == 1 {
			at1 = append(at1, got[0].Tick)
			got = got[1:]
		}
		if !slices.Equal(at1, []uint64{11}) && !slices.Equal(at1, []uint64{10, 11}) {
			t.Fatalf("%s: ticks %v at position 1, want [11] or [10 11]", rd.name, at1)
		}
		want := []string{"e1@1", "e2@2", "tick 12@3", "e3@3"}
		var shown []string
		for _, e := range got {
			shown = append(shown, show(e))
		}
		if !slices.Equal(shown, want) {
			t.Fatalf("%s: after ticks %v at 1, read %v, want %v", rd.name, at1, shown, want)
		}
	}

	// No trace on disk: a thousand ticks change no byte of the segments.
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	segs := segments(t, filepath.Join(data, "logs", strconv.FormatUint(info.ID, 10)))
	for v := uint64(100); v < 1100; v++ {
		tick(v)
	}
	after, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Bytes != info.Bytes || after.End != info.End {
		t.Fatalf("after 1000 ticks the log has %d bytes and ends at %d, want %d and %d as before", after.Bytes, after.End, info.Bytes, info.End)
	}
	if got := segments(t, filepath.Join(data, "logs", strconv.FormatUint(info.ID, 10))); !slices.Equal(got, segs) {
		t.Fatalf("after 1000 ticks the segments are\n%v\nwant, as before,\n%v", got, segs)
	}
	// The readers receive them, newest last, perhaps coalesced.
	for _, rd := range readers {
		prev := uint64(12)
		for prev != 1099 {
			e, err := rd.next()
			if err != nil {
				t.Fatal(err)
			}
			if !e.IsTick || e.Offset != 4 || e.Tick <= prev {
				t.Fatalf("%s: read %s after tick %d, want a later tick at 4", rd.name, show(e), prev)
			}
			prev = e.Tick
		}
	}

	// A graceful stop and a restart: the reader reconnects and goes on after
	// the last entry it returned, and the restart forgot the ticks: a tick
	// stored at 4 would come before the next entry. The subscriber, which
	// acknowledged nothing, starts again from its cursor.
	srv.stop()
	srv.restart()
	w, err = l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, tern.Entry{Payload: []byte("e4")}); err != nil {
		t.Fatal(err)
	}
	for i, rd := range readers {
		e, err := rd.next()
		if err != nil {
			t.Fatalf("%s: after the restart: %v", rd.name, err)
		}
		if want := []string{"e4@4", "e0@0"}[i]; show(e) != want {
			t.Fatalf("%s: after the restart, read %s after e3, want %s", rd.name, show(e), want)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// A new reader sees only the entries.
	c = openClient(t, srv.addr)
	ctx = deadline(t)
	l, err = c.OpenLog(ctx, "ticks")
	if err != nil {
		t.Fatal(err)
	}
	r, err = l.OpenReader(ctx, 0, tern.WithTicks())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if show(e) != fmt.Sprintf("e%d@%d", i, i) {
			t.Fatalf("after the restart, read %s, want e%d@%d", show(e), i, i)
		}
	}
}

// show is an entry or tick as "payload@offset" or "tick T@offset".
func show(e tern.Entry) string {
	if e.IsTick {
		return fmt.Sprintf("tick %d@%d", e.Tick, e.Offset)
	}
	return fmt.Sprintf("%s@%d", e.Payload, e.Offset)
}

// segments describes the segment files of a log's directory: name, size
// and SHA-256 of each.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("no segment files in %s", dir)
	}
	var out []string
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d %x", filepath.Base(name), len(b), sha256.Sum256(b)))
	}
	return out
}
