package tern

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

func nextN(t *testing.T, s *Subscriber, n int) []Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []Entry
	for len(out) < n {
		es, err := s.NextBatch(ctx, n-len(out))
		if err != nil {
			t.Fatalf("NextBatch after %d entries: %v", len(out), err)
		}
		out = append(out, es...)
	}
	return out
}

// Acknowledged cursors survive closing the client; what was delivered but
// not acknowledged is delivered again.
func TestSubscriptionResumesAfterReopen(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	l, w := createLog(t, c, "s", LogOptions{})
	appendN(t, w, 0, 10)
	if _, err := l.CreateSubscription(t.Context(), "sub", SubOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := l.Subscribe(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	es := nextN(t, s, 6)
	if err := s.Ack(es[3].Offset); err != nil { // 0..3 processed, 4 and 5 not
		t.Fatal(err)
	}
	if err := s.Ack(2); err != nil { // lower: changes nothing
		t.Fatal(err)
	}
	if err := s.Ack(8); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Ack of an undelivered offset: %v, want ErrOutOfRange", err)
	}
	c.Close() // commits the cursor

	c = openClient(t, dir)
	l, err = c.OpenLog(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Subscription(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	if info.Cursor != 4 || info.Lag != 6 {
		t.Fatalf("after reopen: %+v, want cursor 4, lag 6", info)
	}
	s, err = l.Subscribe(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if e := nextN(t, s, 1)[0]; e.Offset != 4 {
		t.Fatalf("resumed at %d, want 4", e.Offset)
	}
}

// Acknowledgements are committed within CommitInterval without Close, so a
// crash loses at most that much.
func TestSubscriptionCommitsInBackground(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(t.Context(), Options{Dir: dir, CommitInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, w := createLog(t, c, "s", LogOptions{})
	appendN(t, w, 0, 5)
	if _, err := l.CreateSubscription(t.Context(), "sub", SubOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := l.Subscribe(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	nextN(t, s, 5)
	if err := s.Ack(4); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		sub, err := embeddedOf(c).meta.Sub(t.Context(), "s", "sub")
		if err != nil {
			t.Fatal(err)
		}
		if sub.Cursor == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored cursor still %d, want 5", sub.Cursor)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A new subscriber takes over; the old one fails with ErrClosed and its
// acknowledgements no longer count.
func TestSubscriptionTakeover(t *testing.T) {
	c := openClient(t, t.TempDir())
	l, w := createLog(t, c, "s", LogOptions{})
	appendN(t, w, 0, 5)
	if _, err := l.CreateSubscription(t.Context(), "sub", SubOptions{}); err != nil {
		t.Fatal(err)
	}
	old, err := l.Subscribe(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	nextN(t, old, 5)
	if err := old.Ack(1); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := old.Next(t.Context()) // waits at the tail
		waiting <- err
	}()
	nw, err := l.Subscribe(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Fatalf("the superseded subscriber's Next: %v, want ErrClosed", err)
	}
	if err := old.Ack(3); !errors.Is(err, ErrClosed) {
		t.Fatalf("the superseded subscriber's Ack: %v, want ErrClosed", err)
	}
	if e := nextN(t, nw, 1)[0]; e.Offset != 2 {
		t.Fatalf("the new subscriber starts at %d, want 2", e.Offset)
	}
}

// Seek moves the cursor both ways; the active subscriber follows, and its
// acknowledgements of entries delivered before the Seek are ignored.
func TestSubscriptionSeek(t *testing.T) {
	c := openClient(t, t.TempDir())
	l, w := createLog(t, c, "s", LogOptions{})
	appendN(t, w, 0, 10)
	if _, err := l.CreateSubscription(t.Context(), "sub", SubOptions{From: 2}); err != nil {
		t.Fatal(err)
	}
	s, err := l.Subscribe(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if es := nextN(t, s, 6); es[0].Offset != 2 || es[5].Offset != 7 {
		t.Fatalf("read %d..%d, want 2..7", es[0].Offset, es[5].Offset)
	}
	if err := l.Seek(t.Context(), "sub", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(7); err != nil { // from before the Seek: ignored
		t.Fatal(err)
	}
	if info, _ := l.Subscription(t.Context(), "sub"); info.Cursor != 1 {
		t.Fatalf("cursor after Seek and a stale Ack = %d, want 1", info.Cursor)
	}
	if e := nextN(t, s, 1)[0]; e.Offset != 1 {
		t.Fatalf("after Seek(1) the subscriber read %d", e.Offset)
	}
	if err := l.Seek(t.Context(), "sub", 11); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Seek beyond the end: %v, want ErrOutOfRange", err)
	}
	if err := l.Seek(t.Context(), "nope", 1); !errors.Is(err, ErrSubNotFound) {
		t.Fatalf("Seek of a missing subscription: %v, want ErrSubNotFound", err)
	}
}

// A pinned subscription holds retention back at its cursor; an unpinned one
// does not; Truncate is not held back.
func TestSubscriptionPinsRetention(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	l, w := createLog(t, c, "s", LogOptions{SegmentBytes: 4096, RetentionEntries: 10})
	for _, sub := range []struct {
		name string
		pin  bool
	}{{"pinned", true}, {"loose", false}} {
		if _, err := l.CreateSubscription(t.Context(), sub.name, SubOptions{Pin: sub.pin}); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, w, 0, 1000)
	if err := applyRetention(t, logOf(l)); err != nil {
		t.Fatal(err)
	}
	if info, _ := l.Info(t.Context()); info.Start != 0 {
		t.Fatalf("retention deleted entries a pinned subscription has not consumed: start %d", info.Start)
	}

	s, err := l.Subscribe(t.Context(), "pinned")
	if err != nil {
		t.Fatal(err)
	}
	nextN(t, s, 500)
	if err := s.Ack(499); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := applyRetention(t, logOf(l)); err != nil {
		t.Fatal(err)
	}
	info, _ := l.Info(t.Context())
	if info.Start == 0 || info.Start > 500 {
		t.Fatalf("after the pinned subscription consumed 500 entries, start = %d, want in (0, 500]", info.Start)
	}

	if err := l.Truncate(t.Context(), 900); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Subscribe(t.Context(), "loose"); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Subscribe below the start: %v, want ErrTruncated", err)
	}
}

func TestSubscriptionErrors(t *testing.T) {
	c := openClient(t, t.TempDir())
	l, _ := createLog(t, c, "s", LogOptions{})
	for _, bad := range []string{".", ".."} {
		if _, err := l.CreateSubscription(t.Context(), bad, SubOptions{}); !errors.Is(err, ErrInvalidName) {
			t.Errorf("CreateSubscription(%q): %v, want ErrInvalidName", bad, err)
		}
	}
	if _, err := l.CreateSubscription(t.Context(), "a/b", SubOptions{}); !errors.Is(err, ErrInvalidName) {
		t.Errorf("invalid name: %v", err)
	}
	if _, err := l.CreateSubscription(t.Context(), "x", SubOptions{From: 1}); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("from beyond the end: %v", err)
	}
	if _, err := l.CreateSubscription(t.Context(), "x", SubOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateSubscription(t.Context(), "x", SubOptions{}); !errors.Is(err, ErrSubExist) {
		t.Errorf("duplicate: %v", err)
	}
	s, err := l.Subscribe(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteSubscription(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after the subscription was deleted: %v, want ErrClosed", err)
	}
	if _, err := l.Subscription(t.Context(), "x"); !errors.Is(err, ErrSubNotFound) {
		t.Errorf("Subscription after delete: %v", err)
	}
	if err := l.DeleteSubscription(t.Context(), "x"); !errors.Is(err, ErrSubNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if subs, err := l.Subscriptions(t.Context()); err != nil || len(subs) != 0 {
		t.Errorf("Subscriptions = %v, %v, want none", subs, err)
	}
}

// A Seek wakes a subscriber that waits at the tail, which goes on from the
// new cursor.
func TestSeekWakesWaitingSubscriber(t *testing.T) {
	c := openClient(t, t.TempDir())
	l, w := createLog(t, c, "s", LogOptions{})
	appendN(t, w, 0, 3)
	if _, err := l.CreateSubscription(t.Context(), "sub", SubOptions{FromEnd: true}); err != nil {
		t.Fatal(err)
	}
	s, err := l.Subscribe(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := make(chan Entry, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		e, err := s.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	time.Sleep(50 * time.Millisecond) // let it wait at the tail
	if err := l.Seek(t.Context(), "sub", 1); err != nil {
		t.Fatal(err)
	}
	if e := <-got; e.Offset != 1 {
		t.Fatalf("after Seek(1) the waiting subscriber got offset %d", e.Offset)
	}
}

// slowCommits holds every CommitCursor until release is closed, after
// saying so on entered.
type slowCommits struct {
	meta.Store
	entered chan struct{}
	release chan struct{}
}

func (s *slowCommits) CommitCursor(ctx context.Context, log, sub string, cursor uint64) (uint64, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.CommitCursor(ctx, log, sub, cursor)
}

// A commit of the acknowledged cursor that is in flight when a Seek moves
// the cursor back must not land after it: the Seek's cursor is what stays.
func TestSeekDuringCommit(t *testing.T) {
	c, err := Open(t.Context(), Options{Dir: t.TempDir(), CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, w := createLog(t, c, "s", LogOptions{})
	appendN(t, w, 0, 10)
	if _, err := l.CreateSubscription(t.Context(), "sub", SubOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := l.Subscribe(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	es := nextN(t, s, 10)
	if err := s.Ack(es[9].Offset); err != nil {
		t.Fatal(err)
	}
	slow := &slowCommits{Store: embeddedOf(c).meta, entered: make(chan struct{}), release: make(chan struct{})}
	embeddedOf(c).meta = slow
	logOf(l).subsMu.Lock()
	st := logOf(l).subs["sub"]
	logOf(l).subsMu.Unlock()
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		logOf(l).commitSub(st)
	}()
	<-slow.entered
	seeked := make(chan error, 1)
	go func() { seeked <- l.Seek(t.Context(), "sub", 2) }()
	// Let the Seek finish first if it can; then the commit goes on.
	select {
	case err := <-seeked:
		seeked <- err
	case <-time.After(200 * time.Millisecond):
	}
	close(slow.release)
	<-committed
	if err := <-seeked; err != nil {
		t.Fatal(err)
	}
	info, err := l.Subscription(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	if info.Cursor != 2 {
		t.Fatalf("after a Seek to 2 during a commit of 10: cursor %d, want 2", info.Cursor)
	}
	m, err := slow.Store.Sub(t.Context(), "s", "sub")
	if err != nil {
		t.Fatal(err)
	}
	if m.Cursor != 2 {
		t.Fatalf("after a Seek to 2 during a commit of 10: stored cursor %d, want 2", m.Cursor)
	}
}
