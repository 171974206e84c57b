package tern_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// countFiles counts the regular files under dir.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return n
}

// TestObjectLogDeleted: deleting an object log deletes its objects, and a
// deletion interrupted after the metadata went is finished at the next Open
// by a client with the store, not by one without.
func TestObjectLogDeleted(t *testing.T) {
	data, store := t.TempDir(), t.TempDir()
	opts := tern.Options{Dir: data, Storage: tern.StorageOptions{URL: "dir://" + store}}
	c, err := tern.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	for _, name := range []string{"a", "b"} {
		_, w := mustCreate(t, c, name, tern.LogOptions{Mode: tern.ModeObject})
		mustAppend(t, w, "x")
		w.Close()
	}
	if n := countFiles(t, store); n < 2 {
		t.Fatalf("%d objects after two appends", n)
	}
	if err := c.DeleteLog(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(store, installationOf(t, store)) // the logs' keys are under it
	if n := countFiles(t, filepath.Join(keys, "1")); n != 0 {
		t.Fatalf("%d objects of the deleted log are left", n)
	}
	if n := countFiles(t, filepath.Join(keys, "2")); n == 0 {
		t.Fatal("deleting a removed the objects of b")
	}
	c.Close()

	// A deletion interrupted after the metadata: the marks and the objects
	// of a log the metadata no longer has, from before installation IDs
	// (an empty OBJECTS mark, keys under the log's ID alone).
	dir := filepath.Join(data, "logs", "9")
	os.MkdirAll(dir, 0o755)
	for _, mark := range []string{"OBJECTS", "DELETED"} {
		os.WriteFile(filepath.Join(dir, mark), nil, 0o644)
	}
	os.MkdirAll(filepath.Join(store, "9", "00000001"), 0o755)
	os.WriteFile(filepath.Join(store, "9", "00000001", "00000000"), []byte("an orphan"), 0o644)

	bare, err := tern.Open(t.Context(), tern.Options{Dir: data})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("a client without the store removed the marks: %v", err)
	}
	if err := bare.DeleteLog(t.Context(), "b"); !errors.Is(err, tern.ErrInvalid) {
		t.Fatalf("delete of an object log without the store: %v", err)
	}
	if _, err := bare.CreateLog(t.Context(), "c", tern.LogOptions{Mode: tern.ModeObject}); !errors.Is(err, tern.ErrInvalid) {
		t.Fatalf("create of an object log without a store: %v", err)
	}
	if _, err := bare.OpenLog(t.Context(), "c"); !errors.Is(err, tern.ErrNotFound) {
		t.Fatalf("the refused create left the log behind: %v", err)
	}
	bare.Close()

	c, err = tern.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := countFiles(t, filepath.Join(store, "9")); n != 0 {
		t.Fatalf("%d orphan objects left after Open", n)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the deleted log's directory is still there: %v", err)
	}
	if _, err := c.OpenLog(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
}

// TestObjectLogCompact: Info counts an object log's objects, and Compact
// rewrites the sealed segments' many uploads into a few objects, the
// entries unchanged.
func TestObjectLogCompact(t *testing.T) {
	c, err := tern.Open(t.Context(), tern.Options{Dir: t.TempDir(), Storage: tern.StorageOptions{URL: "dir://" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, w := mustCreate(t, c, "c", tern.LogOptions{Mode: tern.ModeObject, SegmentBytes: 4096, FlushInterval: time.Millisecond})
	for i := range 200 {
		mustAppend(t, w, fmt.Sprintf("entry-%03d", i)) // one upload each
	}
	before, err := l.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if before.Objects < 200 || before.Segments < 2 {
		t.Fatalf("after 200 appends one at a time: %d objects in %d segments", before.Objects, before.Segments)
	}
	if err := l.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	after, err := l.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The sealed segments (about 68 uploads each) become one object each;
	// the open one is left.
	if after.Objects > before.Objects-100 || after.Segments != before.Segments || after.Bytes != before.Bytes {
		t.Fatalf("compaction took %+v to %+v", before, after)
	}
	r := mustReader(t, l, 0)
	for i := range 200 {
		e := mustNext(t, r)
		if want := fmt.Sprintf("entry-%03d", i); string(e.Payload) != want || e.Offset != tern.Offset(i) {
			t.Fatalf("after compaction offset %d holds %q at %d, want %q", i, e.Payload, e.Offset, want)
		}
	}
}

// TestObjectLogCollectedUnopened: the client's retention pass compacts and
// trims an object log that nothing has opened since the client started.
func TestObjectLogCollectedUnopened(t *testing.T) {
	data, store := t.TempDir(), t.TempDir()
	opts := tern.Options{Dir: data, Storage: tern.StorageOptions{URL: "dir://" + store}}
	c, err := tern.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	_, w := mustCreate(t, c, "old", tern.LogOptions{Mode: tern.ModeObject, SegmentBytes: 4096, FlushInterval: time.Millisecond, RetentionEntries: 10})
	for i := range 200 {
		mustAppend(t, w, fmt.Sprintf("entry-%03d", i))
	}
	w.Close()
	c.Close()
	before := countFiles(t, store)

	opts.RetentionInterval = 10 * time.Millisecond
	c, err = tern.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); countFiles(t, store) > before/2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d objects, %d before: retention did not run on the unopened log", countFiles(t, store), before)
		}
	}
}

// installationOf is the installation that claimed the dir:// store, under
// whose ID its logs' objects are.
func installationOf(t *testing.T, store string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store, "tern-installation"))
	if err != nil {
		t.Fatal(err)
	}
	var claim struct{ Installation string }
	if err := json.Unmarshal(data, &claim); err != nil || claim.Installation == "" {
		t.Fatalf("claim %s: %v", data, err)
	}
	return claim.Installation
}
