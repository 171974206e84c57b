package tern

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// crashWorkload creates a log, appends, fences, rolls segments,
// truncates (the dropped segments' files are then written over by new
// segments), closes the log and opens it again for another writer, and
// creates, appends to and deletes a second log on fs; it
// records what was attempted and what was acknowledged. It stops at the first
// error, which is what a crash looks like from inside.
type crashWorkload struct {
	acked     map[Offset]string // acknowledged offset -> payload
	batchOf   map[string]int    // payload -> id of the AppendBatch it was in
	batchSize map[int]int
	truncated Offset // the truncation point, if Truncate returned

	goneAcked map[Offset]string // acknowledged in the deleted log
	deleting  bool              // DeleteLog of the second log was called
	deleted   bool              // and returned
}

// goneName is the log crashWorkload deletes.
const goneName = "gone"

// runGone creates goneName, appends to it, and returns a function that
// deletes it.
func (cw *crashWorkload) runGone(t *testing.T, c *Client) (deleteLog func() bool) {
	cw.goneAcked = map[Offset]string{}
	l, err := c.CreateLog(t.Context(), goneName, LogOptions{SegmentBytes: 4096})
	if err != nil {
		return nil
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		return nil
	}
	for i := range 8 {
		p := fmt.Sprintf("g%d-%s", i, strings.Repeat("y", 700))
		off, err := w.Append(t.Context(), Entry{Payload: []byte(p)})
		if err != nil {
			return nil
		}
		cw.goneAcked[off] = p
	}
	return func() bool {
		cw.deleting = true
		if c.DeleteLog(t.Context(), goneName) != nil {
			return false
		}
		cw.deleted = true
		return true
	}
}

func (cw *crashWorkload) run(t *testing.T, dir string, fs vfs.FS) {
	cw.acked, cw.batchOf, cw.batchSize = map[Offset]string{}, map[string]int{}, map[int]int{}
	c, err := Open(t.Context(), Options{Dir: dir, fs: fs})
	if err != nil {
		return
	}
	defer c.Close()
	deleteGone := cw.runGone(t, c)
	if deleteGone == nil {
		return
	}
	l, err := c.CreateLog(t.Context(), "crash", LogOptions{SegmentBytes: 4096})
	if err != nil {
		return
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		return
	}
	batch := 0
	appendN := func(i, n int) bool {
		batch++
		es := make([]Entry, n)
		for j := range es {
			p := fmt.Sprintf("p%d.%d-%s", i, j, strings.Repeat("x", (i*131+j*17)%900))
			es[j] = Entry{Payload: []byte(p)}
			cw.batchOf[p] = batch
		}
		cw.batchSize[batch] = n
		off, err := w.AppendBatch(t.Context(), es)
		if err != nil {
			return false
		}
		for j, e := range es {
			cw.acked[off+Offset(j)] = string(e.Payload)
		}
		return true
	}
	for i := range 16 {
		if !appendN(i, 1+(i%4)*(i%3)) {
			return
		}
	}
	if w, err = l.OpenWriter(t.Context()); err != nil {
		return
	}
	for i := 16; i < 22; i++ {
		if !appendN(i, 1+i%3) {
			return
		}
	}
	if err := l.Truncate(t.Context(), 20); err != nil {
		return
	}
	cw.truncated = 20
	if !deleteGone() {
		return
	}
	for i := 22; i < 26; i++ {
		if !appendN(i, 2) {
			return
		}
	}
	// Closed cleanly, the log's next writer goes on in its newest segment
	// (segment.Reopen) instead of a new file.
	if err := c.CloseLog("crash"); err != nil {
		return
	}
	if l, err = c.OpenLog(t.Context(), "crash"); err != nil {
		return
	}
	if w, err = l.OpenWriter(t.Context()); err != nil {
		return
	}
	for i := 26; i < 29; i++ {
		if !appendN(i, 1+i%2) {
			return
		}
	}
}

