package tern

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// One log whose open segment is damaged opens degraded and stays alone in
// that: ListLogs lists every log, Health names it, the other log takes
// appends, its own prefix reads, its appends fail with ErrDamaged; the dry
// run of Repair changes nothing, the repair with the loss accepted records
// it and the log takes appends again, with everything before the damage
// intact.
func TestDegradedLogStaysAlone(t *testing.T) {
	dir := t.TempDir()
	seg := crashDamaged(t, dir, false)
	st, _ := os.Stat(seg)

	c := openClient(t, dir)
	infos, err := c.ListLogs(t.Context(), "")
	if err != nil || len(infos) != 2 {
		t.Fatalf("ListLogs with a degraded log: %v, %v", infos, err)
	}
	if _, err := mustOpen(t, c, "bad").Info(t.Context()); err != nil {
		t.Fatal(err) // opened at its first use, if recovery at start has not yet
	}
	h, err := c.Health()
	if err != nil || len(h.Degraded) != 1 || h.Degraded[0].Name != "bad" || !errors.Is(h.Degraded[0].Err, ErrDamaged) ||
		!strings.Contains(h.Degraded[0].Err.Error(), seg) {
		t.Fatalf("Health: %+v, %v; want log bad degraded, naming %s", h, err, seg)
	}
	good := mustOpen(t, c, "good")
	w, err := good.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 10, 5)

	bad := mustOpen(t, c, "bad")
	info, err := bad.Info(t.Context())
	if err != nil || info.End == 0 || info.End >= 100 {
		t.Fatalf("the degraded log: %+v, %v; want it to end before the damage", info, err)
	}
	checkPayloads(t, readAll(t, bad, 0), info.End)
	w, err = bad.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Append(t.Context(), Entry{Payload: []byte("refused")})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), seg) {
		t.Fatalf("append to the degraded log: %v, want ErrDamaged naming %s", err, seg)
	}

	dry, err := bad.Repair(t.Context(), false)
	if err != nil || !dry.Damaged || dry.Repaired || dry.Path != seg || dry.End != info.End || dry.BatchesAfter == 0 ||
		dry.CutBytes != dry.Size-dry.Pos || dry.Size != st.Size() {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	if after, _ := os.Stat(seg); after.Size() != st.Size() {
		t.Fatal("the dry run changed the segment")
	}
	rep, err := bad.Repair(t.Context(), true)
	if err != nil || !rep.Repaired || rep.Pos != dry.Pos || rep.Record == "" {
		t.Fatalf("repair: %+v, %v", rep, err)
	}
	if b, err := os.ReadFile(rep.Record); err != nil || !strings.Contains(string(b), fmt.Sprintf("cut %s at byte %d", seg, rep.Pos)) {
		t.Fatalf("the record of the repair: %q, %v", b, err)
	}
	if h, _ := c.Health(); len(h.Degraded) != 0 {
		t.Fatalf("Health after the repair: %+v", h)
	}
	if off, err := w.Append(t.Context(), Entry{Payload: payload(int(info.End))}); err != nil || off != info.End {
		t.Fatalf("append after the repair: %d, %v; want offset %d", off, err, info.End)
	}
	checkPayloads(t, readAll(t, bad, 0), info.End+1)
	if again, err := bad.Repair(t.Context(), false); err != nil || again.Damaged {
		t.Fatalf("a repaired log reports %+v, %v", again, err)
	}
}

func mustOpen(t *testing.T, c *Client, name string) *Log {
	t.Helper()
	l, err := c.OpenLog(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// checkPayloads checks that es are the entries appendN wrote from 0, n of
// them.
func checkPayloads(t *testing.T, es []Entry, n Offset) {
	t.Helper()
	if Offset(len(es)) != n {
		t.Fatalf("read %d entries, want %d", len(es), n)
	}
	for i, e := range es {
		if string(e.Payload) != string(payload(i)) {
			t.Fatalf("offset %d holds %q, want %q", i, e.Payload, payload(i))
		}
	}
}

// degradedAt reports whether c's Health lists log name as degraded, and if
// so, why that is wrong: its error must match ErrDamaged and ErrCorrupt
// and name path.
func degradedAt(c *Client, name, path string) (bool, string) {
	h, err := c.Health()
	if err != nil {
		return false, ""
	}
	for _, d := range h.Degraded {
		if d.Name != name {
			continue
		}
		ce, ok := errors.AsType[*CorruptError](d.Err)
		if !ok || !errors.Is(d.Err, ErrDamaged) || !(ce.Path == path || strings.HasSuffix(ce.Path, "/"+path)) {
			return true, fmt.Sprintf("degraded with %v, want ErrDamaged naming %s", d.Err, path)
		}
		return true, ""
	}
	return false, ""
}

// A log that was being written when the process died is recovered in the
// background at the next open, not at its first use: its damage is in
// Health without any call on it, and the log that was closed cleanly stays
// closed.
func TestDegradedLogFoundAtStart(t *testing.T) {
	dir := t.TempDir()
	seg := crashDamaged(t, dir, true)
	c := openClient(t, dir)
	ec := embeddedOf(c)
	for {
		h, err := c.Health()
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Degraded) == 1 && h.Degraded[0].Name == "bad" && strings.Contains(h.Degraded[0].Err.Error(), seg) {
			break
		}
		if len(h.Degraded) != 0 {
			t.Fatalf("Health: %+v; want log bad degraded, naming %s", h, seg)
		}
		select {
		case <-t.Context().Done():
			t.Fatal("the damaged log was never reported")
		case <-time.After(10 * time.Millisecond):
		}
	}
	for _, l := range ec.openLogs() {
		if l.name == "good" {
			t.Fatal("recovery at start opened a log that was closed cleanly")
		}
	}
}

// crashDamaged writes 100 entries to log "bad" and 10 to log "good" in the
// data directory dir, closing good first if closeGood, and leaves them as a
// crash would (open segments stay open); then it flips a byte in the middle
// of bad's open segment, whose path it returns.
func crashDamaged(t *testing.T, dir string, closeGood bool) string {
	t.Helper()
	c := openClient(t, dir)
	lBad, wBad := createLog(t, c, "bad", LogOptions{})
	id := logOf(lBad).id
	_, wGood := createLog(t, c, "good", LogOptions{})
	appendN(t, wBad, 0, 100)
	appendN(t, wGood, 0, 10)
	if closeGood {
		if err := c.CloseLog("good"); err != nil {
			t.Fatal(err)
		}
	}
	abandon(t, c)
	segs, err := filepath.Glob(filepath.Join(dir, "logs", fmt.Sprint(id), "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments of bad: %v, %v", segs, err)
	}
	st, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, segs[0], st.Size()/2)
	return segs[0]
}
