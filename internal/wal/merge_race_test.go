package wal

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/vfs"
)

// Readers following the log from its first offset while its segments are
// sealed one per entry and merged behind them read every entry once, in
// order: a reader whose segment's file a merge removed or replaced looks
// it up again.
func TestMergeReadersFollow(t *testing.T) {
	mem, c := vfs.NewMem(), newClock()
	l, err := Open(t.Context(), mergeOptions(mem, 1, c))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 300
	payload := func(i int) string { return fmt.Sprintf("follow%d-%s", i, strings.Repeat("f", i%40)) }
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := l.NewReader(0, false)
			if err != nil {
				errs <- err
				return
			}
			defer r.Close()
			for i := 0; i < n; {
				es, err := r.NextBatch(ctx, 1+k%2*5, 0)
				if err != nil {
					errs <- fmt.Errorf("reader %d at offset %d: %w", k, i, err)
					return
				}
				for _, e := range es {
					if e.Offset != uint64(i) || string(e.Payload) != payload(i) {
						errs <- fmt.Errorf("reader %d: offset %d %.20q, want offset %d %.20q", k, e.Offset, e.Payload, i, payload(i))
						return
					}
					i++
				}
			}
		}()
	}
	for i := range n {
		c.add(2 * time.Minute)
		if i%10 == 0 {
			// Now and then, a merge in the foreground as well.
			if _, err := l.mergeAll(ctx); err != nil {
				t.Fatal(err)
			}
		}
		appendWait(t, l, 1, payload(i))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := l.mergeAll(ctx); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	merges := l.merges // the background merger may be switching one in
	l.mu.Unlock()
	if merges == 0 {
		t.Fatal("no merge happened")
	}
	if segs, _ := segmentFiles(t, mem); len(segs) > 12 {
		t.Fatalf("%d segment files after %d segments of one entry", len(segs), n)
	}
}

