package wal

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// reuseWork is a log's normal life in small: a writer appends to
// /data/log, whose segments are small, and truncates it behind itself, so
// that sealed segments are dropped into the free directory and new ones
// created over them; the first writer's entries are long and the second's
// mostly short (the old bytes outlast the new ones) with some long ones
// (the new ones go past the old file's end). Between the two, the log is
// closed and opened again: the free files are found again, and the newest
// segment reopened. It records every append acknowledged, the truncation
// point, and stops at the first error, which is what a crash looks like from
// inside.
type reuseWork struct {
	acked     map[uint64]string // offset -> payload
	at        map[string]uint64 // payload -> offset acknowledged
	attempted map[string]bool
	truncated uint64 // the highest truncation point that returned
	asked     uint64 // the highest truncation point asked for
	zeroAhead int64  // Options.ZeroAhead of the run, with any round small
}

const reuseAppends = 14

func reuseOptions(fs vfs.FS, epoch uint64) Options {
	return Options{FS: fs, Dir: "/data/log", Epoch: epoch, SegmentBytes: 1 << 10}
}

func (w *reuseWork) options(fs vfs.FS, epoch uint64) Options {
	o := reuseOptions(fs, epoch)
	if w.zeroAhead > 0 {
		o.ZeroAhead, o.ZeroRound = w.zeroAhead, 1<<30
	}
	return o
}

func (w *reuseWork) run(t *testing.T, fs vfs.FS) {
	w.acked, w.at, w.attempted = map[uint64]string{}, map[string]uint64{}, map[string]bool{}
	ctx := context.Background()
	for s := range 2 {
		epoch := uint64(s + 1)
		l, err := Open(ctx, w.options(fs, epoch))
		if err != nil {
			return
		}
		for i := range reuseAppends {
			size := 150 + (i*67)%250
			if s == 1 && i%5 != 3 {
				size = 10 + (i*13)%60
			}
			p := fmt.Sprintf("w%d.%d-%s", s, i, strings.Repeat("x", size))
			w.attempted[p] = true
			pend, err := l.Append(epoch, []record.Entry{{Payload: []byte(p)}}, engine.AppendOptions{})
			if err != nil {
				l.Close()
				return
			}
			off, err := pend.Wait(ctx)
			if err != nil {
				l.Close()
				return
			}
			w.acked[off], w.at[p] = p, off
			if i%3 == 2 && off >= 2 {
				w.asked = off - 1
				if l.Truncate(off-1) != nil {
					l.Close()
					return
				}
				w.truncated = max(w.truncated, off-1)
			}
		}
		if l.Close() != nil {
			return
		}
	}
}

// check opens the log after a crash: it holds every acknowledged entry at
// or above the truncation point, at its offset, and nothing else (no entry
// at an offset it was not acknowledged at: an old batch of a file written
// over never passes for a new one), with dense offsets, and takes an append
// at its end.
func (w *reuseWork) check(t *testing.T, fs vfs.FS) {
	t.Helper()
	l, err := Open(t.Context(), reuseOptions(fs, 100))
	if err != nil {
		t.Fatalf("Open after crash: %v", err)
	}
	defer l.Close()
	st := l.Stats()
	if st.Start > w.asked {
		t.Fatalf("the log starts at %d, above the truncation point %d", st.Start, w.asked)
	}
	readsBack(t, l, st, w.attempted, w.acked, w.at)
	for off, p := range w.acked {
		if off >= w.truncated && off >= st.End {
			t.Fatalf("the log ends at %d and lost %.20q, acknowledged at offset %d", st.End, p, off)
		}
	}
	if off := appendWait(t, l, 100, "after"); off != st.End {
		t.Fatalf("append after recovery got offset %d, want %d", off, st.End)
	}
}

