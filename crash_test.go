package tern

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ternwal/tern/internal/vfs"
)

// crashWorkload appends, fences, rolls segments and truncates on fs, and
// records what was attempted and what was acknowledged. It stops at the first
// error, which is what a crash looks like from inside.
type crashWorkload struct {
	acked     map[Offset]string // acknowledged offset -> payload
	batchOf   map[string]int    // payload -> id of the AppendBatch it was in
	batchSize map[int]int
	truncated Offset // the truncation point, if Truncate returned
}

func (cw *crashWorkload) run(t *testing.T, dir string, fs vfs.FS) {
	cw.acked, cw.batchOf, cw.batchSize = map[Offset]string{}, map[string]int{}, map[int]int{}
	c, err := Open(t.Context(), Options{Dir: dir, fs: fs})
	if err != nil {
		return
	}
	defer c.Close()
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
	for i := 22; i < 26; i++ {
		if !appendN(i, 2) {
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

// TestCrashAtEveryPoint cuts the power after every mutating filesystem
// operation of a workload, several times with different survivors of the
// unsynced writes, and checks the recovered log.
func TestCrashAtEveryPoint(t *testing.T) {
	var ref crashWorkload
	mem := vfs.NewMem()
	ref.run(t, t.TempDir(), mem)
	total := mem.Ops()
	if len(ref.acked) < 40 || total < 50 {
		t.Fatalf("reference run acknowledged %d entries in %d operations; the workload is broken", len(ref.acked), total)
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
