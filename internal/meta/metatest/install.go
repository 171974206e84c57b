package metatest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// Installation creates the installation once and returns it unchanged
// after; its ID can be an object-key segment, and no log ID can be it.
func testInstallation(t *testing.T, s meta.Store) {
	before := time.Now()
	in, err := s.Installation(t.Context())
	if err != nil {
		t.Fatalf("Installation: %v", err)
	}
	if len(in.ID) < 16 || strings.Trim(in.ID, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" || strings.Trim(in.ID, "0123456789") == "" {
		t.Errorf("Installation ID = %q, want 16 or more characters of A-Z and 2-7", in.ID)
	}
	if in.Created.Before(before.Add(-time.Minute)) || in.Created.After(time.Now().Add(time.Minute)) {
		t.Errorf("Installation Created = %v, want about %v", in.Created, before)
	}
	create(t, s, "x", nil) // logs do not change it
	again, err := s.Installation(t.Context())
	if err != nil {
		t.Fatalf("Installation again: %v", err)
	}
	if again.ID != in.ID || !again.Created.Equal(in.Created) {
		t.Errorf("Installation again = %+v, want %+v", again, in)
	}
}

// Concurrent first calls all return the same installation.
func testConcurrentInstallation(t *testing.T, s meta.Store) {
	const n = 8
	got := make([]meta.Installation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = s.Installation(t.Context()) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Installation %d: %v", i, errs[i])
		}
		if got[i].ID != got[0].ID || !got[i].Created.Equal(got[0].Created) {
			t.Errorf("Installation %d = %+v, want %+v like the first", i, got[i], got[0])
		}
	}
}

// CreateLog keeps the caller's Installation; a log created without one
// has none.
func testLogInstallation(t *testing.T, s meta.Store) {
	ctx := t.Context()
	l, err := s.CreateLog(ctx, meta.Log{Name: "new", Installation: "MB3HYQ6N2T5WJQKUXA7VCZ4L2E"})
	if err != nil {
		t.Fatalf("CreateLog: %v", err)
	}
	if l.Installation != "MB3HYQ6N2T5WJQKUXA7VCZ4L2E" {
		t.Errorf("CreateLog Installation = %q, want the caller's", l.Installation)
	}
	old := create(t, s, "old", nil)
	if old.Installation != "" {
		t.Errorf("CreateLog without Installation = %q, want empty", old.Installation)
	}
	if _, err := s.BumpEpoch(ctx, "new"); err != nil {
		t.Fatalf("BumpEpoch: %v", err)
	}
	if _, err := s.AdvanceStart(ctx, "new", 3); err != nil {
		t.Fatalf("AdvanceStart: %v", err)
	}
	if got := get(t, s, "new"); got.Installation != l.Installation {
		t.Errorf("after BumpEpoch and AdvanceStart, Installation = %q, want %q", got.Installation, l.Installation)
	}
	logs, err := s.ListLogs(ctx, "")
	if err != nil {
		t.Fatalf("ListLogs: %v", err)
	}
	for _, got := range logs {
		want := map[string]string{"new": l.Installation, "old": ""}[got.Name]
		if got.Installation != want {
			t.Errorf("ListLogs: %q Installation = %q, want %q", got.Name, got.Installation, want)
		}
	}
}
