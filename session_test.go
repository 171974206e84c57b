package tern_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/ternwal/tern"
)

// WithEpoch: a lower epoch is fenced, an equal one reopens the session (and
// appends go on at it), a higher one fences the older sessions. The epoch is
// the one LogInfo shows.
func TestModeWithEpoch(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, err := c.CreateLog(t.Context(), "terms", tern.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w2, err := l.OpenWriter(t.Context(), tern.WithEpoch(2))
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Close()
		if w2.Epoch() != 2 {
			t.Fatalf("writer of WithEpoch(2) has epoch %d", w2.Epoch())
		}
		mustAppend(t, w2, "term 2")
		if info, err := l.Info(t.Context()); err != nil || info.Epoch != 2 {
			t.Fatalf("Info after WithEpoch(2): %+v, %v", info, err)
		}

		// A late open for term 1 is refused, and the term-2 writer goes on.
		if _, err := l.OpenWriter(t.Context(), tern.WithEpoch(1)); !errors.Is(err, tern.ErrFenced) {
			t.Fatalf("OpenWriter(WithEpoch(1)) under epoch 2: %v, want ErrFenced", err)
		}
		if off := mustAppend(t, w2, "term 2 again"); off != 1 {
			t.Fatalf("term-2 writer appended at %d after a refused older open, want 1", off)
		}

		// Reopening term 2 continues the session.
		again, err := l.OpenWriter(t.Context(), tern.WithEpoch(2))
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		if again.Epoch() != 2 {
			t.Fatalf("reopened writer has epoch %d, want 2", again.Epoch())
		}
		if off := mustAppend(t, again, "term 2 reopened"); off != 2 {
			t.Fatalf("reopened session appended at %d, want 2", off)
		}

		// Term 5 fences term 2.
		w5, err := l.OpenWriter(t.Context(), tern.WithEpoch(5))
		if err != nil {
			t.Fatal(err)
		}
		defer w5.Close()
		for _, w := range []*tern.Writer{w2, again} {
			if _, err := w.Append(t.Context(), tern.Entry{Payload: []byte("stale")}); !errors.Is(err, tern.ErrFenced) {
				t.Fatalf("append of epoch 2 after epoch 5 opened: %v, want ErrFenced", err)
			}
		}
		if off := mustAppend(t, w5, "term 5"); off != 3 {
			t.Fatalf("term-5 writer appended at %d, want 3", off)
		}
		// Without WithEpoch: a new epoch above the log's.
		w6, err := l.OpenWriter(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer w6.Close()
		if w6.Epoch() != 6 {
			t.Fatalf("a new writer after epoch 5 has epoch %d, want 6", w6.Epoch())
		}
		if info, err := l.Info(t.Context()); err != nil || info.Epoch != 6 {
			t.Fatalf("Info after the new writer: %+v, %v", info, err)
		}
		r := mustReader(t, l, 0)
		for i, want := range []string{"term 2", "term 2 again", "term 2 reopened", "term 5"} {
			wantEntry(t, mustNext(t, r), tern.Offset(i), want)
		}
	})
}

// Shared producers append side by side without fencing each other; an
// exclusive writer fences them and keeps the log to itself until it
// closes; then they may append again.
func TestModeSharedProducers(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, err := c.CreateLog(t.Context(), "shared", tern.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p1, err := l.OpenWriter(t.Context(), tern.Shared())
		if err != nil {
			t.Fatal(err)
		}
		defer p1.Close()
		p2, err := l.OpenWriter(t.Context(), tern.Shared())
		if err != nil {
			t.Fatal(err)
		}
		defer p2.Close()
		const each = 50
		var wg sync.WaitGroup
		for i, p := range []*tern.Writer{p1, p2} {
			wg.Go(func() {
				for j := range each {
					if _, err := p.Append(t.Context(), tern.Entry{Payload: []byte{byte(i), byte(j)}}); err != nil {
						t.Errorf("producer %d, append %d: %v", i, j, err)
						return
					}
				}
			})
		}
		if _, err := l.Append(t.Context(), tern.Entry{Payload: []byte("log append")}); err != nil {
			t.Fatalf("Log.Append beside shared producers: %v", err)
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if info, err := l.Info(t.Context()); err != nil || info.End != 2*each+1 {
			t.Fatalf("after the shared appends: %+v, %v", info, err)
		}

		w, err := l.OpenWriter(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p1.Append(t.Context(), tern.Entry{Payload: []byte("late")}); !errors.Is(err, tern.ErrFenced) {
			t.Fatalf("shared producer after an exclusive writer opened: %v, want ErrFenced", err)
		}
		if _, err := l.Append(t.Context(), tern.Entry{Payload: []byte("late")}); !errors.Is(err, tern.ErrFenced) {
			t.Fatalf("Log.Append while an exclusive writer is open: %v, want ErrFenced", err)
		}
		if off := mustAppend(t, w, "exclusive"); off != 2*each+1 {
			t.Fatalf("the exclusive writer appended at %d, want %d", off, 2*each+1)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		off, err := l.Append(t.Context(), tern.Entry{Payload: []byte("after")})
		if err != nil || off != 2*each+2 {
			t.Fatalf("Log.Append after the exclusive writer closed: %d, %v", off, err)
		}
		p3, err := l.OpenWriter(t.Context(), tern.Shared())
		if err != nil {
			t.Fatal(err)
		}
		defer p3.Close()
		if off := mustAppend(t, p3, "again"); off != 2*each+3 {
			t.Fatalf("a new shared producer appended at %d", off)
		}
		if err := p3.AppendTimeTick(t.Context(), 1); !errors.Is(err, tern.ErrInvalid) {
			t.Fatalf("time tick of a shared producer: %v, want ErrInvalid", err)
		}
		if _, err := l.OpenWriter(t.Context(), tern.Shared(), tern.WithEpoch(3)); !errors.Is(err, tern.ErrInvalid) {
			t.Fatalf("Shared with WithEpoch: %v, want ErrInvalid", err)
		}
	})
}

// Detach leaves the session open: shared producers stay out, and the
// session reopens.
func TestModeDetach(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "detached", tern.LogOptions{})
		mustAppend(t, w, "one")
		if err := w.Detach(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(t.Context(), tern.Entry{Payload: []byte("shared")}); !errors.Is(err, tern.ErrFenced) {
			t.Fatalf("Log.Append after the exclusive writer detached: %v, want ErrFenced", err)
		}
		again, err := l.OpenWriter(t.Context(), tern.WithEpoch(w.Epoch()), tern.OnlyReopen())
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		if off := mustAppend(t, again, "two"); off != 1 {
			t.Fatalf("reopened session appended at %d, want 1", off)
		}
		if _, err := l.OpenWriter(t.Context(), tern.WithEpoch(w.Epoch()+1), tern.OnlyReopen()); !errors.Is(err, tern.ErrFenced) {
			t.Fatalf("OnlyReopen of a higher epoch: %v, want ErrFenced", err)
		}
		if off := mustAppend(t, again, "three"); off != 2 {
			t.Fatalf("appended at %d after a refused reopen, want 2", off)
		}
	})
}

