package metatest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

func testSubs(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	if subs, err := s.ListSubs(ctx, "a"); err != nil || subs != nil {
		t.Fatalf("ListSubs of a new log = %#v, %v, want nil", subs, err)
	}

	// CreateSub uses Name, Cursor and Pin; the store sets Created.
	in := meta.Sub{Name: "s1", Created: time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC), Cursor: 5, Pin: true}
	before := time.Now()
	got, err := s.CreateSub(ctx, "a", in)
	after := time.Now()
	if err != nil {
		t.Fatalf("CreateSub: %v", err)
	}
	if got.Name != "s1" || got.Cursor != 5 || !got.Pin {
		t.Errorf("CreateSub(%+v) = %+v, want Name s1, Cursor 5, Pin", in, got)
	}
	// Allow for a store whose clock is not ours and for truncation.
	if got.Created.Before(before.Add(-time.Minute)) || got.Created.After(after.Add(time.Minute)) {
		t.Errorf("CreateSub Created = %v, want about %v", got.Created, before)
	}
	checkSub(t, s, "a", got)

	// Names sort bytewise and may hold any byte.
	byName := map[string]meta.Sub{"s1": got}
	for i, name := range []string{"s0", "s1/x", "s", "\xff", "a b"} {
		byName[name] = createSub(t, s, "a", meta.Sub{Name: name, Cursor: uint64(i)})
	}
	want := []string{"a b", "s", "s0", "s1", "s1/x", "\xff"}
	checkSubs(t, s, "a", want, byName)

	_, err = s.CreateSub(ctx, "a", meta.Sub{Name: "s1", Cursor: 99})
	if !errors.Is(err, meta.ErrSubExist) {
		t.Fatalf("CreateSub of an existing name: err = %v, want ErrSubExist", err)
	}
	checkSub(t, s, "a", got) // unchanged

	if err := s.DeleteSub(ctx, "a", "s1"); err != nil {
		t.Fatalf("DeleteSub: %v", err)
	}
	if _, err := s.Sub(ctx, "a", "s1"); !errors.Is(err, meta.ErrSubNotFound) {
		t.Errorf("Sub after DeleteSub: err = %v, want ErrSubNotFound", err)
	}
	if err := s.DeleteSub(ctx, "a", "s1"); !errors.Is(err, meta.ErrSubNotFound) {
		t.Errorf("second DeleteSub: err = %v, want ErrSubNotFound", err)
	}
	want = slices.DeleteFunc(want, func(n string) bool { return n == "s1" })
	checkSubs(t, s, "a", want, byName)

	// The name is free again, for a subscription that starts over.
	again := createSub(t, s, "a", meta.Sub{Name: "s1", Cursor: 1})
	if again.Cursor != 1 || again.Pin {
		t.Errorf("re-created subscription = %+v, want Cursor 1, no Pin", again)
	}
	checkSub(t, s, "a", again)

	// Subscriptions are not logs.
	if logs, err := s.ListLogs(ctx, ""); err != nil || len(logs) != 1 {
		t.Errorf("ListLogs with subscriptions = %+v, %v, want only a", logs, err)
	}
}

// Operations on a missing log fail with ErrNotFound, on a missing
// subscription of a log that exists with ErrSubNotFound, and neither creates
// anything.
func testSubNotFound(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "gone", nil)
	createSub(t, s, "gone", meta.Sub{Name: "s"})
	create(t, s, "other", nil)
	createSub(t, s, "other", meta.Sub{Name: "s"})
	if err := s.DeleteLog(ctx, "gone"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	for _, log := range []string{"missing", "gone", "othe", "other/"} {
		if _, err := s.CreateSub(ctx, log, meta.Sub{Name: "s"}); !errors.Is(err, meta.ErrNotFound) {
			t.Errorf("CreateSub(%q): err = %v, want ErrNotFound", log, err)
		}
		checkSubErrs(t, s, log, "s", meta.ErrNotFound)
		if _, err := s.ListSubs(ctx, log); !errors.Is(err, meta.ErrNotFound) {
			t.Errorf("ListSubs(%q): err = %v, want ErrNotFound", log, err)
		}
	}
	for _, name := range []string{"missing", "", "s/", "S"} {
		checkSubErrs(t, s, "other", name, meta.ErrSubNotFound)
	}
	if logs, err := s.ListLogs(ctx, ""); err != nil || !slices.Equal(names(logs), []string{"other"}) {
		t.Errorf("ListLogs = %+v, %v, want [other]", logs, err)
	}
	subs, err := s.ListSubs(ctx, "other")
	if err != nil || len(subs) != 1 || subs[0].Name != "s" || subs[0].Cursor != 0 {
		t.Errorf("ListSubs(other) = %+v, %v, want s alone, unchanged", subs, err)
	}
}

