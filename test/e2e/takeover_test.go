package e2e

import (
	"fmt"
	"testing"

	"github.com/ternwal/tern"
)

// TestTakeOverIdleLog kills -9 the owner of a quorum log that nobody calls
// about: once the owner's lease lapses, another node serves the log without
// any call, and then every entry is there and a new writer appends after
// them.
func TestTakeOverIdleLog(t *testing.T) {
	c := startCluster(t, 4)
	ctx := t.Context()
	first := openClient(t, c.nodes["n0"].addr)
	l, err := first.CreateLog(ctx, "idle", tern.LogOptions{Mode: tern.ModeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		if _, err := w.Append(ctx, tern.Entry{Payload: fmt.Appendf(nil, "e-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	dead := c.owner(t)
	c.nodes[dead].kill9()
	// No call about the log from here until another node owns it.
	owner := c.ownerOtherThan(t, dead)
	t.Logf("log served by %s, then by %s", dead, owner)

	cl := openClient(t, c.nodes[owner].addr)
	log, err := cl.OpenLog(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range readAll(t, log, 0, n) {
		if want := fmt.Sprintf("e-%d", i); string(e.Payload) != want {
			t.Fatalf("offset %d holds %q, want %q", e.Offset, e.Payload, want)
		}
	}
	w, err = log.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if off, err := w.Append(ctx, tern.Entry{Payload: []byte("after")}); err != nil || off != n {
		t.Fatalf("append after the takeover: offset %d, %v; want offset %d", off, err, n)
	}
}
