package check

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

var (
	errTimeout = errors.New("timeout")
	errFenced  = errors.New("fenced")
)

// expect fails t unless rep counts exactly want of each kind (zero for the
// kinds missing from want).
func expect(t *testing.T, rep *Report, want map[Kind]int) {
	t.Helper()
	for k := range Kind(numKinds) {
		if got := rep.Count(k); got != want[k] {
			t.Errorf("%s: %d anomalies, want %d", k, got, want[k])
		}
		if len(rep.Examples(k)) != min(rep.Count(k), MaxExamples) {
			t.Errorf("%s: %d examples of %d anomalies", k, len(rep.Examples(k)), rep.Count(k))
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", rep)
	}
}

// acked appends each value alone, acknowledged at consecutive offsets from 0.
func acked(h *History, log string, values ...string) {
	for i, v := range values {
		h.Invoke(log, 1, v).OK(uint64(i))
	}
}

func TestValid(t *testing.T) {
	h := New()
	h.Invoke("l", 1, "a", "b").OK(0)
	h.Invoke("l", 1, "c").OK(2)
	h.Invoke("l", 1, "d").Unknown(errTimeout) // surfaces
	h.Invoke("l", 1, "e").Unknown(errTimeout) // does not
	h.Invoke("l", 1, "f").Fail(errFenced)
	h.Invoke("l", 1, "g", "h") // never completes, surfaces
	r := h.Reader("l", "tail")
	r.Restart(0)
	for i, v := range []string{"a", "b", "c", "d"} {
		r.Saw(uint64(i), v)
	}
	r.Restart(1) // reconnected, caught up again
	r.Saw(1, "b")
	h.Truncated("l", 1)
	h.Final("l", 1, []string{"b", "c", "d", "g", "h"})

	rep := h.Check()
	expect(t, rep, nil)
	if rep.Invoked != 6 || rep.OK != 2 || rep.Failed != 1 || rep.Unknown != 3 || rep.Surfaced != 2 {
		t.Errorf("appends: %d invoked, %d ok, %d failed, %d unknown, %d surfaced; want 6, 2, 1, 3, 2",
			rep.Invoked, rep.OK, rep.Failed, rep.Unknown, rep.Surfaced)
	}
	if rep.Reads != 5 || rep.FinalEntries != 5 || rep.Truncated != 1 || len(rep.NoFinal) != 0 {
		t.Errorf("%d reads, %d final entries, %d truncated, no final %q; want 5, 5, 1, none",
			rep.Reads, rep.FinalEntries, rep.Truncated, rep.NoFinal)
	}
	if s := rep.String(); !strings.HasPrefix(s, "0 anomalies\n") {
		t.Errorf("report:\n%s", s)
	}
}

func TestLostSuffix(t *testing.T) {
	h := New()
	acked(h, "l", "a", "b", "c")
	h.Final("l", 0, []string{"a"})
	rep := h.Check()
	expect(t, rep, map[Kind]int{LostSuffix: 2})
	if e := rep.Examples(LostSuffix)[0]; e.Offset != 1 || e.Value != "b" {
		t.Errorf("first example %v, want offset 1 value b", e)
	}
}

func TestLostPrefix(t *testing.T) {
	h := New()
	acked(h, "l", "a", "b", "c")
	h.Truncated("l", 1)            // covers a
	h.Final("l", 2, []string{"c"}) // but not b
	rep := h.Check()
	expect(t, rep, map[Kind]int{LostPrefix: 1})
	if e := rep.Examples(LostPrefix)[0]; e.Value != "b" {
		t.Errorf("example %v, want value b", e)
	}
	if rep.Truncated != 1 {
		t.Errorf("%d truncated, want 1", rep.Truncated)
	}
}

// TestLostSplit checks where lost values are counted: below the lowest
// acknowledged value present, between, above the highest.
func TestLostSplit(t *testing.T) {
	h := New()
	x := h.Invoke("l", 1, "x")
	acked(h, "l", "a", "b", "c", "d", "e", "f", "g")
	x.Unknown(errTimeout)
	// a is before the start, b present, c replaced by x, d and e present, f
	// and g missing.
	h.Final("l", 1, []string{"b", "x", "d", "e"})
	rep := h.Check()
	// Offset 2 has x, acknowledged as c: inconsistent as well.
	expect(t, rep, map[Kind]int{LostPrefix: 1, LostMiddle: 1, LostSuffix: 2, Inconsistent: 1})
	for k, want := range map[Kind]string{LostPrefix: "a", LostMiddle: "c", LostSuffix: "f"} {
		if e := rep.Examples(k)[0]; e.Value != want {
			t.Errorf("%s: example %v, want value %s", k, e, want)
		}
	}

	// With no acknowledged value present, everything lost is a suffix.
	h = New()
	acked(h, "l", "a", "b")
	h.Final("l", 0, nil)
	expect(t, h.Check(), map[Kind]int{LostSuffix: 2})
}

// TestLostRead checks values a reader saw that did not last, and a batch
// of unknown outcome that surfaced in part.
func TestLostRead(t *testing.T) {
	h := New()
	acked(h, "l", "a")
	h.Invoke("l", 1, "u").Unknown(errTimeout)
	r := h.Reader("l", "tail")
	r.Saw(0, "a")
	r.Saw(1, "u")
	h.Final("l", 0, []string{"a"})
	expect(t, h.Check(), map[Kind]int{LostSuffix: 1})

	h = New()
	acked(h, "l", "a")
	h.Invoke("l", 1, "u1", "u2", "u3").Unknown(errTimeout)
	h.Final("l", 0, []string{"a", "u1", "u2"})
	rep := h.Check()
	expect(t, rep, map[Kind]int{LostSuffix: 1})
	if e := rep.Examples(LostSuffix)[0]; e.Offset != 3 || e.Value != "u3" {
		t.Errorf("example %v, want offset 3 value u3", e)
	}

	// Truncation covers what readers saw, too.
	h = New()
	acked(h, "l", "a", "b")
	h.Invoke("l", 1, "u").Unknown(errTimeout)
	r = h.Reader("l", "tail")
	r.Saw(0, "a")
	r.Saw(1, "b")
	h.Truncated("l", 2)
	h.Final("l", 2, []string{"u"})
	expect(t, h.Check(), nil)
}

func TestDuplicated(t *testing.T) {
	h := New()
	acked(h, "l", "a")
	h.Invoke("l", 1, "u").Unknown(errTimeout)
	h.Invoke("l", 1, "w").Unknown(errTimeout)
	h.Final("l", 0, []string{"a", "u", "u", "w"}) // twice in the final read
	r := h.Reader("l", "tail")
	r.Saw(5, "w") // at 3 in the final read
	r.Saw(6, "w") // counted once
	r.Saw(7, "a")
	rep := h.Check()
	// a at 7 is away from its acknowledged offset too, but a value read at
	// two offsets counts as duplicated only; the reader's stream is dense.
	expect(t, rep, map[Kind]int{Duplicated: 3})
}

func TestReordered(t *testing.T) {
	h := New()
	a := h.Invoke("l", 1, "a")
	a.OK(1)
	b := h.Invoke("l", 1, "b") // invoked after a was acknowledged
	b.OK(0)                    // yet lands before it
	h.Invoke("l", 1, "c").OK(2)
	h.Final("l", 0, []string{"b", "a", "c"})
	rep := h.Check()
	expect(t, rep, map[Kind]int{Reordered: 1})
	if e := rep.Examples(Reordered)[0]; e.Value != "b" {
		t.Errorf("example %v, want value b", e)
	}

	// Concurrent appends may land in any order.
	h = New()
	a, b = h.Invoke("l", 1, "a"), h.Invoke("l", 1, "b")
	b.OK(0)
	a.OK(1)
	h.Final("l", 0, []string{"b", "a"})
	expect(t, h.Check(), nil)
}

func TestReorderedStreams(t *testing.T) {
	h := New()
	acked(h, "l", "a", "b", "c", "d")
	gap := h.Reader("l", "gap")
	gap.Saw(0, "a")
	gap.Saw(2, "c")
	back := h.Reader("l", "back")
	back.Saw(2, "c")
	back.Saw(1, "b")
	again := h.Reader("l", "again")
	again.Saw(1, "b")
	again.Saw(1, "b")
	resumed := h.Reader("l", "resumed")
	resumed.Restart(1)
	resumed.Saw(2, "c") // resumed from 1
	resumed.Restart(3)
	resumed.Saw(3, "d")
	resumed.Restart(1) // a new stream may go back
	resumed.Saw(1, "b")
	h.Final("l", 0, []string{"a", "b", "c", "d"})
	rep := h.Check()
	expect(t, rep, map[Kind]int{Reordered: 4})
	if rep.Reads != 9 {
		t.Errorf("%d reads, want 9", rep.Reads)
	}
}

func TestInconsistent(t *testing.T) {
	h := New()
	acked(h, "l", "a", "b", "c")
	h.Invoke("l", 1, "x").Unknown(errTimeout)
	h.Invoke("l", 1, "y").Unknown(errTimeout)
	h.Invoke("l", 1, "z").Unknown(errTimeout)
	h.Truncated("l", 2)
	h.Final("l", 2, []string{"c"})
	// Below the final read's start: readers disagree at 0, and a reader
	// disagrees with the acknowledgement at 1.
	r1, r2 := h.Reader("l", "r1"), h.Reader("l", "r2")
	r1.Saw(0, "x")
	r2.Saw(0, "y")
	r2.Saw(1, "z")
	// In the final read: a reader disagrees with it, twice (counted once).
	r3, r4 := h.Reader("l", "r3"), h.Reader("l", "r4")
	r3.Saw(2, "x")
	r4.Saw(2, "z")
	rep := h.Check()
	// x and z are read at two offsets: duplicated too. (A reader that sees
	// a value at one offset and the final read another is both.)
	expect(t, rep, map[Kind]int{Inconsistent: 3, Duplicated: 2})

	h = New()
	acked(h, "l", "a", "b")
	h.Invoke("l", 1, "x").Unknown(errTimeout)
	h.Invoke("l", 1, "y").Unknown(errTimeout)
	h.Truncated("l", 2)
	h.Final("l", 2, nil)
	r1, r2 = h.Reader("l", "r1"), h.Reader("l", "r2")
	r1.Saw(0, "x")
	r2.Saw(0, "y")
	r2.Saw(1, "b")
	expect(t, h.Check(), map[Kind]int{Inconsistent: 1})

	// Two writers acknowledged at the same offsets, since truncated.
	h = New()
	a, b := h.Invoke("l", 1, "a1", "a2"), h.Invoke("l", 1, "b1", "b2", "b3")
	a.OK(0)
	b.OK(1)
	h.Invoke("l", 1, "c").OK(4)
	h.Truncated("l", 4)
	h.Final("l", 4, []string{"c"})
	expect(t, h.Check(), map[Kind]int{Inconsistent: 1})
}

func TestUnexpected(t *testing.T) {
	h := New()
	acked(h, "l", "a")
	u := h.Invoke("l", 1, "u1", "u2")
	h.Invoke("l", 1, "m").OK(5) // acknowledged at 5, found at 1
	u.Unknown(errTimeout)
	h.Final("l", 0, []string{"a", "m", "ghost", "u1", "x", "u2"})
	r := h.Reader("l", "tail")
	r.Saw(6, "ghost2")
	rep := h.Check()
	// ghost, ghost2 and x were never appended; m is away from its ack; u2
	// away from u1. (Offset 5 has u2 in the final read, acknowledged as m:
	// inconsistent as well.)
	expect(t, rep, map[Kind]int{Unexpected: 5, Inconsistent: 1})

	h = New()
	acked(h, "l", "a")
	h.Invoke("l", 1, "m").OK(5)
	h.Final("l", 0, []string{"a", "m"})
	expect(t, h.Check(), map[Kind]int{Unexpected: 1})
}

func TestFailedSurfaced(t *testing.T) {
	h := New()
	acked(h, "l", "a")
	h.Invoke("l", 1, "f1", "f2").Fail(errFenced)
	h.Invoke("l", 1, "f3").Fail(errFenced)
	h.Final("l", 0, []string{"a", "f1", "f2"})
	r := h.Reader("l", "tail")
	r.Saw(3, "f3") // not durable either
	rep := h.Check()
	expect(t, rep, map[Kind]int{FailedSurfaced: 3, LostSuffix: 1})

	h = New()
	acked(h, "l", "a")
	h.Invoke("l", 1, "f1").Fail(errFenced)
	h.Final("l", 0, []string{"a", "f1"})
	expect(t, h.Check(), map[Kind]int{FailedSurfaced: 1})
}

func TestCursorBackwards(t *testing.T) {
	h := New()
	acked(h, "l", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	h.Final("l", 0, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"})
	h.Cursor("l", "s", 3)
	h.Cursor("l", "s", 5)
	h.Cursor("l", "s", 4) // backwards
	h.Cursor("l", "s", 6)
	h.Seek("l", "s", 2)
	h.Cursor("l", "s", 7) // observed before the seek took effect
	h.Cursor("l", "s", 2) // the seek's one step back
	h.Cursor("l", "s", 1) // backwards: below the seek
	h.Cursor("l", "s", 4)
	h.Seek("l", "s", 3)
	sub := h.Subscriber("l", "s")
	sub.Restart(3) // resumed from the seek
	sub.Saw(3, "d")
	h.Cursor("l", "s", 3)
	h.Cursor("l", "s", 6)
	sub.Restart(6) // at-least-once: from the cursor
	sub.Saw(6, "g")
	sub.Restart(5) // backwards: below the committed cursor
	sub.Saw(5, "f")
	h.Cursor("l", "other", 8) // another subscription
	h.Cursor("l", "other", 9)
	rep := h.Check()
	expect(t, rep, map[Kind]int{CursorBackwards: 3})
	if e := rep.Examples(CursorBackwards)[0]; e.Offset != 1 || e.Value != "" {
		t.Errorf("first example %v, want offset 1", e)
	}
}

func TestFencedAcked(t *testing.T) {
	// Invoked after the newer writer's open returned, and acknowledged.
	h := New()
	h.Invoke("l", 1, "a").OK(0)
	f := h.Fence("l", 2)
	f.Done()
	h.Invoke("l", 1, "b").OK(1)
	h.Final("l", 0, []string{"a", "b"})
	expect(t, h.Check(), map[Kind]int{FencedAcked: 1})

	// In flight when the newer writer opened, acknowledged after it, above
	// the newer writer's append.
	h = New()
	old := h.Invoke("l", 1, "a")
	h.Fence("l", 2).Done()
	h.Invoke("l", 2, "b").OK(0)
	old.OK(1)
	h.Final("l", 0, []string{"b", "a"})
	expect(t, h.Check(), map[Kind]int{FencedAcked: 1})

	// The same, above a newer append of unknown outcome that surfaced.
	h = New()
	old = h.Invoke("l", 1, "a")
	h.Fence("l", 2).Done()
	h.Invoke("l", 2, "b").Unknown(errTimeout)
	old.OK(1)
	h.Final("l", 0, []string{"b", "a"})
	expect(t, h.Check(), map[Kind]int{FencedAcked: 1})
}

// TestFencedInFlight checks that an append of an older epoch in flight when
// the newer writer opened may be acknowledged after, if it landed before
// the newer writer's appends; and that a fence that never completed fences
// nothing.
func TestFencedInFlight(t *testing.T) {
	h := New()
	old := h.Invoke("l", 1, "a")
	h.Fence("l", 2).Done()
	h.Invoke("l", 2, "b").OK(1)
	old.OK(0)
	h.Invoke("l", 1, "c").Fail(errFenced) // after the open: rejected
	h.Fence("l", 3)                       // the open failed
	h.Invoke("l", 2, "d").OK(2)
	h.Final("l", 0, []string{"a", "b", "d"})
	expect(t, h.Check(), nil)
}

func TestNoFinal(t *testing.T) {
	h := New()
	acked(h, "l", "a")
	r := h.Reader("l", "tail")
	r.Saw(0, "a")
	acked(h, "m", "a")
	h.Final("m", 0, []string{"a"})
	rep := h.Check()
	expect(t, rep, nil)
	if len(rep.NoFinal) != 1 || rep.NoFinal[0] != "l" {
		t.Errorf("logs with no final read: %q, want [l]", rep.NoFinal)
	}
}

// TestLogs checks that logs are checked apart: the same value on two logs
// is two values, and a value of another log is unexpected.
func TestLogs(t *testing.T) {
	h := New()
	acked(h, "l", "a", "b")
	acked(h, "m", "a")
	h.Final("l", 0, []string{"a", "b"})
	h.Final("m", 0, []string{"a", "b"})
	rep := h.Check()
	expect(t, rep, map[Kind]int{Unexpected: 1})
	if e := rep.Examples(Unexpected)[0]; e.Log != "m" || e.Value != "b" {
		t.Errorf("example %v, want log m value b", e)
	}
}

func TestExamples(t *testing.T) {
	h := New()
	var final []string
	for i := range 25 {
		v := fmt.Sprintf("v%02d", i)
		h.Invoke("l", 1, v).OK(uint64(i))
		if i < 5 {
			final = append(final, v)
		}
	}
	h.Final("l", 0, final)
	rep := h.Check()
	expect(t, rep, map[Kind]int{LostSuffix: 20})
	ex := rep.Examples(LostSuffix)
	for i, e := range ex {
		if e.Offset != uint64(5+i) {
			t.Errorf("example %d at offset %d, want %d", i, e.Offset, 5+i)
		}
	}
	s := rep.String()
	for _, want := range []string{"20 anomalies", "lost-suffix:      20", `offset 5 value "v05"`, "and 10 more"} {
		if !strings.Contains(s, want) {
			t.Errorf("report does not say %q:\n%s", want, s)
		}
	}
	if again := h.Check().String(); again != s {
		t.Errorf("a second check reports\n%s\nnot\n%s", again, s)
	}
}

func TestMisuse(t *testing.T) {
	for name, f := range map[string]func(h *History){
		"value twice":     func(h *History) { h.Invoke("l", 1, "a"); h.Invoke("l", 1, "b", "a") },
		"empty batch":     func(h *History) { h.Invoke("l", 1) },
		"completed twice": func(h *History) { a := h.Invoke("l", 1, "a"); a.OK(0); a.Unknown(errTimeout) },
		"final twice":     func(h *History) { h.Final("l", 0, nil); h.Final("l", 0, nil) },
		"fence done twice": func(h *History) {
			f := h.Fence("l", 1)
			f.Done()
			f.Done()
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f(New())
		})
	}
}

// TestConcurrent records a valid history from many goroutines against an
// in-memory log with faults: appends rejected, lost before they are applied
// or after (their outcome unknown), never completed; a fence; a truncation;
// readers that reconnect; a subscriber that commits, resumes and seeks.
func TestConcurrent(t *testing.T) {
	h := New()
	var wg sync.WaitGroup
	for _, name := range []string{"l", "m"} {
		wg.Go(func() { runMemLog(t, h, name) })
	}
	wg.Wait()
	rep := h.Check()
	t.Logf("report:\n%s", rep)
	expect(t, rep, nil)
	if rep.Surfaced == 0 || rep.Unknown <= rep.Surfaced || rep.Failed == 0 || rep.Truncated == 0 || rep.Reads == 0 {
		t.Errorf("the history lacks some of what it should exercise:\n%s", rep)
	}
}
