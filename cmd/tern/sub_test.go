package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSub(t *testing.T) {
	dir := t.TempDir()
	subScenario(t, func(t *testing.T, stdin string, args ...string) result {
		t.Helper()
		return ternIn(t, dir, stdin, args...)
	})
}

// subScenario runs the sub commands through tern, which runs a command line
// against a data directory or a server.
func subScenario(t *testing.T, tern func(t *testing.T, stdin string, args ...string) result) {
	t.Helper()
	must := func(stdin string, args ...string) string {
		t.Helper()
		r := tern(t, stdin, args...)
		if r.code != 0 {
			t.Fatalf("tern %q: exit %d\nstderr: %s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	fails := func(code int, args []string, wants ...string) {
		t.Helper()
		r := tern(t, "", args...)
		if r.code != code || !strings.HasPrefix(r.stderr, "tern: ") {
			t.Fatalf("tern %q: exit %d, want %d\nstderr: %s", args, r.code, code, r.stderr)
		}
		for _, w := range wants {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("tern %q: stderr lacks %q:\n%s", args, w, r.stderr)
			}
		}
	}
	describe := func(sub string) subJSON {
		t.Helper()
		var j subJSON
		if err := json.Unmarshal([]byte(must("", "sub", "describe", "subs", sub, "--json")), &j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	cursor := func(sub string, cursor, lag uint64) {
		t.Helper()
		if j := describe(sub); uint64(j.Cursor) != cursor || j.Lag != lag {
			t.Errorf("subscription %s: cursor %d lag %d, want cursor %d lag %d", sub, j.Cursor, j.Lag, cursor, lag)
		}
	}

	must("", "log", "create", "subs")
	must("e0\ne1\ne2\ne3\ne4\n", "append", "subs")
	if out := must("", "sub", "create", "subs", "a"); out != "" {
		t.Errorf("sub create printed %q", out)
	}
	must("", "sub", "create", "subs", "b", "--from-end", "--pin")
	must("", "sub", "create", "subs", "c", "--from", "3")
	fails(1, []string{"sub", "create", "subs", "a"}, `subscription already exists: "a"`, `tern sub describe subs a`)
	fails(2, []string{"sub", "create", "subs", "d", "--from", "2", "--from-end"}, "--from and --from-end cannot be used together", `See "tern sub create --help".`)
	fails(1, []string{"sub", "create", "subs", "d", "--from", "99"}, "the log ends at 5")
	fails(1, []string{"sub", "create", "subs", "bad/name"}, `invalid name: subscription "bad/name"`)
	fails(1, []string{"sub", "create", "nope", "a"}, `log not found: "nope"`, "tern log create nope")
	fails(2, []string{"sub", "create", "subs"}, "tern sub create needs LOG SUB, got 1")

	out := must("", "sub", "list", "subs")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "NAME CURSOR LAG PIN CREATED" {
		t.Fatalf("sub list printed:\n%s", out)
	}
	for i, want := range []string{"a 0 5 no", "b 5 0 yes", "c 3 2 no"} {
		f := strings.Fields(lines[i+1])
		if got := strings.Join(f[:4], " "); got != want {
			t.Errorf("sub list row %d: %q, want %q", i, got, want)
		}
		if c, err := time.Parse(time.RFC3339, f[4]); err != nil || time.Since(c) > time.Hour {
			t.Errorf("sub list row %d: created %q", i, f[4])
		}
	}
	var names []string
	for line := range strings.Lines(must("", "sub", "list", "subs", "--json")) {
		var j subJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("sub list --json line %q: %v", line, err)
		}
		names = append(names, j.Name)
	}
	if strings.Join(names, " ") != "a b c" {
		t.Errorf("sub list --json listed %q", names)
	}

	out = must("", "sub", "describe", "subs", "b")
	for _, want := range []string{"Log:      subs", "Name:     b", "Cursor:   5", "Lag:      0", "Pin:      yes"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("sub describe lacks %q:\n%s", want, out)
		}
	}
	if j := describe("b"); j.Log != "subs" || j.Name != "b" || !j.Pin || time.Since(j.Created) > time.Hour {
		t.Errorf("sub describe --json: %+v", j)
	}

	// Consuming moves the cursor past what was printed.
	if out := must("", "sub", "consume", "subs", "a", "--limit", "2"); out != "e0\ne1\n" {
		t.Errorf("sub consume --limit 2 printed %q", out)
	}
	cursor("a", 2, 3)
	out = must("", "sub", "consume", "subs", "a", "--format", "json")
	var offs []uint64
	for line := range strings.Lines(out) {
		var e jsonEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("sub consume --format json line %q: %v", line, err)
		}
		offs = append(offs, uint64(e.Offset))
	}
	if len(offs) != 3 || offs[0] != 2 || offs[2] != 4 || !strings.Contains(out, `"payload":"e2"`) {
		t.Errorf("sub consume --format json printed:\n%s", out)
	}
	cursor("a", 5, 0)
	if out := must("", "sub", "consume", "subs", "a"); out != "" {
		t.Errorf("sub consume at the end printed %q", out)
	}
	fails(2, []string{"sub", "consume", "subs", "a", "--format", "xml"}, `--format "xml": use text or json`)

	// Seeking, back and forth.
	must("", "sub", "seek", "subs", "a", "1")
	cursor("a", 1, 4)
	if out := must("", "sub", "consume", "subs", "a", "--limit", "1"); out != "e1\n" {
		t.Errorf("sub consume after seek printed %q", out)
	}
	must("", "sub", "seek", "subs", "a", "5")
	cursor("a", 5, 0)
	fails(1, []string{"sub", "seek", "subs", "a", "99"}, "the log ends at 5")
	fails(2, []string{"sub", "seek", "subs", "a", "x"}, `OFFSET "x" is not an offset`)
	fails(1, []string{"sub", "seek", "subs", "nope", "1"}, `subscription not found: "nope"`, "tern sub create subs nope", "tern sub list subs")

	// Truncation below a cursor.
	must("", "log", "truncate", "subs", "4")
	fails(1, []string{"sub", "consume", "subs", "c"}, `subscription "c" is at offset 3 of log "subs", which is gone`, "tern sub seek subs c 4")
	fails(1, []string{"sub", "seek", "subs", "c", "2"}, "now starts at offset 4", "seek to 4 or later")
	fails(1, []string{"sub", "create", "subs", "d", "--from", "1"}, "now starts at offset 4", "--from 4")
	must("", "sub", "create", "subs", "d")
	cursor("d", 4, 1)
	must("", "sub", "seek", "subs", "c", "4")
	if out := must("", "sub", "consume", "subs", "c"); out != "e4\n" {
		t.Errorf("sub consume after truncation printed %q", out)
	}

	must("", "sub", "delete", "subs", "c")
	fails(1, []string{"sub", "delete", "subs", "c"}, `subscription not found: "c"`, "tern sub list subs")
	fails(1, []string{"sub", "describe", "subs", "c"}, `subscription not found: "c"`)
	fails(1, []string{"sub", "consume", "subs", "c"}, `subscription not found: "c"`)
	if out := must("", "sub", "list", "subs"); strings.Count(out, "\n") != 4 {
		t.Errorf("sub list after delete:\n%s", out)
	}
}
