package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ternwal/tern"
)

// TestFencingAcrossProcesses: a writer in one process is fenced by a writer
// opened in another. Nothing the old writer sends after the fence is
// acknowledged or stored, and what both were told is acknowledged is in the
// log, where they were told.
func TestFencingAcrossProcesses(t *testing.T) {
	srv := startServer(t, t.TempDir())
	c := openClient(t, srv.addr)
	l, err := c.CreateLog(deadline(t), "fence", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}

	writer := func(name string, args ...string) *child {
		return startChild(t, name, "writer", append([]string{"-server", srv.addr, "-log", "fence", "-prefix", name}, args...)...)
	}
	a := writer("A", "-window", "8")
	a.waitFor("100 acknowledgements", func(lines []string) bool { return countPrefix(lines, "ack ") >= 100 })
	b := writer("B", "-count", "100")
	bLines := b.wait()
	if last := lastLine(bLines); last != "done" {
		t.Fatalf("B ended with %q, want done", last)
	}
	// A appends until it fails, and must fail with ErrFenced.
	aLines := a.wait()
	if last := lastLine(aLines); !strings.HasPrefix(last, "fenced ") {
		t.Fatalf("A ended with %q, want an append failing with ErrFenced", last)
	}
	aAcks, bAcks := events(t, aLines, "ack"), events(t, bLines, "ack")
	if len(bAcks) != 100 {
		t.Fatalf("B reported %d acknowledgements, want 100", len(bAcks))
	}
	if aAcks[len(aAcks)-1].off >= bAcks[0].off {
		t.Fatalf("A was acknowledged offset %d, at or after B's first offset %d: an append of a fenced writer was acknowledged", aAcks[len(aAcks)-1].off, bAcks[0].off)
	}

	info, err := l.Info(deadline(t))
	if err != nil {
		t.Fatal(err)
	}
	entries := readAll(t, l, 0, info.End)
	seen := map[string]tern.Offset{}
	for _, e := range entries {
		if prev, dup := seen[string(e.Payload)]; dup {
			t.Fatalf("payload %q is at offsets %d and %d", e.Payload, prev, e.Offset)
		}
		seen[string(e.Payload)] = e.Offset
	}
	for _, ack := range append(aAcks, bAcks...) {
		if int(ack.off) >= len(entries) {
			t.Fatalf("acknowledged offset %d (%q) is beyond the log's end %d", ack.off, ack.payload, info.End)
		}
		if got := string(entries[ack.off].Payload); got != ack.payload {
			t.Fatalf("acknowledged offset %d holds %q, want %q", ack.off, got, ack.payload)
		}
	}
	// The log is A's entries in the order A sent them, with none missing
	// (a fenced append fails, and so do those after it), then B's.
	firstB := bAcks[0].off
	for i, e := range entries {
		want := fmt.Sprintf("A-%d", i)
		if tern.Offset(i) >= firstB {
			want = fmt.Sprintf("B-%d", uint64(i)-uint64(firstB))
		}
		if string(e.Payload) != want {
			t.Fatalf("offset %d holds %q, want %q", i, e.Payload, want)
		}
	}
	if info.End != firstB+100 {
		t.Fatalf("the log ends at %d, want B's first offset %d + 100", info.End, firstB)
	}
	t.Logf("A: %d acknowledged, %d stored; B: offsets %d to %d; A: %s", len(aAcks), firstB, firstB, firstB+99, lastLine(aLines))
}
