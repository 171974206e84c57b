package metatest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// LostTimeout is how long the suite waits for a claim's Lost to close after
// what ends the claim. It bounds a wait, it does not time the store: a store
// that sees a change through a watch may take a moment.
const LostTimeout = 10 * time.Second

// ClaimWriter bumps the epoch as BumpEpoch does, the two interleaved, and the
// newest claim is valid.
func testClaimWriter(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	create(t, s, "b", nil)
	c1 := claim(t, s, "a")
	if c1.Epoch() != 1 || !c1.Valid() {
		t.Fatalf("first ClaimWriter: Epoch %d, Valid %v, want 1, true", c1.Epoch(), c1.Valid())
	}
	if e, err := s.BumpEpoch(ctx, "a"); err != nil || e != 2 {
		t.Fatalf("BumpEpoch after ClaimWriter = %d, %v, want 2", e, err)
	}
	c3 := claim(t, s, "a")
	if c3.Epoch() != 3 || !c3.Valid() {
		t.Fatalf("ClaimWriter after BumpEpoch: Epoch %d, Valid %v, want 3, true", c3.Epoch(), c3.Valid())
	}
	if l := get(t, s, "a"); l.Epoch != 3 {
		t.Errorf("Log Epoch = %d, want 3", l.Epoch)
	}
	if e, err := s.BumpEpoch(ctx, "a"); err != nil || e != 4 {
		t.Fatalf("BumpEpoch after the second ClaimWriter = %d, %v, want 4", e, err)
	}
	if l := get(t, s, "b"); l.Epoch != 0 {
		t.Errorf("claims on a changed another log's Epoch to %d", l.Epoch)
	}
	if _, err := s.ClaimWriter(ctx, "missing", meta.ClaimOptions{}); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("ClaimWriter of a missing log: err = %v, want ErrNotFound", err)
	}
}

// A newer claim on the same log loses the older one; a claim on another log
// stays.
func testClaimLostToNewerClaim(t *testing.T, s meta.Store) {
	create(t, s, "a", nil)
	create(t, s, "b", nil)
	old := claim(t, s, "a")
	other := claim(t, s, "b")
	newer := claim(t, s, "a")
	waitLost(t, old, "older claim after a newer ClaimWriter")
	if old.Valid() {
		t.Error("older claim Valid after its Lost closed")
	}
	checkHeld(t, newer, "newer claim")
	checkHeld(t, other, "claim on another log")
}

func testClaimLostToBumpEpoch(t *testing.T, s meta.Store) {
	create(t, s, "a", nil)
	c := claim(t, s, "a")
	if _, err := s.BumpEpoch(t.Context(), "a"); err != nil {
		t.Fatalf("BumpEpoch: %v", err)
	}
	waitLost(t, c, "claim after BumpEpoch")
	if c.Valid() {
		t.Error("claim Valid after its Lost closed")
	}
	if _, err := s.AdvanceStart(t.Context(), "a", 5); err != nil {
		t.Fatalf("AdvanceStart: %v", err)
	}
	// Changes other than the epoch leave a claim alone.
	c = claim(t, s, "a")
	if _, err := s.AdvanceStart(t.Context(), "a", 10); err != nil {
		t.Fatalf("AdvanceStart: %v", err)
	}
	createSub(t, s, "a", meta.Sub{Name: "s"})
	// Ending a claim on a log whose name has a's as a prefix is also a
	// barrier: a store that learns of changes in order has seen the ones
	// above once it has seen this one.
	create(t, s, "a/b", nil)
	ab := claim(t, s, "a/b")
	if _, err := s.BumpEpoch(t.Context(), "a/b"); err != nil {
		t.Fatalf("BumpEpoch: %v", err)
	}
	waitLost(t, ab, "claim on a/b after BumpEpoch")
	checkHeld(t, c, "claim on a after AdvanceStart, CreateSub and a change of a/b")
}

