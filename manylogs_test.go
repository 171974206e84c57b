package tern

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// waitIdle waits until l's engine has been closed for idleness.
func waitIdle(t *testing.T, c *Client, l *Log) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); embeddedOf(c).isOpen(logOf(l)); {
		if time.Now().After(deadline) {
			t.Fatal("the log's engine is still open long after its last use")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An idle log closes its engine, which holds its goroutines; its handle
// stays valid and opens it again, with its entries, at the next use.
func TestIdleLogClosesItsEngine(t *testing.T) {
	c, err := Open(t.Context(), Options{Dir: t.TempDir(), LogIdleTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := runtime.NumGoroutine()
	var logs []*Log
	for i := range 20 {
		l, w := createLog(t, c, fmt.Sprintf("l%d", i), LogOptions{})
		appendN(t, w, 0, 10)
		w.Close()
		logs = append(logs, l)
	}
	for _, l := range logs {
		waitIdle(t, c, l)
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Errorf("%d goroutines with 20 idle logs, %d before them", n, before)
	}

	// A reader holds the engine open however long it waits.
	l := logs[0]
	r, err := l.OpenReader(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if !embeddedOf(c).isOpen(logOf(l)) {
		t.Fatal("the engine of a log with an open reader was closed")
	}
	es, err := r.NextBatch(t.Context(), 100)
	if err != nil || len(es) != 10 {
		t.Fatalf("read %d entries, %v; want 10", len(es), err)
	}
	r.Close()
	waitIdle(t, c, l)

	// The handle works after the close: the entries are there, appends go on.
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 10, 5)
	w.Close()
	waitIdle(t, c, l)
	if got := readAll(t, l, 0); len(got) != 15 || string(got[14].Payload) != string(payload(14)) {
		t.Fatalf("after idle closes, read %d entries, want 15", len(got))
	}
}

// A subscriber holds its log's engine open; acknowledgements committed
// while it is open survive the engine's idle close.
func TestIdleLogKeepsSubscriptions(t *testing.T) {
	c, err := Open(t.Context(), Options{Dir: t.TempDir(), LogIdleTimeout: 20 * time.Millisecond, CommitInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, w := createLog(t, c, "s", LogOptions{})
	appendN(t, w, 0, 10)
	w.Close()
	if _, err := l.CreateSubscription(t.Context(), "sub", SubOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := l.Subscribe(t.Context(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	nextN(t, s, 4)
	if err := s.Ack(3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if !embeddedOf(c).isOpen(logOf(l)) {
		t.Fatal("the engine of a log with a subscriber was closed")
	}
	s.Close()
	waitIdle(t, c, l)
	info, err := l.Subscription(t.Context(), "sub")
	if err != nil || info.Cursor != 4 {
		t.Fatalf("subscription after the idle close: %+v, %v; want cursor 4", info, err)
	}
}

// A log that is idle and that no handle refers to is forgotten; opening it
// again finds its entries and subscriptions.
func TestIdleLogIsForgotten(t *testing.T) {
	c, err := Open(t.Context(), Options{Dir: t.TempDir(), LogIdleTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	func() {
		l, w := createLog(t, c, "f", LogOptions{})
		appendN(t, w, 0, 7)
		w.Close()
		if _, err := l.CreateSubscription(t.Context(), "s", SubOptions{From: 2}); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, c, l)
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		runtime.GC()
		embeddedOf(c).mu.Lock()
		n := len(embeddedOf(c).logs)
		embeddedOf(c).mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client still holds %d idle logs that nothing refers to", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l, err := c.OpenLog(t.Context(), "f")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l, 0); len(got) != 7 {
		t.Fatalf("read %d entries after the log was forgotten, want 7", len(got))
	}
	if info, err := l.Subscription(t.Context(), "s"); err != nil || info.Cursor != 2 {
		t.Fatalf("subscription after the log was forgotten: %+v, %v", info, err)
	}
}

func TestLogLimits(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(t.Context(), Options{Dir: dir, MaxLogs: 5, MaxLogsPerPrefix: 2})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string) error {
		_, err := c.CreateLog(t.Context(), name, LogOptions{})
		return err
	}
	for _, name := range []string{"a/x", "a/y"} {
		if err := create(name); err != nil {
			t.Fatal(err)
		}
	}
	err = create("a/z")
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "MaxLogsPerPrefix") || !strings.Contains(err.Error(), `"a/"`) {
		t.Fatalf("a third log under a/: %v, want ErrLimit naming MaxLogsPerPrefix and the prefix", err)
	}
	// A log's namespace is the part of its name up to the last '/'.
	for _, name := range []string{"a/b/x", "b/x", "top"} {
		if err := create(name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	err = create("c/x")
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "MaxLogs") || !strings.Contains(err.Error(), "--max-logs") {
		t.Fatalf("a sixth log: %v, want ErrLimit naming MaxLogs and --max-logs", err)
	}
	if err := c.DeleteLog(t.Context(), "a/x"); err != nil {
		t.Fatal(err)
	}
	if err := create("c/x"); err != nil {
		t.Fatalf("after a deletion: %v", err)
	}
	c.Close()

	// The limits are counted from the metadata: a new client sees the logs.
	c, err = Open(t.Context(), Options{Dir: dir, MaxLogs: 5, MaxLogsPerPrefix: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := create("d/x"); !errors.Is(err, ErrLimit) {
		t.Fatalf("a sixth log after a reopen: %v, want ErrLimit", err)
	}
}

func TestSubscriptionLimit(t *testing.T) {
	c, err := Open(t.Context(), Options{Dir: t.TempDir(), MaxSubscriptionsPerLog: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, _ := createLog(t, c, "l", LogOptions{})
	for _, name := range []string{"a", "b"} {
		if _, err := l.CreateSubscription(t.Context(), name, SubOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = l.CreateSubscription(t.Context(), "c", SubOptions{})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "MaxSubscriptionsPerLog") {
		t.Fatalf("a third subscription: %v, want ErrLimit naming MaxSubscriptionsPerLog", err)
	}
	if _, err := l.CreateSubscription(t.Context(), "a", SubOptions{}); !errors.Is(err, ErrSubExist) {
		t.Fatalf("an existing name at the limit: %v, want ErrSubExist", err)
	}
	if err := l.DeleteSubscription(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateSubscription(t.Context(), "c", SubOptions{}); err != nil {
		t.Fatalf("after a deletion: %v", err)
	}
}

// ListLogsPage pages through the metadata, opening no log; the logs that
// are open are described in full, the local ones closed cleanly by their
// files.
func TestListLogsPage(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("p/%02d", i)
		_, w := createLog(t, c, name, LogOptions{})
		appendN(t, w, 0, 3)
		w.Close()
		want = append(want, name)
	}
	createLog(t, c, "q", LogOptions{})
	c.Close()

	c = openClient(t, dir)
	open, err := c.OpenLog(t.Context(), "p/07")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		page, err := c.ListLogsPage(t.Context(), "p/", token, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Logs) > 10 || pages > 3 {
			t.Fatalf("page %d: %d logs, token %q", pages, len(page.Logs), page.NextPageToken)
		}
		for _, info := range page.Logs {
			got = append(got, info.Name)
			switch {
			case info.Name == open.Name() && (info.ExtentUnknown || info.End != 3 || info.Bytes == 0):
				t.Errorf("the open log is listed as %+v, want its extent", info)
			case info.Name != open.Name() && (info.ExtentUnknown || info.End != 3 || info.Bytes == 0):
				t.Errorf("a log closed cleanly is listed as %+v, want its extent from its files", info)
			}
		}
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages of p/ = %q, want %q", got, want)
	}
	all, err := c.ListLogs(t.Context(), "")
	if err != nil || len(all) != 26 {
		t.Fatalf("ListLogs: %d logs, %v; want 26", len(all), err)
	}
	if n := len(embeddedOf(c).openLogs()); n != 1 {
		t.Fatalf("%d logs open after listing, want only the one opened", n)
	}
	if _, err := c.ListLogsPage(t.Context(), "", "", -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a negative page size: %v, want ErrInvalid", err)
	}
}

// The retention loop has work only on the logs that are open, or have
// retention set, and opens no other.
func TestRetentionOpensOnlyLogsWithWork(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	createLog(t, c, "plain", LogOptions{})
	createLog(t, c, "kept", LogOptions{RetentionEntries: 10})
	createLog(t, c, "used", LogOptions{})
	c.Close()

	c = openClient(t, dir)
	if _, err := c.OpenLog(t.Context(), "used"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range embeddedOf(c).retainable() {
		got = append(got, l.name)
	}
	slices.Sort(got)
	if want := []string{"kept", "used"}; !slices.Equal(got, want) {
		t.Fatalf("the retention loop works on %q, want %q", got, want)
	}
	embeddedOf(c).mu.Lock()
	_, known := embeddedOf(c).logs["plain"]
	embeddedOf(c).mu.Unlock()
	if known {
		t.Fatal("the retention loop opened a log with no retention")
	}
}

// The retention loop opens an object log that has segments to compact,
// decided from its segment records, and leaves it, and an object log with
// none, closed once there is nothing to compact.
func TestRetentionCompactsIdleObjectLogs(t *testing.T) {
	dir, store := t.TempDir(), "dir://"+t.TempDir()
	c, err := Open(t.Context(), Options{Dir: dir, Storage: StorageOptions{URL: store}})
	if err != nil {
		t.Fatal(err)
	}
	_, w := createLog(t, c, "o", LogOptions{Mode: ModeObject, FlushBytes: 1})
	appendN(t, w, 0, 5) // five objects in one segment
	w.Close()
	createLog(t, c, "idle", LogOptions{Mode: ModeObject})
	c.Close()

	c, err = Open(t.Context(), Options{Dir: dir, Storage: StorageOptions{URL: store}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := func() []string {
		var got []string
		for _, l := range embeddedOf(c).retainable() {
			got = append(got, l.name)
		}
		return got
	}
	if got := names(); !slices.Equal(got, []string{"o"}) {
		t.Fatalf("the retention loop works on %q, want [o]", got)
	}
	l, err := c.OpenLog(t.Context(), "o")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseLog("o"); err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("after compaction, the retention loop works on %q, want none", got)
	}
}

// Calls, writers and readers race with idle closes of a log's engine (a
// timeout of 1ms closes it between almost any two uses); every entry
// acknowledged is read back.
func TestIdleCloseRacesWithUse(t *testing.T) {
	c, err := Open(t.Context(), Options{Dir: t.TempDir(), LogIdleTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 4 {
		createLog(t, c, fmt.Sprintf("r%d", i), LogOptions{})
	}
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			errs <- func() error {
				name := fmt.Sprintf("r%d", i)
				for round := range 30 {
					l, err := c.OpenLog(t.Context(), name)
					if err != nil {
						return err
					}
					w, err := l.OpenWriter(t.Context())
					if err != nil {
						return err
					}
					for j := range 3 {
						off, err := w.Append(t.Context(), Entry{Payload: payload(3*round + j)})
						if err != nil {
							return err
						}
						if int(off) != 3*round+j {
							return fmt.Errorf("%s: offset %d, want %d", name, off, 3*round+j)
						}
					}
					w.Close()
					if _, err := l.Info(t.Context()); err != nil {
						return err
					}
					time.Sleep(time.Duration(round%3) * time.Millisecond)
				}
				return nil
			}()
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		l, err := c.OpenLog(t.Context(), fmt.Sprintf("r%d", i))
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, l, 0)
		if len(got) != 90 {
			t.Fatalf("r%d: read %d entries, want 90", i, len(got))
		}
		for j, e := range got {
			if string(e.Payload) != string(payload(j)) {
				t.Fatalf("r%d: entry %d is %q", i, j, e.Payload)
			}
		}
	}
}
