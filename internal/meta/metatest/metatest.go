// Package metatest is the acceptance suite for meta.Store: every
// implementation runs it from its own tests and must pass it unchanged.
package metatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// Run runs the suite against stores made by open, one per subtest. open must
// return a store with no logs; Run closes it when the subtest ends, before any
// cleanup open registered on t runs, unless the subtest is one that tests
// Close itself.
func Run(t *testing.T, open func(t *testing.T) meta.Store) {
	t.Helper()
	type test struct {
		name string
		fn   func(t *testing.T, s meta.Store)
	}
	tests := []test{
		{"CreateGet", testCreateGet},
		{"CreateIgnoresAssignedFields", testCreateIgnoresAssignedFields},
		{"OptionsNotAliased", testOptionsNotAliased},
		{"IDs", testIDs},
		{"Exist", testExist},
		{"ConcurrentCreate", testConcurrentCreate},
		{"NotFound", testNotFound},
		{"ListLogs", testListLogs},
		{"ListLogsPage", testListLogsPage},
		{"CountLogs", testCountLogs},
		{"BumpEpoch", testBumpEpoch},
		{"ConcurrentBumpEpoch", testConcurrentBumpEpoch},
		{"AdvanceStart", testAdvanceStart},
		{"ConcurrentAdvanceStart", testConcurrentAdvanceStart},
		{"Recreate", testRecreate},
		{"CanceledContext", testCanceledContext},
		{"Installation", testInstallation},
		{"ConcurrentInstallation", testConcurrentInstallation},
		{"LogInstallation", testLogInstallation},

		{"Subs", testSubs},
		{"SubNotFound", testSubNotFound},
		{"ConcurrentCreateSub", testConcurrentCreateSub},
		{"CommitCursor", testCommitCursor},
		{"ConcurrentCommitCursor", testConcurrentCommitCursor},
		{"SeekCursor", testSeekCursor},
		{"SubsOfTwoLogs", testSubsOfTwoLogs},
		{"SubsDeletedWithLog", testSubsDeletedWithLog},
		{"CanceledContextSubs", testCanceledContextSubs},

		{"ClaimWriter", testClaimWriter},
		{"ClaimLostToNewerClaim", testClaimLostToNewerClaim},
		{"ClaimLostToBumpEpoch", testClaimLostToBumpEpoch},
		{"ConcurrentClaimWriter", testConcurrentClaimWriter},
		{"ClaimRelease", testClaimRelease},
		{"ClaimLostToDeleteLog", testClaimLostToDeleteLog},
		{"CanceledContextClaims", testCanceledContextClaims},
		{"ClaimSessions", testClaimSessions},
		{"SharedSessions", testSharedSessions},

		{"Segments", testSegments},
		{"SegmentRoundTrip", testSegmentRoundTrip},
		{"SegmentNotFound", testSegmentNotFound},
		{"CreateSegmentStaleEpoch", testCreateSegmentStaleEpoch},
		{"CreateSegmentExist", testCreateSegmentExist},
		{"SegmentArguments", testSegmentArguments},
		{"SealSegmentTwice", testSealSegmentTwice},
		{"ReplaceObjects", testReplaceObjects},
		{"SegmentLogicalBytes", testSegmentLogicalBytes},
		{"SegmentEnsemble", testSegmentEnsemble},
		{"DeleteSegment", testDeleteSegment},
		{"SegmentsDeletedWithLog", testSegmentsDeletedWithLog},
		{"SegmentsOfTwoLogs", testSegmentsOfTwoLogs},
		{"ConcurrentCreateSegment", testConcurrentCreateSegment},
		{"ConcurrentCreateSegmentSeqs", testConcurrentCreateSegmentSeqs},
		{"CreateSegmentRacesEpoch", testCreateSegmentRacesEpoch},
		{"ConcurrentSealSegment", testConcurrentSealSegment},
		{"ConcurrentReplaceObjects", testConcurrentReplaceObjects},
		{"CanceledContextSegments", testCanceledContextSegments},
		{"PendingSegment", testPendingSegment},
		{"PendingSegmentRules", testPendingSegmentRules},
		{"PendingSegmentDelete", testPendingSegmentDelete},
		{"PendingSegmentRacesSeal", testPendingSegmentRacesSeal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
	// These close the store themselves.
	for _, tc := range []test{
		{"ClaimLostToClose", testClaimLostToClose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

func testCreateGet(t *testing.T, s meta.Store) {
	ctx := t.Context()
	opts := []byte{0, 1, 2, 0x7f, 0x80, 0xfe, 0xff, '"', '\\', 0}
	before := time.Now()
	got := create(t, s, "orders", opts)
	after := time.Now()

	if got.Name != "orders" {
		t.Errorf("CreateLog Name = %q, want %q", got.Name, "orders")
	}
	if got.ID == 0 {
		t.Error("CreateLog ID = 0, want nonzero")
	}
	if !bytes.Equal(got.Options, opts) {
		t.Errorf("CreateLog Options = %x, want %x", got.Options, opts)
	}
	// Allow for a store whose clock is not ours (etcd) and for truncation.
	if got.Created.Before(before.Add(-time.Minute)) || got.Created.After(after.Add(time.Minute)) {
		t.Errorf("CreateLog Created = %v, want about %v", got.Created, before)
	}
	if got.Epoch != 0 || got.Start != 0 {
		t.Errorf("CreateLog Epoch, Start = %d, %d, want 0, 0", got.Epoch, got.Start)
	}

	l, err := s.Log(ctx, "orders")
	if err != nil {
		t.Fatalf("Log: %v", err)
	}
	checkEqual(t, "Log", l, got)

	for i, o := range [][]byte{nil, {}} {
		name := fmt.Sprintf("empty-%d", i)
		created := create(t, s, name, o)
		l, err := s.Log(ctx, name)
		if err != nil {
			t.Fatalf("Log(%q): %v", name, err)
		}
		if len(created.Options) != 0 || len(l.Options) != 0 {
			t.Errorf("Options %#v stored as %#v, read back as %#v, want empty", o, created.Options, l.Options)
		}
	}
}

// CreateLog uses only Name and Options; the store assigns the rest.
func testCreateIgnoresAssignedFields(t *testing.T, s meta.Store) {
	ctx := t.Context()
	in := meta.Log{
		Name:    "x",
		ID:      1 << 60,
		Created: time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC),
		Options: []byte("o"),
		Epoch:   5,
		Start:   7,
	}
	got, err := s.CreateLog(ctx, in)
	if err != nil {
		t.Fatalf("CreateLog: %v", err)
	}
	if got.ID == in.ID || got.Created.Equal(in.Created) || got.Epoch != 0 || got.Start != 0 {
		t.Errorf("CreateLog(%+v) = %+v, want a store-assigned ID and Created, Epoch 0, Start 0", in, got)
	}
	l, err := s.Log(ctx, "x")
	if err != nil {
		t.Fatalf("Log: %v", err)
	}
	checkEqual(t, "Log", l, got)
}

// Changing the caller's Options, before or after the call, does not change
// the stored log.
func testOptionsNotAliased(t *testing.T, s meta.Store) {
	ctx := t.Context()
	opts := []byte("abc")
	if _, err := s.CreateLog(ctx, meta.Log{Name: "x", Options: opts}); err != nil {
		t.Fatalf("CreateLog: %v", err)
	}
	opts[0] = 'X'
	l, err := s.Log(ctx, "x")
	if err != nil {
		t.Fatalf("Log: %v", err)
	}
	if string(l.Options) != "abc" {
		t.Fatalf("after changing the caller's slice, Options = %q, want %q", l.Options, "abc")
	}
	l.Options[0] = 'Y'
	l, err = s.Log(ctx, "x")
	if err != nil {
		t.Fatalf("Log: %v", err)
	}
	if string(l.Options) != "abc" {
		t.Fatalf("after changing a returned slice, Options = %q, want %q", l.Options, "abc")
	}
	logs, err := s.ListLogs(ctx, "")
	if err != nil {
		t.Fatalf("ListLogs: %v", err)
	}
	logs[0].Options[0] = 'Z'
	if l, _ = s.Log(ctx, "x"); string(l.Options) != "abc" {
		t.Fatalf("after changing a listed slice, Options = %q, want %q", l.Options, "abc")
	}
}

// IDs are nonzero, increase with each CreateLog and are never reused, not
// even after the log that had one is deleted.
func testIDs(t *testing.T, s meta.Store) {
	ctx := t.Context()
	var last uint64
	next := func(name string) uint64 {
		t.Helper()
		id := create(t, s, name, nil).ID
		if id <= last {
			t.Fatalf("CreateLog(%q) ID = %d, want > %d", name, id, last)
		}
		last = id
		return id
	}
	next("a")
	next("b")
	next("c")
	if err := s.DeleteLog(ctx, "c"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	next("d") // after deleting the newest log
	if err := s.DeleteLog(ctx, "a"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	next("a") // same name, new ID
	next("c")
}

func testExist(t *testing.T, s meta.Store) {
	ctx := t.Context()
	want := create(t, s, "a/b", []byte("first"))
	_, err := s.CreateLog(ctx, meta.Log{Name: "a/b", Options: []byte("second")})
	if !errors.Is(err, meta.ErrExist) {
		t.Fatalf("CreateLog of an existing name: err = %v, want ErrExist", err)
	}
	l, err := s.Log(ctx, "a/b")
	if err != nil {
		t.Fatalf("Log: %v", err)
	}
	checkEqual(t, "Log after a failed CreateLog", l, want)
}

// Of many concurrent CreateLogs of one name exactly one succeeds.
func testConcurrentCreate(t *testing.T, s meta.Store) {
	ctx := t.Context()
	const n = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []meta.Log
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			l, err := s.CreateLog(ctx, meta.Log{Name: "x", Options: []byte{byte(i)}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, l)
			case !errors.Is(err, meta.ErrExist):
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("CreateLog errors other than ErrExist: %v", errs)
	}
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent CreateLogs succeeded, want 1", len(won), n)
	}
	l, err := s.Log(ctx, "x")
	if err != nil {
		t.Fatalf("Log: %v", err)
	}
	checkEqual(t, "Log", l, won[0])
}

func testNotFound(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "gone", nil)
	create(t, s, "other", nil)
	if err := s.DeleteLog(ctx, "gone"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	for _, name := range []string{"missing", "gone", "othe", "other/"} {
		if _, err := s.Log(ctx, name); !errors.Is(err, meta.ErrNotFound) {
			t.Errorf("Log(%q): err = %v, want ErrNotFound", name, err)
		}
		if err := s.DeleteLog(ctx, name); !errors.Is(err, meta.ErrNotFound) {
			t.Errorf("DeleteLog(%q): err = %v, want ErrNotFound", name, err)
		}
		if _, err := s.BumpEpoch(ctx, name); !errors.Is(err, meta.ErrNotFound) {
			t.Errorf("BumpEpoch(%q): err = %v, want ErrNotFound", name, err)
		}
		if _, err := s.AdvanceStart(ctx, name, 1); !errors.Is(err, meta.ErrNotFound) {
			t.Errorf("AdvanceStart(%q): err = %v, want ErrNotFound", name, err)
		}
	}
	// None of that created anything.
	logs, err := s.ListLogs(ctx, "")
	if err != nil {
		t.Fatalf("ListLogs: %v", err)
	}
	if got := names(logs); !slices.Equal(got, []string{"other"}) {
		t.Errorf("ListLogs = %q, want [other]", got)
	}
}

func testListLogs(t *testing.T, s meta.Store) {
	ctx := t.Context()
	if logs, err := s.ListLogs(ctx, ""); err != nil || len(logs) != 0 {
		t.Fatalf("ListLogs of an empty store = %v, %v, want none", logs, err)
	}
	// Created out of order; ListLogs returns them by name.
	all := []string{"b", "a/c", "ab", "a", "a/b/c", "a/b", "a.b", "a0", "b/a"}
	byName := map[string]meta.Log{}
	for i, name := range all {
		byName[name] = create(t, s, name, []byte{byte(i)})
	}
	if _, err := s.BumpEpoch(ctx, "a/b"); err != nil {
		t.Fatalf("BumpEpoch: %v", err)
	}
	if _, err := s.AdvanceStart(ctx, "a/b", 4); err != nil {
		t.Fatalf("AdvanceStart: %v", err)
	}
	l := byName["a/b"]
	l.Epoch, l.Start = 1, 4
	byName["a/b"] = l

	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a", "a.b", "a/b", "a/b/c", "a/c", "a0", "ab", "b", "b/a"}},
		{"a", []string{"a", "a.b", "a/b", "a/b/c", "a/c", "a0", "ab"}},
		{"a/", []string{"a/b", "a/b/c", "a/c"}},
		{"a/b", []string{"a/b", "a/b/c"}},
		{"a/b/", []string{"a/b/c"}},
		{"ab", []string{"ab"}},
		{"b", []string{"b", "b/a"}},
		{"a/d", nil},
		{"c", nil},
		{"\xff", nil},
	} {
		logs, err := s.ListLogs(ctx, tc.prefix)
		if err != nil {
			t.Fatalf("ListLogs(%q): %v", tc.prefix, err)
		}
		if got := names(logs); !slices.Equal(got, tc.want) {
			t.Errorf("ListLogs(%q) = %q, want %q", tc.prefix, got, tc.want)
			continue
		}
		for _, l := range logs {
			checkEqual(t, fmt.Sprintf("ListLogs(%q)", tc.prefix), l, byName[l.Name])
		}
	}
}

func testBumpEpoch(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	create(t, s, "b", nil)
	for want := uint64(1); want <= 3; want++ {
		got, err := s.BumpEpoch(ctx, "a")
		if err != nil {
			t.Fatalf("BumpEpoch: %v", err)
		}
		if got != want {
			t.Fatalf("BumpEpoch = %d, want %d", got, want)
		}
	}
	if l := get(t, s, "a"); l.Epoch != 3 || l.Start != 0 {
		t.Errorf("after 3 BumpEpochs, Epoch, Start = %d, %d, want 3, 0", l.Epoch, l.Start)
	}
	if l := get(t, s, "b"); l.Epoch != 0 {
		t.Errorf("BumpEpoch of a changed another log's Epoch to %d", l.Epoch)
	}
}

// Concurrent BumpEpochs each get their own epoch, and none is lost.
func testConcurrentBumpEpoch(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	const goroutines, each = 16, 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[uint64]bool{}
	)
	for range goroutines {
		wg.Go(func() {
			for range each {
				e, err := s.BumpEpoch(ctx, "x")
				if err != nil {
					t.Errorf("BumpEpoch: %v", err)
					return
				}
				mu.Lock()
				if seen[e] {
					t.Errorf("BumpEpoch returned %d twice", e)
				}
				seen[e] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	const n = goroutines * each
	for e := uint64(1); e <= n; e++ {
		if !seen[e] {
			t.Errorf("no BumpEpoch returned %d", e)
		}
	}
	if l := get(t, s, "x"); l.Epoch != n {
		t.Errorf("after %d BumpEpochs, Epoch = %d", n, l.Epoch)
	}
}

func testAdvanceStart(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "a", nil)
	create(t, s, "b", nil)
	if _, err := s.BumpEpoch(ctx, "a"); err != nil {
		t.Fatalf("BumpEpoch: %v", err)
	}
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
		got, err := s.AdvanceStart(ctx, "a", step.to)
		if err != nil {
			t.Fatalf("AdvanceStart(%d): %v", step.to, err)
		}
		if got != step.want {
			t.Fatalf("AdvanceStart(%d) = %d, want %d", step.to, got, step.want)
		}
		if l := get(t, s, "a"); l.Start != step.want || l.Epoch != 1 {
			t.Fatalf("after AdvanceStart(%d), Start, Epoch = %d, %d, want %d, 1", step.to, l.Start, l.Epoch, step.want)
		}
	}
	if l := get(t, s, "b"); l.Start != 0 {
		t.Errorf("AdvanceStart of a changed another log's Start to %d", l.Start)
	}
}

// Concurrent AdvanceStarts leave the highest start, and none returns less
// than it asked for.
func testConcurrentAdvanceStart(t *testing.T, s meta.Store) {
	ctx := t.Context()
	create(t, s, "x", nil)
	const n = 32
	var wg sync.WaitGroup
	for i := range uint64(n) {
		to := (i * 7) % n // not in order
		wg.Go(func() {
			got, err := s.AdvanceStart(ctx, "x", to)
			if err != nil {
				t.Errorf("AdvanceStart(%d): %v", to, err)
				return
			}
			if got < to {
				t.Errorf("AdvanceStart(%d) = %d", to, got)
			}
		})
	}
	wg.Wait()
	if l := get(t, s, "x"); l.Start != n-1 {
		t.Errorf("Start = %d, want %d", l.Start, n-1)
	}
}

// A deleted and re-created log starts over: no epoch, no start, a new ID and
// the new options.
func testRecreate(t *testing.T, s meta.Store) {
	ctx := t.Context()
	old := create(t, s, "x", []byte("old"))
	if _, err := s.BumpEpoch(ctx, "x"); err != nil {
		t.Fatalf("BumpEpoch: %v", err)
	}
	if _, err := s.AdvanceStart(ctx, "x", 42); err != nil {
		t.Fatalf("AdvanceStart: %v", err)
	}
	if err := s.DeleteLog(ctx, "x"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	if logs, err := s.ListLogs(ctx, ""); err != nil || len(logs) != 0 {
		t.Fatalf("ListLogs after DeleteLog = %v, %v, want none", logs, err)
	}
	l := create(t, s, "x", []byte("new"))
	if l.ID == old.ID || l.Epoch != 0 || l.Start != 0 || string(l.Options) != "new" {
		t.Fatalf("re-created log = %+v, want a new ID, Epoch 0, Start 0, Options \"new\" (old %+v)", l, old)
	}
	checkEqual(t, "Log", get(t, s, "x"), l)
	if e, err := s.BumpEpoch(ctx, "x"); err != nil || e != 1 {
		t.Fatalf("BumpEpoch of the re-created log = %d, %v, want 1", e, err)
	}
}

// A canceled context fails every call with context.Canceled and changes
// nothing.
func testCanceledContext(t *testing.T, s meta.Store) {
	create(t, s, "x", nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.CreateLog(ctx, meta.Log{Name: "y"}); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateLog: err = %v, want context.Canceled", err)
	}
	if _, err := s.Log(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Log: err = %v, want context.Canceled", err)
	}
	if _, err := s.ListLogs(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("ListLogs: err = %v, want context.Canceled", err)
	}
	if err := s.DeleteLog(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("DeleteLog: err = %v, want context.Canceled", err)
	}
	if _, err := s.BumpEpoch(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("BumpEpoch: err = %v, want context.Canceled", err)
	}
	if _, err := s.AdvanceStart(ctx, "x", 5); !errors.Is(err, context.Canceled) {
		t.Errorf("AdvanceStart: err = %v, want context.Canceled", err)
	}
	logs, err := s.ListLogs(t.Context(), "")
	if err != nil {
		t.Fatalf("ListLogs: %v", err)
	}
	if len(logs) != 1 || logs[0].Name != "x" || logs[0].Epoch != 0 || logs[0].Start != 0 {
		t.Errorf("after canceled calls, ListLogs = %+v, want x unchanged", logs)
	}
}

func create(t *testing.T, s meta.Store, name string, opts []byte) meta.Log {
	t.Helper()
	l, err := s.CreateLog(t.Context(), meta.Log{Name: name, Options: opts})
	if err != nil {
		t.Fatalf("CreateLog(%q): %v", name, err)
	}
	return l
}

func get(t *testing.T, s meta.Store, name string) meta.Log {
	t.Helper()
	l, err := s.Log(t.Context(), name)
	if err != nil {
		t.Fatalf("Log(%q): %v", name, err)
	}
	return l
}

func names(logs []meta.Log) []string {
	var ns []string
	for _, l := range logs {
		ns = append(ns, l.Name)
	}
	return ns
}

// checkEqual reports whether got and want are the same log, comparing
// Options by content and Created as an instant.
func checkEqual(t *testing.T, what string, got, want meta.Log) {
	t.Helper()
	if !Equal(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

// Equal reports whether a and b describe the same log: equal fields, Options
// compared by content (nil equals empty) and Created as an instant.
func Equal(a, b meta.Log) bool {
	return a.Name == b.Name && a.ID == b.ID && a.Created.Equal(b.Created) &&
		bytes.Equal(a.Options, b.Options) && a.Epoch == b.Epoch && a.Start == b.Start &&
		a.Installation == b.Installation
}
