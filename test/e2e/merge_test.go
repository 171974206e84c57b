package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// TestMergeAfterKill9: a log with a short segment age, appended to a few
// times, a while apart, by each run of a server killed with SIGKILL, has a
// sealed segment per append; the server merges them in the background, so
// after twelve runs the log has a few segment files, not 36, `tern check`
// finds no damage, and every entry reads back once, in order.
func TestMergeAfterKill9(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, data)
	c := openClient(t, srv.addr)
	ctx := deadline(t)
	l, err := c.CreateLog(ctx, "m", tern.LogOptions{SegmentAge: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, "logs", strconv.FormatUint(info.ID, 10))
	const runs, per = 12, 3
	payload := func(i int) []byte { return fmt.Appendf(nil, "%03d-%s", i, strings.Repeat("m", 100)) }
	n := 0
	for run := range runs {
		w, err := l.OpenWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range per {
			// Older than the segment age: the append seals the segment
			// before it.
			time.Sleep(30 * time.Millisecond)
			if off, err := w.Append(ctx, tern.Entry{Payload: payload(n)}); err != nil || off != tern.Offset(n) {
				t.Fatalf("run %d: append %d: %d, %v", run, n, off, err)
			}
			n++
		}
		srv.kill9()
		srv.restart()
		c = openClient(t, srv.addr)
		if l, err = c.OpenLog(ctx, "m"); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range readAll(t, l, 0, tern.Offset(n)) {
		if !bytes.Equal(e.Payload, payload(i)) {
			t.Fatalf("offset %d holds %.20q", i, e.Payload)
		}
	}
	// The log is open (read): its merges run after recovery.
	var segs []string
	for {
		if segs, err = filepath.Glob(filepath.Join(dir, "*.seg")); err != nil {
			t.Fatal(err)
		}
		if len(segs) <= 8 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d segment files after %d runs of %d appends: %q", len(segs), runs, per, segs)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("%d segment files after %d runs of %d appends, each sealed by age", len(segs), runs, per)
	out, err := ternCmd("check", data)
	if err != nil || !strings.Contains(out, "no damage") {
		t.Fatalf("tern check: %v\n%s", err, out)
	}
}