// checkSubErrs checks that every operation on one subscription fails with
// want, and not with the other not-found error.
func checkSubErrs(t *testing.T, s meta.Store, log, name string, want error) {
	t.Helper()
	ctx := t.Context()
	other := meta.ErrSubNotFound
	if want == meta.ErrSubNotFound {
		other = meta.ErrNotFound
	}
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, want) || errors.Is(err, other) {
			t.Errorf("%s(%q, %q): err = %v, want %v", op, log, name, err, want)
		}
	}
	_, err := s.Sub(ctx, log, name)
	check("Sub", err)
	check("DeleteSub", s.DeleteSub(ctx, log, name))
	_, err = s.CommitCursor(ctx, log, name, 1)
	check("CommitCursor", err)
	check("SeekCursor", s.SeekCursor(ctx, log, name, 1))
}

// Of many concurrent CreateSubs of one name exactly one succeeds.
func testConcurrentCreateSub(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	const n = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []meta.Sub
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			sub, err := s.CreateSub(ctx, "x", meta.Sub{Name: "s", Cursor: uint64(i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, sub)
			case !errors.Is(err, meta.ErrSubExist):
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("CreateSub errors other than ErrSubExist: %v", errs)
	}
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent CreateSubs succeeded, want 1", len(won), n)
	}
	checkSub(t, s, "x", won[0])
}

func testCommitCursor(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	sub := createSub(t, s, "a", meta.Sub{Name: "s", Pin: true})
	other := createSub(t, s, "a", meta.Sub{Name: "t", Cursor: 3})
	for _, step := range []struct{ to, want uint64 }{
		{0, 0},
		{10, 10},
		{5, 10},
		{10, 10},
		{0, 10},
		{11, 11},
		{1 << 63, 1 << 63},
		{1<<64 - 1, 1<<64 - 1},
		{7, 1<<64 - 1},
	} {
		got, err := s.CommitCursor(ctx, "a", "s", step.to)
		if err != nil {
			t.Fatalf("CommitCursor(%d): %v", step.to, err)
		}
		if got != step.want {
			t.Fatalf("CommitCursor(%d) = %d, want %d", step.to, got, step.want)
		}
		sub.Cursor = step.want
		checkSub(t, s, "a", sub) // Created and Pin unchanged
	}
	checkSub(t, s, "a", other)
}

// Concurrent CommitCursors leave the highest cursor, and none returns less
// than it asked for.
func testConcurrentCommitCursor(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	createSub(t, s, "x", meta.Sub{Name: "s"})
	const n = 32
	var wg sync.WaitGroup
	for i := range uint64(n) {
		to := (i * 7) % n // not in order
		wg.Go(func() {
			got, err := s.CommitCursor(ctx, "x", "s", to)
			if err != nil {
				t.Errorf("CommitCursor(%d): %v", to, err)
				return
			}
			if got < to {
				t.Errorf("CommitCursor(%d) = %d", to, got)
			}
		})
	}
	wg.Wait()
	if sub := getSub(t, s, "x", "s"); sub.Cursor != n-1 {
		t.Errorf("Cursor = %d, want %d", sub.Cursor, n-1)
	}
}

func testSeekCursor(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	sub := createSub(t, s, "a", meta.Sub{Name: "s", Cursor: 10, Pin: true})
	for _, to := range []uint64{20, 5, 5, 0, 1<<64 - 1, 3} {
		if err := s.SeekCursor(ctx, "a", "s", to); err != nil {
			t.Fatalf("SeekCursor(%d): %v", to, err)
		}
		sub.Cursor = to
		checkSub(t, s, "a", sub)
	}
	// CommitCursor goes on from where SeekCursor left the cursor.
	if got, err := s.CommitCursor(ctx, "a", "s", 2); err != nil || got != 3 {
		t.Fatalf("CommitCursor(2) after SeekCursor(3) = %d, %v, want 3", got, err)
	}
	if got, err := s.CommitCursor(ctx, "a", "s", 4); err != nil || got != 4 {
		t.Fatalf("CommitCursor(4) after SeekCursor(3) = %d, %v, want 4", got, err)
	}
}