// Retention by age and Truncate see a merged segment as one: its newest
// entry's time is the newest of those merged, and it goes once all of its
// entries are below the start.
func TestMergeRetentionAndTruncate(t *testing.T) {
	mem, c := vfs.NewMem(), newClock()
	o := mergeOptions(mem, 1, c)
	o.MergeSmall = -1
	l, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := tinySegments(t, l, c, 1, 10, "old")
	old := c.now()
	l.Close()
	o.MergeSmall = 0
	l = openMerged(t, o)
	defer l.Close()
	c.add(time.Hour)
	for i := range 10 {
		p := fmt.Sprintf("new%d", i)
		appendWait(t, l, 1, p)
		want = append(want, p)
	}
	if _, err := l.mergeAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The old entries, 2 minutes apart, end up merged (the newest old
	// one with them once it is no longer the newest segment).
	segs, _ := segmentFiles(t, mem)
	first := segs[0]
	tLast := old.Add(-2 * time.Minute * time.Duration(10-first.Next))
	if len(segs) > 3 || first.Next < 9 || first.Next > 10 || first.MaxTime != tLast.UnixNano() {
		t.Fatalf("after merging, %d segment files, the first up to offset %d with max time %d; want the old sealed ones merged, with the newest's time %d",
			len(segs), first.Next, first.MaxTime, tLast.UnixNano())
	}
	// An age that keeps the newest old entry keeps the merged segment.
	if err := l.ApplyRetention(c.now(), engine.Retention{Age: c.now().Sub(tLast) + time.Minute, Keep: 1 << 62}); err != nil {
		t.Fatal(err)
	}
	readFrom(t, l, 0, want)
	if err := l.ApplyRetention(c.now(), engine.Retention{Age: c.now().Sub(tLast) - time.Minute, Keep: 1 << 62}); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Start != first.Next {
		t.Fatalf("retention by age left the log starting at %d, want %d (the merged segment dropped whole)", st.Start, first.Next)
	}
	readFrom(t, l, first.Next, want[first.Next:])
	if _, err := mem.Stat(segs[0].Path); err == nil {
		t.Fatalf("retention left %s", segs[0].Path)
	}
	if err := l.Truncate(15); err != nil {
		t.Fatal(err)
	}
	readFrom(t, l, 15, want[15:])
	if _, err := l.mergeAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	readFrom(t, l, 15, want[15:])
	if r, err := Check(mem, mergeDir); err != nil || r.Damaged() {
		t.Fatalf("Check = %+v, %v", r, err)
	}
}

// warnings is a slog.Handler that keeps the messages logged at Warn or
// above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var attrs []string
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a.String()); return true })
	w.msgs = append(w.msgs, r.Message+" "+strings.Join(attrs, " "))
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// A log truncated behind its writer, whose dropped segments' files are
// written over by new ones, while its small segments are merged in the
// background: a merge whose segments are dropped meanwhile gives up
// quietly (no warning), and the log holds exactly its entries above the
// start, before and after a reopen.
func TestMergeWithTruncation(t *testing.T) {
	mem, c := vfs.NewMem(), newClock()
	warn := new(warnings)
	o := mergeOptions(mem, 1, c)
	o.Logger = slog.New(warn)
	l, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	var start uint64
	for i := range 400 {
		if i%3 == 0 {
			c.add(2 * time.Minute)
		}
		p := fmt.Sprintf("trunc%d-%s", i, strings.Repeat("r", i%90))
		appendWait(t, l, 1, p)
		want = append(want, p)
		if i%7 == 6 {
			start = uint64(i - 25)
			if i < 25 {
				start = 0
			}
			if err := l.Truncate(start); err != nil {
				t.Fatal(err)
			}
		}
	}
	readFrom(t, l, start, want[start:])
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(warn.msgs) > 0 {
		t.Fatalf("warnings: %q", warn.msgs)
	}
	if r, err := Check(mem, mergeDir); err != nil || r.Damaged() {
		t.Fatalf("Check = %+v, %v", r, err)
	}
	o.Start = start
	if l, err = Open(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	readFrom(t, l, start, want[start:])
}

// The logs of a data directory merge one at a time: while the Disk's turn
// is held, another merge waits for it, and gives up when its context ends
// (its log closes); logs that share a Disk all merge, and leave the turn
// free.
func TestMergeTakesTurns(t *testing.T) {
	mem := vfs.NewMem()
	d := NewDisk(mem, "/data", -1, nil)
	if !d.startMerge(t.Context()) {
		t.Fatal("startMerge refused a free turn")
	}
	// Waits (a second here) rather than take the held turn.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	if d.startMerge(ctx) {
		t.Fatal("a second merge got a turn while the first held it")
	}
	cancel()
	d.endMerge()

	c := newClock()
	logs := make([]*Log, 3)
	want := make([][]string, len(logs))
	for i := range logs {
		o := mergeOptions(mem, 1, c)
		o.Dir, o.MergeSmall = fmt.Sprintf("/data/log%d", i), -1
		l, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = tinySegments(t, l, c, 1, 20, fmt.Sprintf("log%d-", i))
		l.Close()
		o.MergeSmall, o.Disk = 0, d
		if logs[i], err = Open(t.Context(), o); err != nil { // its merger starts
			t.Fatal(err)
		}
		defer logs[i].Close()
	}
	var wg sync.WaitGroup
	for _, l := range logs {
		wg.Go(func() {
			if _, err := l.mergeAll(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, l := range logs {
		readFrom(t, l, 0, want[i])
		if segs, _ := segmentFilesIn(t, mem, l.opts.Dir); len(segs) > 3 {
			t.Errorf("%s: %d segment files after merging, want 3 at most", l.opts.Dir, len(segs))
		}
	}
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if !d.startMerge(ctx) {
		t.Fatal("no merge turn free once the merges are done")
	}
	d.endMerge()
}