// IfEnd appends only at the end it names, counting the appends queued
// ahead; a mismatch says where the log ends and appends nothing.
func TestModeIfEnd(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "cas", tern.LogOptions{})
		if off, err := w.Append(t.Context(), tern.Entry{Payload: []byte("a")}, tern.IfEnd(0)); err != nil || off != 0 {
			t.Fatalf("IfEnd(0) on an empty log: %d, %v", off, err)
		}
		_, err := w.Append(t.Context(), tern.Entry{Payload: []byte("stale")}, tern.IfEnd(0))
		var mismatch *tern.EndMismatchError
		if !errors.Is(err, tern.ErrConditionFailed) || !errors.As(err, &mismatch) || mismatch.End != 1 || mismatch.Expected != 0 {
			t.Fatalf("IfEnd(0) at end 1: %v (%+v), want ErrConditionFailed with end 1", err, mismatch)
		}
		// Queued appends count: the second is at 2 only after the first.
		p1 := w.AppendAsync(tern.Entry{Payload: []byte("b")}, tern.IfEnd(1))
		p2 := w.AppendBatchAsync([]tern.Entry{{Payload: []byte("c")}, {Payload: []byte("d")}}, tern.IfEnd(2))
		p3 := w.AppendAsync(tern.Entry{Payload: []byte("wrong")}, tern.IfEnd(2))
		if off, err := p1.Wait(t.Context()); err != nil || off != 1 {
			t.Fatalf("IfEnd(1): %d, %v", off, err)
		}
		if off, err := p2.Wait(t.Context()); err != nil || off != 2 {
			t.Fatalf("IfEnd(2) after a queued append: %d, %v", off, err)
		}
		if _, err := p3.Wait(t.Context()); !errors.As(err, &mismatch) || mismatch.End != 4 {
			t.Fatalf("IfEnd(2) behind a batch of two: %v, want the end 4", err)
		}
		// Shared producers too.
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if off, err := l.Append(t.Context(), tern.Entry{Payload: []byte("e")}, tern.IfEnd(4)); err != nil || off != 4 {
			t.Fatalf("Log.Append with IfEnd(4): %d, %v", off, err)
		}
		if _, err := l.Append(t.Context(), tern.Entry{Payload: []byte("x")}, tern.IfEnd(4)); !errors.Is(err, tern.ErrConditionFailed) {
			t.Fatalf("Log.Append with a stale IfEnd: %v", err)
		}
		r := mustReader(t, l, 0)
		for i, want := range []string{"a", "b", "c", "d", "e"} {
			wantEntry(t, mustNext(t, r), tern.Offset(i), want)
		}
	})
}

// One Log.Append after another share the log's shared session: they do not
// each take a new epoch, which would start a segment each.
func TestModeLogAppendKeepsSession(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, err := c.CreateLog(t.Context(), "many-appends", tern.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if off, err := l.Append(t.Context(), tern.Entry{Payload: []byte{byte(i)}}); err != nil || off != tern.Offset(i) {
				t.Fatalf("Log.Append %d: %d, %v", i, off, err)
			}
		}
		info, err := l.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.Segments > 2 {
			t.Fatalf("20 Log.Appends left %d segments: each took a new session", info.Segments)
		}
	})
}