// A log truncated behind its writer creates its new segments over the
// files of the dropped ones, keeps no more of them than it may, and holds
// exactly its entries; a power loss after any filesystem operation of its
// life (a segment dropped into the free directory, a header written over
// an old one, the rename, batches over old batches, a seal that cuts the
// old bytes off, a reopen) leaves a log that recovers every acknowledged
// entry above the truncation point and nothing else.
func TestReuseCrashAtEveryPoint(t *testing.T) {
	mem := vfs.NewMem()
	var ref reuseWork
	ref.run(t, mem)
	if len(ref.acked) != 2*reuseAppends {
		t.Fatalf("reference run acknowledged %d entries, want %d", len(ref.acked), 2*reuseAppends)
	}
	free, err := mem.List("/data/log/" + FreeDirName)
	if err != nil || len(free) == 0 || len(free) > DefaultReuseSegments {
		t.Fatalf("the free directory holds %q (%v), want 1 to %d files", free, err, DefaultReuseSegments)
	}
	names, err := mem.List("/data/log")
	if err != nil {
		t.Fatal(err)
	}
	segs := 0
	for _, n := range names {
		if _, ok := segment.ParseFileName(n); ok {
			segs++
		}
	}
	if segs > 3 {
		t.Fatalf("the log truncated behind its writer keeps %d segment files: %q", segs, names)
	}
	ref.check(t, mem)
	crashAtEveryPoint(t, mem.Ops(), func() crashWork { return new(reuseWork) })
}

// The same life with zeros written ahead of every round (300 bytes ahead,
// more than a batch, less than a segment): a power loss after any
// operation, the writing of zeros among them, recovers exactly.
func TestZeroAheadCrashAtEveryPoint(t *testing.T) {
	plain := vfs.NewMem()
	new(reuseWork).run(t, plain)
	mem := vfs.NewMem()
	ref := reuseWork{zeroAhead: 300}
	ref.run(t, mem)
	if len(ref.acked) != 2*reuseAppends {
		t.Fatalf("reference run acknowledged %d entries, want %d", len(ref.acked), 2*reuseAppends)
	}
	if mem.Ops() <= plain.Ops() {
		t.Fatalf("the run with zeros ahead made %d filesystem operations, the run without %d: no zeros were written", mem.Ops(), plain.Ops())
	}
	ref.check(t, mem)
	crashAtEveryPoint(t, mem.Ops(), func() crashWork { return &reuseWork{zeroAhead: 300} })
}

// The writes of the log's normal life go over old files: every segment
// created once the free directory has files is created over one of them
// (none of the files in the log directory was made by Create).
func TestReuseWritesOver(t *testing.T) {
	for _, keep := range []int{0, -1} {
		mem := vfs.NewMem()
		created := 0
		fs := vfs.WithErrors(mem, func(o vfs.Op, name string) error {
			if o == vfs.OpCreate && strings.HasSuffix(name, ".seg") {
				created++
			}
			return nil
		})
		l, err := Open(t.Context(), Options{FS: fs, Dir: "/data/log", Epoch: 1, SegmentBytes: 1 << 10, ReuseSegments: keep})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			off := appendWait(t, l, 1, fmt.Sprintf("%d-%s", i, strings.Repeat("y", 200)))
			if off >= 8 {
				if err := l.Truncate(off - 8); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// 200 entries of about 220 bytes in segments of 1 KiB: about 50.
		if keep == 0 && created > 5 {
			t.Fatalf("with reuse, %d segment files were created for about 50 segments", created)
		}
		if keep < 0 && created < 40 {
			t.Fatalf("with ReuseSegments -1, only %d segment files were created for about 50 segments", created)
		}
		if _, err := mem.List("/data/log/" + FreeDirName); keep < 0 && err == nil {
			t.Fatal("with ReuseSegments -1 the log made a free directory")
		}
	}
}

// readsBack reads l's entries from st.Start to st.End and checks that their
// offsets are dense, that each was attempted (attempted), that each offset
// acknowledged (acked) holds its entry, and, if at is not nil, that each
// entry acknowledged is at the offset it was acknowledged at.
func readsBack(t *testing.T, l *Log, st engine.Stats, attempted map[string]bool, acked map[uint64]string, at map[string]uint64) {
	t.Helper()
	if st.End <= st.Start {
		return
	}
	r, err := l.NewReader(st.Start, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, e := range readN(t, r, int(st.End-st.Start), true) {
		p := string(e.Payload)
		if want := st.Start + uint64(i); e.Offset != want {
			t.Fatalf("entry %d read at offset %d, want %d", i, e.Offset, want)
		}
		if !attempted[p] {
			t.Fatalf("offset %d holds %.20q, which was never appended", e.Offset, p)
		}
		if q, ok := acked[e.Offset]; ok && q != p {
			t.Fatalf("offset %d holds %.20q, want %.20q, acknowledged there", e.Offset, p, q)
		}
		if off, ok := at[p]; ok && off != e.Offset {
			t.Fatalf("offset %d holds %.20q, acknowledged at offset %d", e.Offset, p, off)
		}
	}
}