// Of many concurrent ClaimWriters each gets its own epoch, and only the
// newest claim holds.
func testConcurrentClaimWriter(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	const n = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		claims = map[uint64]meta.Claim{}
	)
	for range n {
		wg.Go(func() {
			c, err := s.ClaimWriter(ctx, "x", meta.ClaimOptions{})
			if err != nil {
				t.Errorf("ClaimWriter: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if claims[c.Epoch()] != nil {
				t.Errorf("ClaimWriter returned epoch %d twice", c.Epoch())
			}
			claims[c.Epoch()] = c
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for e := uint64(1); e < n; e++ {
		if c := claims[e]; c == nil {
			t.Errorf("no ClaimWriter returned epoch %d", e)
		} else {
			waitLost(t, c, "older of concurrent claims")
		}
	}
	if c := claims[n]; c == nil {
		t.Errorf("no ClaimWriter returned epoch %d", n)
	} else {
		checkHeld(t, c, "newest of concurrent claims")
	}
	if l := get(t, s, "x"); l.Epoch != n {
		t.Errorf("after %d ClaimWriters, Epoch = %d", n, l.Epoch)
	}
}

// Release gives the claim up at once; the epoch stays.
func testClaimRelease(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	c := claim(t, s, "a")
	if err := c.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if c.Valid() {
		t.Error("claim Valid after Release")
	}
	select {
	case <-c.Lost():
	default:
		t.Error("Lost not closed when Release returned")
	}
	if err := c.Release(ctx); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if l := get(t, s, "a"); l.Epoch != 1 {
		t.Errorf("after Release, Epoch = %d, want 1", l.Epoch)
	}
	next := claim(t, s, "a")
	if next.Epoch() != 2 {
		t.Errorf("ClaimWriter after Release: Epoch = %d, want 2", next.Epoch())
	}
	checkHeld(t, next, "claim after an earlier one's Release")
}

func testClaimLostToDeleteLog(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	create(t, s, "a/b", nil)
	c := claim(t, s, "a")
	other := claim(t, s, "a/b")
	if err := s.DeleteLog(ctx, "a"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	waitLost(t, c, "claim after DeleteLog")
	if c.Valid() {
		t.Error("claim Valid after its Lost closed")
	}
	// The log created again starts over, and the old claim stays lost.
	create(t, s, "a", nil)
	if c := claim(t, s, "a"); c.Epoch() != 1 {
		t.Errorf("ClaimWriter of the re-created log: Epoch = %d, want 1", c.Epoch())
	}
	checkHeld(t, other, "claim on another log")
	if c.Valid() {
		t.Error("claim on the deleted log Valid again")
	}
}

// Close loses every claim made through the store. The test closes the store
// itself.
func testClaimLostToClose(t *testing.T, s meta.Store) {
	closed := false
	t.Cleanup(func() {
		if !closed {
			s.Close()
		}
	})
	create(t, s, "a", nil)
	create(t, s, "b", nil)
	a := claim(t, s, "a")
	b := claim(t, s, "b")
	released := claim(t, s, "b")
	if err := released.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	closed = true
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range []meta.Claim{a, b, released} {
		waitLost(t, c, "claim after Close")
		if c.Valid() {
			t.Errorf("claim on epoch %d Valid after Close", c.Epoch())
		}
	}
	if err := released.Release(t.Context()); err != nil {
		t.Errorf("Release after Close: %v", err)
	}
}

// A canceled context fails ClaimWriter and Release with context.Canceled and
// changes nothing: no epoch is bumped, no claim given up.
func testCanceledContextClaims(t *testing.T, s meta.Store) {
	create(t, s, "x", nil)
	c := claim(t, s, "x")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.ClaimWriter(ctx, "x", meta.ClaimOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("ClaimWriter: err = %v, want context.Canceled", err)
	}
	if err := c.Release(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Release: err = %v, want context.Canceled", err)
	}
	if l := get(t, s, "x"); l.Epoch != 1 {
		t.Errorf("after canceled calls, Epoch = %d, want 1", l.Epoch)
	}
	checkHeld(t, c, "claim after a canceled Release")
}

func claim(t *testing.T, s meta.Store, name string) meta.Claim {
	t.Helper()
	c, err := s.ClaimWriter(t.Context(), name, meta.ClaimOptions{})
	if err != nil {
		t.Fatalf("ClaimWriter(%q): %v", name, err)
	}
	return c
}

// waitLost waits, up to LostTimeout, for c's Lost to close.
func waitLost(t *testing.T, c meta.Claim, what string) {
	t.Helper()
	select {
	case <-c.Lost():
	case <-time.After(LostTimeout):
		t.Fatalf("%s (epoch %d): Lost not closed after %v", what, c.Epoch(), LostTimeout)
	}
}

// checkHeld checks that c is valid and not lost.
func checkHeld(t *testing.T, c meta.Claim, what string) {
	t.Helper()
	select {
	case <-c.Lost():
		t.Errorf("%s (epoch %d): Lost closed, want held", what, c.Epoch())
		return
	default:
	}
	if !c.Valid() {
		t.Errorf("%s (epoch %d): not Valid, want held", what, c.Epoch())
	}
}