// check reopens the log after a crash and verifies it: it opens without
// error, every acknowledged entry at or above the start is there with its
// bytes, offsets are dense, every entry read was attempted, no batch is
// partly there, and the log takes new appends.
func (cw *crashWorkload) check(t *testing.T, dir string, fs vfs.FS) {
	t.Helper()
	c, err := Open(t.Context(), Options{Dir: dir, fs: fs})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer c.Close()
	cw.checkGone(t, c, dir, fs)
	l, err := c.OpenLog(t.Context(), "crash")
	if errors.Is(err, ErrNotFound) && len(cw.acked) == 0 {
		return // the crash came before the log was created
	}
	if err != nil {
		t.Fatalf("open log after crash: %v", err)
	}
	info, _ := l.Info(t.Context())
	if info.Start < cw.truncated {
		t.Fatalf("start %d is below the acknowledged truncation point %d", info.Start, cw.truncated)
	}
	got := map[Offset]string{}
	perBatch := map[int][]Offset{}
	for _, e := range readAll(t, l, info.Start) {
		p := string(e.Payload)
		b, ok := cw.batchOf[p]
		if !ok {
			t.Fatalf("offset %d holds %.20q, which was never appended", e.Offset, p)
		}
		got[e.Offset] = p
		perBatch[b] = append(perBatch[b], e.Offset)
	}
	for off, p := range cw.acked {
		if off >= info.Start && got[off] != p {
			t.Fatalf("acknowledged offset %d: read %.20q, want %.20q", off, got[off], p)
		}
	}
	for b, offs := range perBatch {
		if offs[0] > info.Start && len(offs) != cw.batchSize[b] {
			t.Fatalf("batch %d is torn: %d of its %d entries survived", b, len(offs), cw.batchSize[b])
		}
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	off, err := w.Append(t.Context(), Entry{Payload: []byte("after")})
	if err != nil || off != info.End {
		t.Fatalf("append after recovery: offset %d, %v; want offset %d", off, err, info.End)
	}
}

// checkGone checks the deleted log after a crash: it is gone if DeleteLog
// returned, and otherwise gone only if the crash came during its creation or
// deletion, and if it is there it holds every entry acknowledged in it. Once
// Open returns, no directory of a deleted log is left.
func (cw *crashWorkload) checkGone(t *testing.T, c *Client, dir string, fs vfs.FS) {
	t.Helper()
	logs, err := c.ListLogsMeta(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, m := range logs {
		live[strconv.FormatUint(m.ID, 10)] = true
	}
	names, err := fs.List(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !live[name] {
			t.Fatalf("logs/%s is left over from a deleted log", name)
		}
	}
	l, err := c.OpenLog(t.Context(), goneName)
	switch {
	case errors.Is(err, ErrNotFound):
		if len(cw.goneAcked) > 0 && !cw.deleting {
			t.Fatalf("log %q is gone, but it was never deleted", goneName)
		}
		return
	case err != nil:
		t.Fatalf("open log %q after crash: %v", goneName, err)
	case cw.deleted:
		t.Fatalf("log %q is back after DeleteLog returned", goneName)
	}
	info, err := l.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[Offset]string{}
	for _, e := range readAll(t, l, info.Start) {
		got[e.Offset] = string(e.Payload)
	}
	for off, p := range cw.goneAcked {
		if got[off] != p {
			t.Fatalf("log %q, acknowledged offset %d: read %.20q, want %.20q", goneName, off, got[off], p)
		}
	}
}

// TestCrashAtEveryPoint cuts the power after every mutating filesystem
// operation of a workload, several times with different survivors of the
// unsynced writes, and checks the recovered log.
func TestCrashAtEveryPoint(t *testing.T) {
	var ref crashWorkload
	mem, refDir := vfs.NewMem(), t.TempDir()
	ref.run(t, refDir, mem)
	total := mem.Ops()
	if len(ref.acked) < 40 || total < 50 {
		t.Fatalf("reference run acknowledged %d entries in %d operations; the workload is broken", len(ref.acked), total)
	}
	// The workload must roll segments, delete one by truncation and delete
	// a log: each creates or removes a directory entry.
	logs, err := mem.List(filepath.Join(refDir, "logs"))
	if err != nil || len(logs) != 1 || !ref.deleted {
		t.Fatalf("reference run left logs %q (%v), deleted %q: %t; want one log left", logs, err, goneName, ref.deleted)
	}
	segs, err := mem.List(filepath.Join(refDir, "logs", logs[0]))
	if err != nil || len(segs) < 2 || slices.Contains(segs, segment.FileName(0)) {
		t.Fatalf("reference run left segments %q (%v); want two or more, and the first deleted by the truncation", segs, err)
	}
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	for n := 0; n <= total; n++ {
		for seed := range seeds {
			dir := t.TempDir()
			mem := vfs.NewMem()
			mem.CrashAfter(n)
			var cw crashWorkload
			cw.run(t, dir, mem)
			after := mem.Crash(rand.New(rand.NewPCG(uint64(n), uint64(seed))))
			t.Run(fmt.Sprintf("op%d/seed%d", n, seed), func(t *testing.T) { cw.check(t, dir, after) })
			if t.Failed() {
				return
			}
		}
	}
}

// TestCrashKeepsDeleteMarks cuts the power after DeleteLog has marked an
// object log's directory and removed its metadata, before its objects go:
// the marks, in a directory the log never had before, must survive, so that
// the next Open removes the objects.
func TestCrashKeepsDeleteMarks(t *testing.T) {
	dir, store := t.TempDir(), t.TempDir()
	mem := vfs.NewMem()
	opts := Options{Dir: dir, Storage: StorageOptions{URL: "dir://" + store}, fs: mem}
	c, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	l, err := c.CreateLog(t.Context(), "obj", LogOptions{Mode: ModeObject})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(t.Context(), Entry{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	prefix := objectPrefix(meta.Log{ID: logOf(l).id, Installation: embeddedOf(c).install.ID})
	objects := func() []string {
		var keys []string
		filepath.WalkDir(filepath.Join(store, prefix), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				keys = append(keys, path)
			}
			return nil
		})
		return keys
	}
	if len(objects()) == 0 {
		t.Fatal("the append stored no object")
	}
	if err := c.CloseLog("obj"); err != nil {
		t.Fatal(err)
	}
	// What DeleteLog does before it removes the objects.
	embeddedOf(c).mu.Lock()
	if err := embeddedOf(c).markDeleted(logOf(l).id, prefix); err != nil {
		t.Fatal(err)
	}
	if err := embeddedOf(c).meta.DeleteLog(t.Context(), "obj"); err != nil {
		t.Fatal(err)
	}
	embeddedOf(c).mu.Unlock()
	after := mem.Crash(rand.New(rand.NewPCG(1, 2)))
	c.Close()

	opts.fs = after
	if c, err = Open(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	if keys := objects(); len(keys) > 0 {
		t.Fatalf("objects of the deleted log are left after Open: %q", keys)
	}
}
