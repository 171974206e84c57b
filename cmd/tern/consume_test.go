package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildTern builds the tern command into a directory of the test's.
func buildTern(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tern")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestConsumeIntoClosedPipe runs "tern sub consume LOG SUB | head -N" as a
// shell would, with the built binary: consume exits 0 once head is done, and
// the cursor has passed the N entries head printed, not the entries written
// into the pipe behind them. The same for read, which exits 0 too.
func TestConsumeIntoClosedPipe(t *testing.T) {
	bin := buildTern(t)
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	var lines strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&lines, "entry-%d\n", i)
	}
	must(t, dir, lines.String(), "append", "x", "--batch", "500")
	must(t, dir, "", "sub", "create", "x", "s")
	cursor := func() uint64 {
		t.Helper()
		var j subJSON
		if err := json.Unmarshal([]byte(must(t, dir, "", "sub", "describe", "x", "s", "--json")), &j); err != nil {
			t.Fatal(err)
		}
		return uint64(j.Cursor)
	}
	// pipeline runs tern args | head -n and returns what head printed and
	// tern's exit code and stderr.
	pipeline := func(n int, args ...string) (string, int, string) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		tern := exec.CommandContext(t.Context(), bin, append([]string{"--data", dir}, args...)...)
		tern.Env = append(os.Environ(), "TERN_SERVER=")
		var stderr bytes.Buffer
		tern.Stdout, tern.Stderr = w, &stderr
		head := exec.CommandContext(t.Context(), "head", fmt.Sprintf("-%d", n))
		head.Stdin = r
		var out bytes.Buffer
		head.Stdout = &out
		if err := tern.Start(); err != nil {
			t.Fatal(err)
		}
		if err := head.Start(); err != nil {
			t.Fatalf("head: %v (coreutils: apt-get install coreutils)", err)
		}
		r.Close()
		w.Close()
		if err := head.Wait(); err != nil {
			t.Fatalf("head: %v", err)
		}
		code := 0
		if err := tern.Wait(); err != nil {
			ee, ok := errors.AsType[*exec.ExitError](err)
			if !ok {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		return out.String(), code, stderr.String()
	}
	if out, code, stderr := pipeline(1, "sub", "consume", "x", "s"); out != "entry-0\n" || code != 0 || stderr != "" {
		t.Fatalf("sub consume | head -1: printed %q, exit %d, stderr %q", out, code, stderr)
	}
	if c := cursor(); c != 1 {
		t.Fatalf("after sub consume | head -1 the cursor is %d, want 1", c)
	}
	if out, code, _ := pipeline(3, "sub", "consume", "x", "s", "--format", "json"); strings.Count(out, "\n") != 3 || !strings.HasPrefix(out, `{"offset":1,"payload":"entry-1"`) || code != 0 {
		t.Fatalf("sub consume --format json | head -3: printed %q, exit %d", out, code)
	}
	if c := cursor(); c != 4 {
		t.Fatalf("after sub consume | head -3 the cursor is %d, want 4", c)
	}
	// Read to the end through a pipe: every entry, and the cursor at the end.
	if out, code, _ := pipeline(10000, "sub", "consume", "x", "s"); strings.Count(out, "\n") != 4996 || code != 0 {
		t.Fatalf("sub consume | head -10000: printed %d lines, exit %d", strings.Count(out, "\n"), code)
	}
	if c := cursor(); c != 5000 {
		t.Fatalf("after consuming everything the cursor is %d, want 5000", c)
	}
	if out, code, stderr := pipeline(2, "read", "x"); out != "entry-0\nentry-1\n" || code != 0 || stderr != "" {
		t.Fatalf("read | head -2: printed %q, exit %d, stderr %q", out, code, stderr)
	}
}

// TestConsumeFromEnd: --from-end moves the cursor to the log's end before
// consuming, so that only what is appended from then on is printed.
func TestConsumeFromEnd(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	must(t, dir, "a\nb\nc\n", "append", "x")
	must(t, dir, "", "sub", "create", "x", "s")
	if out := must(t, dir, "", "sub", "consume", "x", "s", "--from-end"); out != "" {
		t.Errorf("sub consume --from-end printed %q, want nothing", out)
	}
	var j subJSON
	if err := json.Unmarshal([]byte(must(t, dir, "", "sub", "describe", "x", "s", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if j.Cursor != 3 || j.Lag != 0 {
		t.Errorf("after sub consume --from-end: cursor %d, lag %d; want 3 and 0", j.Cursor, j.Lag)
	}
	must(t, dir, "d\n", "append", "x")
	if out := must(t, dir, "", "sub", "consume", "x", "s"); out != "d\n" {
		t.Errorf("sub consume after --from-end printed %q, want d", out)
	}
	fails(t, 1, dir, "", []string{"sub", "consume", "x", "nope", "--from-end"}, `subscription not found`, "tern sub create x nope")
}

// TestBinaryUsageErrors runs the built binary as a person would: a bad
// value is one line naming the flag and what it takes, a pointer to the
// help, and exit code 2; a duration takes days.
func TestBinaryUsageErrors(t *testing.T) {
	bin := buildTern(t)
	dir := t.TempDir()
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--data", dir}, args...)...)
		cmd.Env = append(os.Environ(), "TERN_SERVER=")
		out, err := cmd.CombinedOutput()
		if _, ok := errors.AsType[*exec.ExitError](err); err != nil && !ok {
			t.Fatal(err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := run("log", "create", "x", "--retention-age", "3d"); code != 0 {
		t.Fatalf("log create --retention-age 3d: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"read", "x", "--from", "-1"}, "tern: --from: -1 is not an offset: give a whole number, 0 or more, or --from-end\nSee \"tern read --help\".\n"},
		{[]string{"log", "truncate", "x", "-3"}, "tern: OFFSET -3 is not an offset: give a whole number, 0 or more\nSee \"tern log truncate --help\".\n"},
		{[]string{"read", "x", "--format", "xml"}, "tern: --format \"xml\": use text or json\nSee \"tern read --help\".\n"},
	} {
		if out, code := run(tc.args...); code != 2 || out != tc.want {
			t.Errorf("tern %q: exit %d, printed:\n%s\nwant exit 2 and:\n%s", tc.args, code, out, tc.want)
		}
	}
}
