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

// reopenWork runs short writers one after another on /data/log: each
// opens the log with a newer epoch (as a new writer session does), appends
// a few batches and closes it; one also fences to a newer epoch in the
// middle. It records every append acknowledged and stops at the first
// error, which is what a crash looks like from inside.
type reopenWork struct {
	acked     map[uint64]string // offset -> payload
	attempted map[string]bool
}

const reopenWriters = 6

func (w *reopenWork) run(t *testing.T, fs vfs.FS) {
	w.acked, w.attempted = map[uint64]string{}, map[string]bool{}
	ctx := context.Background()
	for s := range reopenWriters {
		epoch := uint64(2*s + 1)
		l, err := Open(ctx, Options{FS: fs, Dir: "/data/log", Epoch: epoch, SegmentBytes: 1 << 16})
		if err != nil {
			return
		}
		for i := range 3 {
			if s == 2 && i == 1 {
				if l.Fence(ctx, epoch+1, nil) != nil {
					l.Close()
					return
				}
				epoch++
			}
			var es []record.Entry
			for j := range 1 + i%2 {
				p := fmt.Sprintf("w%d.%d.%d-%s", s, i, j, strings.Repeat("x", (s*131+i*37)%300))
				w.attempted[p] = true
				es = append(es, record.Entry{Payload: []byte(p)})
			}
			pend, err := l.Append(epoch, es, engine.AppendOptions{})
			if err != nil {
				l.Close()
				return
			}
			off, err := pend.Wait(ctx)
			if err != nil {
				l.Close()
				return
			}
			for j, e := range es {
				w.acked[off+uint64(j)] = string(e.Payload)
			}
		}
		if l.Close() != nil {
			return
		}
	}
}

// check opens the log after a crash: it opens, holds every acknowledged
// entry at its offset and nothing never appended, with dense offsets, and
// takes an append at its end.
func (w *reopenWork) check(t *testing.T, fs vfs.FS) {
	t.Helper()
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/data/log", Epoch: 100, SegmentBytes: 1 << 16})
	if err != nil {
		t.Fatalf("Open after crash: %v", err)
	}
	defer l.Close()
	end := l.Stats().End
	if end > 0 {
		r, err := l.NewReader(0, false)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for i, e := range readN(t, r, int(end), true) {
			if e.Offset != uint64(i) || !w.attempted[string(e.Payload)] {
				t.Fatalf("offset %d (entry %d) holds %.20q, which was never appended", e.Offset, i, e.Payload)
			}
		}
	}
	for off, p := range w.acked {
		if off >= end {
			t.Fatalf("the log ends at %d and lost %.20q, acknowledged at offset %d", end, p, off)
		}
	}
	if off := appendWait(t, l, 100, "after"); off != end {
		t.Fatalf("append after recovery got offset %d, want %d", off, end)
	}
}

// Writers that each append a little and close continue one segment file
// instead of leaving one file each, and every entry reads back at its
// offset. A power loss after any filesystem operation of theirs (the
// footer cut off by a new writer, its first batch, its seal) leaves a log
// that recovers every acknowledged entry and nothing else.
func TestReopenCrashAtEveryPoint(t *testing.T) {
	mem := vfs.NewMem()
	var ref reopenWork
	ref.run(t, mem)
	if len(ref.acked) != reopenWriters*4 {
		t.Fatalf("reference run acknowledged %d entries, want %d", len(ref.acked), reopenWriters*4)
	}
	names, err := mem.List("/data/log")
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, n := range names {
		if _, ok := segment.ParseFileName(n); ok {
			segs = append(segs, n)
		}
	}
	if len(segs) != 1 {
		t.Fatalf("%d writers left segment files %q, want them to continue one", reopenWriters, segs)
	}
	want := make([]string, len(ref.acked))
	for off, p := range ref.acked {
		want[off] = p
	}
	checkEntries(t, mem, want, "after the writers")

	total := mem.Ops()
	crashAtEveryPoint(t, total, func() crashWork { return new(reopenWork) })
}
