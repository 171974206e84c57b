package e2e

import (
	"fmt"
	"testing"

	"github.com/ternwal/tern"
)

// TestSubscriberKilledResumes: a consumer killed with SIGKILL mid-way, and
// the next consumer of the subscription goes on from where the first one
// stopped. Delivery is at least once: together they receive every entry,
// and the second repeats at most the tail of the first one's run.
func TestSubscriberKilledResumes(t *testing.T) {
	const n = 2000
	srv := startServer(t, t.TempDir())
	c := openClient(t, srv.addr)
	ctx := deadline(t)
	l, err := c.CreateLog(ctx, "events", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 500 {
		batch := make([]tern.Entry, 500)
		for j := range batch {
			batch[j].Payload = fmt.Appendf(nil, "e-%d", i+j)
		}
		if _, err := w.AppendBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateSubscription(ctx, "workers", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}

	consumer := func(name, delay string) *child {
		return startChild(t, name, "consumer", "-server", srv.addr, "-log", "events", "-sub", "workers", "-last", fmt.Sprint(n-1), "-delay", delay)
	}
	first := consumer("first consumer", "1ms")
	first.waitFor("500 entries", func(lines []string) bool { return countPrefix(lines, "got ") >= 500 })
	first.kill9()
	got1 := events(t, first.lines(), "got")

	second := consumer("second consumer", "0s")
	lines := second.wait()
	if last := lastLine(lines); last != "done" {
		t.Fatalf("the second consumer ended with %q, want done", last)
	}
	got2 := events(t, lines, "got")

	// Each consumer receives a run of consecutive entries.
	checkRun := func(who string, got []event, from tern.Offset) {
		t.Helper()
		for i, e := range got {
			off := from + tern.Offset(i)
			if e.off != off || e.payload != fmt.Sprintf("e-%d", off) {
				t.Fatalf("%s: delivery %d was offset %d %q, want %d %q", who, i, e.off, e.payload, off, fmt.Sprintf("e-%d", off))
			}
		}
	}
	checkRun("first consumer", got1, 0)
	last1 := got1[len(got1)-1].off
	first2 := got2[0].off
	if first2 > last1+1 {
		t.Fatalf("the second consumer started at %d, but the first one received only up to %d: entries %d to %d were never delivered", first2, last1, last1+1, first2-1)
	}
	checkRun("second consumer", got2, first2)
	if end := got2[len(got2)-1].off; end != n-1 {
		t.Fatalf("the second consumer stopped at %d, want %d", end, n-1)
	}
	info, err := l.Subscription(deadline(t), "workers")
	if err != nil {
		t.Fatal(err)
	}
	if info.Cursor != n || info.Lag != 0 {
		t.Fatalf("after both consumers the subscription is %+v, want cursor %d and lag 0", info, n)
	}
	t.Logf("the first consumer received 0 to %d before it was killed; the second started at %d: %d entries delivered twice", last1, first2, last1+1-first2)
}
