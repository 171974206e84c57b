package metatest

import (
	"errors"
	"testing"

	"github.com/ternwal/tern/internal/meta"
)

// claimAs opens the session o asks for, or fails the test.
func claimAs(t *testing.T, s meta.Store, name string, o meta.ClaimOptions) meta.Claim {
	t.Helper()
	c, err := s.ClaimWriter(t.Context(), name, o)
	if err != nil {
		t.Fatalf("ClaimWriter(%q, %+v): %v", name, o, err)
	}
	return c
}

// A chosen session: lower is refused, equal reopens it with a new epoch
// (losing the claim that held it), higher fences; without one, a new
// session above the log's.
func testClaimSessions(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	c := claimAs(t, s, "a", meta.ClaimOptions{Session: 5})
	if c.Session() != 5 || c.Epoch() != 1 {
		t.Fatalf("first claim of session 5: Session %d, Epoch %d, want 5, 1", c.Session(), c.Epoch())
	}
	if _, err := s.ClaimWriter(ctx, "a", meta.ClaimOptions{Session: 4}); !errors.Is(err, meta.ErrStaleEpoch) {
		t.Fatalf("ClaimWriter of session 4 below 5: err = %v, want ErrStaleEpoch", err)
	}
	checkHeld(t, c, "claim of session 5 after a refused lower session")
	again := claimAs(t, s, "a", meta.ClaimOptions{Session: 5})
	if again.Session() != 5 || again.Epoch() != 2 {
		t.Fatalf("reopened session 5: Session %d, Epoch %d, want 5, 2", again.Session(), again.Epoch())
	}
	waitLost(t, c, "claim of session 5 after the session was reopened elsewhere")
	next := claimAs(t, s, "a", meta.ClaimOptions{})
	if next.Session() != 6 || next.Epoch() != 3 {
		t.Fatalf("new session after 5: Session %d, Epoch %d, want 6, 3", next.Session(), next.Epoch())
	}
	waitLost(t, again, "claim of session 5 after session 6")
	high := claimAs(t, s, "a", meta.ClaimOptions{Session: 100})
	waitLost(t, next, "claim of session 6 after session 100")
	checkHeld(t, high, "claim of session 100")
	if l := get(t, s, "a"); l.Session != 100 || l.Epoch != 4 || l.Shared || l.Ended {
		t.Errorf("log after session 100: %+v", l)
	}
	// Reopen only reopens.
	if _, err := s.ClaimWriter(ctx, "a", meta.ClaimOptions{Session: 101, Reopen: true}); !errors.Is(err, meta.ErrStaleEpoch) {
		t.Fatalf("Reopen of session 101 above 100: err = %v, want ErrStaleEpoch", err)
	}
	if _, err := s.ClaimWriter(ctx, "a", meta.ClaimOptions{Session: 99, Reopen: true}); !errors.Is(err, meta.ErrStaleEpoch) {
		t.Fatalf("Reopen of session 99 below 100: err = %v, want ErrStaleEpoch", err)
	}
	checkHeld(t, high, "claim of session 100 after refused reopens")
	// Ending a session with an epoch that is not the log's (the epoch of
	// an older claim) changes nothing.
	if err := s.EndSession(ctx, "a", 3); err != nil {
		t.Fatalf("EndSession(3): %v", err)
	}
	if l := get(t, s, "a"); l.Ended {
		t.Error("EndSession with an older epoch ended the log's session")
	}
	if err := s.EndSession(ctx, "a", high.Epoch()); err != nil {
		t.Fatalf("EndSession(%d): %v", high.Epoch(), err)
	}
	if l := get(t, s, "a"); !l.Ended || l.Session != 100 || l.Epoch != 4 {
		t.Errorf("log after EndSession(100): %+v", l)
	}
	checkHeld(t, high, "claim of an ended session")
	// An ended session can be reopened: it is open again.
	claimAs(t, s, "a", meta.ClaimOptions{Session: 100, Reopen: true})
	if l := get(t, s, "a"); l.Ended {
		t.Error("reopened session still ended")
	}
	if err := s.EndSession(ctx, "missing", 1); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("EndSession of a missing log: err = %v, want ErrNotFound", err)
	}
}

// Shared producers share one session, never fence an open exclusive one,
// and may follow an ended one; an exclusive writer fences them.
func testSharedSessions(t *testing.T, s meta.Store) {
	ctx := t.Context()
	shared := meta.ClaimOptions{Shared: true}
	create(t, s, "a", nil)
	p1 := claimAs(t, s, "a", shared)
	if p1.Session() != 1 {
		t.Fatalf("first shared session = %d, want 1", p1.Session())
	}
	p2 := claimAs(t, s, "a", shared)
	if p2.Session() != 1 || p2.Epoch() != 2 {
		t.Fatalf("shared session reopened: Session %d, Epoch %d, want 1, 2", p2.Session(), p2.Epoch())
	}
	if _, err := s.ClaimWriter(ctx, "a", meta.ClaimOptions{Session: 1}); !errors.Is(err, meta.ErrSessionHeld) {
		t.Fatalf("exclusive claim of the shared session: err = %v, want ErrSessionHeld", err)
	}
	w := claimAs(t, s, "a", meta.ClaimOptions{})
	if w.Session() != 2 {
		t.Fatalf("exclusive session after the shared one = %d, want 2", w.Session())
	}
	waitLost(t, p2, "shared claim after an exclusive writer opened")
	if _, err := s.ClaimWriter(ctx, "a", shared); !errors.Is(err, meta.ErrSessionHeld) {
		t.Fatalf("shared claim while an exclusive session is open: err = %v, want ErrSessionHeld", err)
	}
	checkHeld(t, w, "exclusive claim after a refused shared one")
	if err := s.EndSession(ctx, "a", w.Epoch()); err != nil {
		t.Fatalf("EndSession: %v", err)
	}
	p3 := claimAs(t, s, "a", shared)
	if p3.Session() != 3 {
		t.Fatalf("shared session after the exclusive one ended = %d, want 3", p3.Session())
	}
	if _, err := s.ClaimWriter(ctx, "a", meta.ClaimOptions{Shared: true, Session: 3}); err == nil {
		t.Error("shared claim with a chosen session succeeded")
	}

	// A log whose epoch was bumped before it had a session (a record from
	// before sessions) takes the epoch as its ended session.
	create(t, s, "old", nil)
	for range 3 {
		if _, err := s.BumpEpoch(ctx, "old"); err != nil {
			t.Fatalf("BumpEpoch: %v", err)
		}
	}
	if _, err := s.ClaimWriter(ctx, "old", meta.ClaimOptions{Session: 2}); !errors.Is(err, meta.ErrStaleEpoch) {
		t.Fatalf("session 2 below an old record's epoch 3: err = %v, want ErrStaleEpoch", err)
	}
	if c := claimAs(t, s, "old", shared); c.Session() != 4 || c.Epoch() != 4 {
		t.Fatalf("shared session over an old record: Session %d, Epoch %d, want 4, 4", c.Session(), c.Epoch())
	}
}
