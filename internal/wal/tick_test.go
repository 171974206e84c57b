package wal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/vfs"
)

func openTestLog(t *testing.T, fs vfs.FS) *Log {
	t.Helper()
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendWait(t *testing.T, l *Log, epoch uint64, payload string) uint64 {
	t.Helper()
	p, err := l.Append(epoch, []record.Entry{{Payload: []byte(payload)}}, engine.AppendOptions{})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	off, err := p.Wait(t.Context())
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return off
}

func tickWait(t *testing.T, l *Log, epoch, tick uint64) uint64 {
	t.Helper()
	p, err := l.AppendTick(epoch, tick)
	if err != nil {
		t.Fatalf("AppendTick: %v", err)
	}
	pos, err := p.Wait(t.Context())
	if err != nil {
		t.Fatalf("AppendTick: %v", err)
	}
	return pos
}

// describe renders what a reader returns: "e:<offset>" or "t:<time>@<offset>".
func describe(es []engine.Entry) string {
	var parts []string
	for _, e := range es {
		if e.IsTick {
			parts = append(parts, fmt.Sprintf("t%d@%d", e.Tick, e.Offset))
		} else {
			parts = append(parts, fmt.Sprintf("e%d", e.Offset))
		}
	}
	return strings.Join(parts, " ")
}

func readN(t *testing.T, r engine.Reader, n int, batch bool) []engine.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []engine.Entry
	for len(out) < n {
		if batch {
			es, err := r.NextBatch(ctx, n-len(out), 0)
			if err != nil {
				t.Fatalf("NextBatch after %s: %v", describe(out), err)
			}
			out = append(out, es...)
			continue
		}
		e, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %s: %v", describe(out), err)
		}
		out = append(out, e)
	}
	return out
}

// Ticks come in their places between entries, for Next and NextBatch, and
// only to readers that asked for them and were open when they were sent.
func TestTicksOrdered(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			l := openTestLog(t, vfs.NewMem())
			appendWait(t, l, 1, "a") // before the readers open
			withTicks, err := l.NewReader(0, true)
			if err != nil {
				t.Fatal(err)
			}
			defer withTicks.Close()
			without, err := l.NewReader(0, false)
			if err != nil {
				t.Fatal(err)
			}
			defer without.Close()

			if pos := tickWait(t, l, 1, 10); pos != 1 {
				t.Fatalf("tick position = %d, want 1", pos)
			}
			appendWait(t, l, 1, "b")
			appendWait(t, l, 1, "c")
			tickWait(t, l, 1, 20)
			appendWait(t, l, 1, "d")

			if got, want := describe(readN(t, withTicks, 6, batch)), "e0 t10@1 e1 e2 t20@3 e3"; got != want {
				t.Errorf("reader with ticks read %q, want %q", got, want)
			}
			if got, want := describe(readN(t, without, 4, batch)), "e0 e1 e2 e3"; got != want {
				t.Errorf("reader without ticks read %q, want %q", got, want)
			}
			late, err := l.NewReader(0, true)
			if err != nil {
				t.Fatal(err)
			}
			defer late.Close()
			if got, want := describe(readN(t, late, 4, batch)), "e0 e1 e2 e3"; got != want {
				t.Errorf("reader opened after the ticks read %q, want %q", got, want)
			}
		})
	}
}

// A reader waiting at the tail wakes for a tick; a tick sent while appends
// are queued comes after them, never before.
func TestTickWakesAndFollowsQueuedAppends(t *testing.T) {
	l := openTestLog(t, vfs.NewMem())
	r, err := l.NewReader(0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan engine.Entry, 1)
	go func() {
		e, err := r.Next(t.Context())
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	tickWait(t, l, 1, 7)
	if e := <-got; !e.IsTick || e.Tick != 7 || e.Offset != 0 {
		t.Fatalf("waiting reader got %+v, want tick 7 at 0", e)
	}

	// Many appends in flight from several goroutines, a tick among them:
	// every append queued before the tick comes before it.
	const n = 200
	var wg sync.WaitGroup
	before := make(chan uint64, n)
	for range 4 {
		wg.Go(func() {
			for range n / 4 {
				p, err := l.Append(1, []record.Entry{{Payload: []byte("x")}}, engine.AppendOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				off, err := p.Wait(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				before <- off
			}
		})
	}
	wg.Wait()
	close(before)
	pos := tickWait(t, l, 1, 8)
	for off := range before {
		if off >= pos {
			t.Fatalf("entry %d was acknowledged before the tick was sent, but the tick's position is %d", off, pos)
		}
	}
	es := readN(t, r, n+1, true)
	last := es[len(es)-1]
	if !last.IsTick || last.Tick != 8 || last.Offset != n {
		t.Fatalf("after %d entries the reader got %+v, want tick 8 at %d", n, last, n)
	}
}

// A fenced writer's tick fails; a closed reader stops getting ticks.
func TestTickFencedAndClosedReader(t *testing.T) {
	l := openTestLog(t, vfs.NewMem())
	r, err := l.NewReader(0, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fence(t.Context(), 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendTick(1, 5); !errors.Is(err, rpcerr.ErrFenced) {
		t.Fatalf("AppendTick of a fenced epoch: %v, want rpcerr.ErrFenced", err)
	}
	r.Close()
	tickWait(t, l, 2, 6)
	l.mu.Lock()
	n := l.readers.Ticking()
	l.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d readers still registered for ticks after Close", n)
	}
}

// A reader that does not read keeps a bounded queue: ticks at one position
// collapse into the newest.
func TestTicksCoalesceAtOnePosition(t *testing.T) {
	l := openTestLog(t, vfs.NewMem())
	r, err := l.NewReader(0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range uint64(100) {
		tickWait(t, l, 1, i)
	}
	appendWait(t, l, 1, "a")
	tickWait(t, l, 1, 1000)
	if got, want := describe(readN(t, r, 3, true)), "t99@0 e0 t1000@1"; got != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// Ticks write nothing: the segment files are the same with and without them.
func TestTicksWriteNothing(t *testing.T) {
	fs := vfs.NewMem()
	l := openTestLog(t, fs)
	appendWait(t, l, 1, "a")
	before := l.Stats()
	for i := range uint64(50) {
		tickWait(t, l, 1, i)
	}
	after := l.Stats()
	if after.Bytes != before.Bytes || after.Syncs != before.Syncs || after.End != before.End {
		t.Fatalf("ticks changed the log: before %+v, after %+v", before, after)
	}
}