// Subscriptions of different logs, with the same names, are independent,
// also when one log's name is a prefix of the other's.
func testSubsOfTwoLogs(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	create(t, s, "a/b", nil)
	a := createSub(t, s, "a", meta.Sub{Name: "s", Cursor: 1})
	ab := createSub(t, s, "a/b", meta.Sub{Name: "s", Cursor: 2, Pin: true})
	onlyA := createSub(t, s, "a", meta.Sub{Name: "b/s"})
	if _, err := s.CommitCursor(ctx, "a", "s", 10); err != nil {
		t.Fatalf("CommitCursor: %v", err)
	}
	a.Cursor = 10
	if err := s.SeekCursor(ctx, "a/b", "s", 0); err != nil {
		t.Fatalf("SeekCursor: %v", err)
	}
	ab.Cursor = 0
	checkSubs(t, s, "a", []string{"b/s", "s"}, map[string]meta.Sub{"s": a, "b/s": onlyA})
	checkSubs(t, s, "a/b", []string{"s"}, map[string]meta.Sub{"s": ab})

	if err := s.DeleteSub(ctx, "a/b", "s"); err != nil {
		t.Fatalf("DeleteSub: %v", err)
	}
	checkSub(t, s, "a", a)
	if err := s.DeleteLog(ctx, "a"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	if subs, err := s.ListSubs(ctx, "a/b"); err != nil || subs != nil {
		t.Errorf("ListSubs(a/b) = %+v, %v, want nil", subs, err)
	}
}

// DeleteLog deletes the log's subscriptions: a log created again under its
// name has none.
func testSubsDeletedWithLog(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	createSub(t, s, "x", meta.Sub{Name: "s", Cursor: 42, Pin: true})
	createSub(t, s, "x", meta.Sub{Name: "t"})
	if err := s.DeleteLog(ctx, "x"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	if _, err := s.ListSubs(ctx, "x"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("ListSubs of a deleted log: err = %v, want ErrNotFound", err)
	}
	create(t, s, "x", nil)
	if subs, err := s.ListSubs(ctx, "x"); err != nil || subs != nil {
		t.Fatalf("ListSubs of the re-created log = %+v, %v, want nil", subs, err)
	}
	checkSubErrs(t, s, "x", "s", meta.ErrSubNotFound)
	sub := createSub(t, s, "x", meta.Sub{Name: "s"})
	if sub.Cursor != 0 || sub.Pin {
		t.Fatalf("subscription of the re-created log = %+v, want Cursor 0, no Pin", sub)
	}
	checkSubs(t, s, "x", []string{"s"}, map[string]meta.Sub{"s": sub})
}

// A canceled context fails every subscription call with context.Canceled
// and changes nothing.
func testCanceledContextSubs(t *testing.T, s meta.Store) {
	create(t, s, "x", nil)
	sub := createSub(t, s, "x", meta.Sub{Name: "s", Cursor: 5})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", op, err)
		}
	}
	_, err := s.CreateSub(ctx, "x", meta.Sub{Name: "t"})
	check("CreateSub", err)
	_, err = s.Sub(ctx, "x", "s")
	check("Sub", err)
	_, err = s.ListSubs(ctx, "x")
	check("ListSubs", err)
	check("DeleteSub", s.DeleteSub(ctx, "x", "s"))
	_, err = s.CommitCursor(ctx, "x", "s", 10)
	check("CommitCursor", err)
	check("SeekCursor", s.SeekCursor(ctx, "x", "s", 1))
	checkSubs(t, s, "x", []string{"s"}, map[string]meta.Sub{"s": sub})
}

func createSub(t *testing.T, s meta.Store, log string, sub meta.Sub) meta.Sub {
	t.Helper()
	got, err := s.CreateSub(t.Context(), log, sub)
	if err != nil {
		t.Fatalf("CreateSub(%q, %q): %v", log, sub.Name, err)
	}
	return got
}

func getSub(t *testing.T, s meta.Store, log, name string) meta.Sub {
	t.Helper()
	sub, err := s.Sub(t.Context(), log, name)
	if err != nil {
		t.Fatalf("Sub(%q, %q): %v", log, name, err)
	}
	return sub
}

// checkSub checks that the stored subscription equals want.
func checkSub(t *testing.T, s meta.Store, log string, want meta.Sub) {
	t.Helper()
	if got := getSub(t, s, log, want.Name); !SubEqual(got, want) {
		t.Errorf("Sub(%q, %q) = %+v, want %+v", log, want.Name, got, want)
	}
}

// checkSubs checks that ListSubs returns the named subscriptions, in order,
// as byName has them.
func checkSubs(t *testing.T, s meta.Store, log string, names []string, byName map[string]meta.Sub) {
	t.Helper()
	subs, err := s.ListSubs(t.Context(), log)
	if err != nil {
		t.Fatalf("ListSubs(%q): %v", log, err)
	}
	var got []string
	for _, sub := range subs {
		got = append(got, sub.Name)
	}
	if !slices.Equal(got, names) {
		t.Fatalf("ListSubs(%q) = %q, want %q", log, got, names)
	}
	for _, sub := range subs {
		if !SubEqual(sub, byName[sub.Name]) {
			t.Errorf("ListSubs(%q): %+v, want %+v", log, sub, byName[sub.Name])
		}
	}
}

// SubEqual reports whether a and b describe the same subscription, with
// Created compared as an instant.
func SubEqual(a, b meta.Sub) bool {
	return a.Name == b.Name && a.Created.Equal(b.Created) && a.Cursor == b.Cursor && a.Pin == b.Pin
}
