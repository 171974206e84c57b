package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ternwal/tern"
)

// crashedDir makes a data directory with logs "bad" and "good" of 20
// entries each, one batch each, and leaves the last segment of "bad" as a
// crash would (open: no footer, no closed record), with a byte flipped in
// its middle batch. It returns that segment's path.
func crashedDir(t *testing.T, dir string) string {
	t.Helper()
	ctx := t.Context()
	c, err := tern.Open(ctx, tern.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var id uint64
	for _, name := range []string{"bad", "good"} {
		l, err := c.CreateLog(ctx, name, tern.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := l.OpenWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, err := w.Append(ctx, tern.Entry{Payload: fmt.Appendf(nil, "%s %02d", name, i)}); err != nil {
				t.Fatal(err)
			}
		}
		if info, _ := l.Info(ctx); name == "bad" {
			id = info.ID
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(dir, "logs", fmt.Sprint(id))
	segs, _ := filepath.Glob(filepath.Join(logDir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments of bad: %v", segs)
	}
	seg := segs[0]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := binary.LittleEndian.Uint64(b[len(b)-48:]) // the footer's index position: where the batches end
	b = b[:end]
	b[end/2] ^= 0x40
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(logDir, "closed")); err != nil {
		t.Fatal(err)
	}
	return seg
}

func TestRepairAndCheck(t *testing.T) {
	dir := t.TempDir()
	seg := crashedDir(t, dir)
	before, _ := os.Stat(seg)

	r := ternIn(t, dir, "", "check", dir)
	if r.code != 1 || !strings.Contains(r.stdout, "DAMAGED") || !strings.Contains(r.stdout, "damage: "+seg+" at byte ") ||
		!strings.Contains(r.stderr, "1 of 2 logs") || !strings.Contains(r.stderr, "tern log repair") {
		t.Fatalf("check of a damaged directory: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Count(r.stdout, ": ok\n") != 1 {
		t.Errorf("check does not say the other log is ok:\n%s", r.stdout)
	}

	if out := must(t, dir, "", "log", "list"); !strings.Contains(out, "bad") || !strings.Contains(out, "good") {
		t.Fatalf("log list beside a degraded log:\n%s", out)
	}
	// The crashed writer's session is still open: take it over.
	must(t, dir, "more\n", "append", "--exclusive", "good")
	// The CLI's own log (stderr) names the damage too, once.
	if r := ternIn(t, dir, "refused\n", "append", "--exclusive", "bad"); r.code != 1 || !strings.Contains(r.stderr, "tern: append line 1: tern: log is damaged: segment: "+seg+" is corrupt at byte") {
		t.Fatalf("append to a degraded log: exit %d, stderr %s", r.code, r.stderr)
	}

	out := must(t, dir, "", "log", "repair", "bad")
	for _, want := range []string{`log "bad" is damaged: ` + seg + " is corrupt at byte ", "the repair would cut", "valid batches",
		"nothing was changed", "tern log repair bad --accept-loss"} {
		if !strings.Contains(out, want) {
			t.Errorf("repair dry run lacks %q:\n%s", want, out)
		}
	}
	if after, _ := os.Stat(seg); after.Size() != before.Size() {
		t.Fatal("the dry run changed the segment")
	}
	out = must(t, dir, "", "log", "repair", "bad", "--accept-loss")
	if !strings.Contains(out, "repaired: the log ends at offset") || !strings.Contains(out, filepath.Join(filepath.Dir(seg), "repairs")) {
		t.Fatalf("repair --accept-loss printed:\n%s", out)
	}
	var j logJSON
	if err := json.Unmarshal([]byte(must(t, dir, "", "log", "describe", "bad", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	end := j.End
	if end == 0 || end >= 20 {
		t.Fatalf("the repaired log ends at %d, want between 0 and 20", end)
	}
	must(t, dir, "again\n", "append", "--exclusive", "bad")
	got := must(t, dir, "", "read", "bad", "--from", "0")
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if uint64(len(lines)) != uint64(end)+1 || !strings.Contains(lines[0], "bad 00") || !strings.Contains(lines[len(lines)-1], "again") {
		t.Fatalf("read after the repair:\n%s", got)
	}
	if out := must(t, dir, "", "log", "repair", "bad"); !strings.Contains(out, "not damaged") {
		t.Fatalf("repair of a repaired log:\n%s", out)
	}
	if out := must(t, dir, "", "check", dir); !strings.Contains(out, "2 logs checked: no damage") {
		t.Fatalf("check after the repair:\n%s", out)
	}
}

// check only reads, and runs on a directory another process has open.
func TestCheckLockedDir(t *testing.T) {
	dir := t.TempDir()
	crashedDir(t, dir)
	c, err := tern.Open(context.Background(), tern.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := ternIn(t, dir, "", "check")
	if r.code != 1 || !strings.Contains(r.stdout, "in use by another process") || !strings.Contains(r.stdout, "DAMAGED") {
		t.Fatalf("check of a directory in use: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var out, errb strings.Builder
	if code := run(t.Context(), []string{"check", "--server", "127.0.0.1:1"}, strings.NewReader(""), &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "run it on the server's machine") {
		t.Fatalf("check --server: exit %d, stderr %s", code, errb.String())
	}
	fails(t, 1, dir, "", []string{"check", filepath.Join(dir, "nope")}, "is not a data directory")
}
