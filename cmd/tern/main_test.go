package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ternwal/tern"
)

// TestMain lets this test binary run as tern: tern bench --cluster and
// tern bench failover start their nodes as "<this program> serve ...".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		main()
	}
	os.Exit(m.Run())
}

// result is what a command line did.
type result struct {
	code           int
	stdout, stderr string
}

// ternIn runs a command line against the data directory dir.
func ternIn(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), append([]string{"--data", dir}, args...), strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// must runs a command line that must succeed, and returns its stdout.
func must(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	r := ternIn(t, dir, stdin, args...)
	if r.code != 0 {
		t.Fatalf("tern %q: exit %d\nstderr: %s", args, r.code, r.stderr)
	}
	return r.stdout
}

// fails runs a command line that must exit with code, and returns its
// stderr, which must contain each of wants.
func fails(t *testing.T, code int, dir, stdin string, args []string, wants ...string) string {
	t.Helper()
	r := ternIn(t, dir, stdin, args...)
	if r.code != code {
		t.Fatalf("tern %q: exit %d, want %d\nstdout: %s\nstderr: %s", args, r.code, code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "tern: ") {
		t.Errorf("tern %q: stderr does not start with \"tern: \":\n%s", args, r.stderr)
	}
	for _, w := range wants {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("tern %q: stderr lacks %q:\n%s", args, w, r.stderr)
		}
	}
	return r.stderr
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	for _, tc := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"bogus"}, []string{`unknown command "bogus"`}},
		{[]string{"lgo"}, []string{`did you mean "log"?`}},
		{[]string{"log", "craete", "x"}, []string{`unknown command "craete" for "tern log"`}},
		{[]string{"log", "create"}, []string{"tern log create needs NAME, got 0"}},
		{[]string{"log", "list", "extra"}, []string{"takes no arguments"}},
		{[]string{"log", "create", "y", "--nope"}, []string{"unknown flag: --nope"}},
		{[]string{"log", "create", "y", "--fsync", "sometimes"}, []string{`--fsync: sometimes is not a mode: give always, interval:DURATION with a positive DURATION such as interval:10ms (unsafe), or never (unsafe)`}},
		{[]string{"log", "create", "y", "--fsync", "interval:0s"}, []string{"positive DURATION"}},
		{[]string{"log", "create", "y", "--segment-bytes", "12XB"}, []string{`--segment-bytes: 12XB is not a size`, "64MiB"}},
		{[]string{"log", "create", "y", "--segment-age", "soon"}, []string{`--segment-age: soon is not a duration: give a number with a unit`, "3d"}},
		{[]string{"log", "truncate", "x", "ten"}, []string{`OFFSET "ten" is not an offset`}},
		{[]string{"log", "truncate", "x", "-3"}, []string{`OFFSET -3 is not an offset: give a whole number, 0 or more`}},
		{[]string{"sub", "seek", "x", "s", "-1"}, []string{`OFFSET -1 is not an offset: give a whole number, 0 or more`}},
		{[]string{"read", "x", "-2"}, []string{`-2 is neither a flag nor an argument tern read takes`}},
		{[]string{"append", "x", "--batch", "0"}, []string{"--batch: 0 is too small: give a whole number, 1 or more"}},
		{[]string{"append", "x", "--exclusive", "--epoch", "0"}, []string{"--epoch: 0 is too small: give a whole number, 1 or more"}},
		{[]string{"append", "x", "--if-end", "-1"}, []string{"--if-end: -1 is not an offset: give a whole number, 0 or more"}},
		{[]string{"read", "x", "--format", "xml"}, []string{`--format "xml": use text or json`}},
		{[]string{"read", "x", "--from", "-1"}, []string{`--from: -1 is not an offset: give a whole number, 0 or more, or --from-end`}},
		{[]string{"read", "x", "--from"}, []string{`--from needs a value: give a whole number, 0 or more, or --from-end`}},
		{[]string{"read", "x", "--limit", "99999999999999999999"}, []string{`--limit: 99999999999999999999 is out of range: give a whole number, 0 or more`}},
		{[]string{"sub", "consume", "x", "s", "--limit", "-1"}, []string{`--limit: -1 is not a number: give a whole number, 0 or more`}},
		{[]string{"sub", "create", "x", "s", "--from", "x"}, []string{`--from: x is not an offset: give a whole number, 0 or more, or --from-end`}},
		{[]string{"log", "list", "--limit", "-1"}, []string{`--limit: -1 is too small: give a whole number, 0 or more`}},
		{[]string{"doctor", ".", "--duration", "1x"}, []string{`--duration: 1x is not a duration`}},
	} {
		stderr := fails(t, 2, dir, "", tc.args, tc.wants...)
		// One line that says what is wrong, and where the usage is.
		if strings.Contains(stderr, "Usage:") || strings.Count(stderr, "\n") != 2 || !strings.Contains(stderr, "\nSee \"tern ") || !strings.HasSuffix(stderr, " --help\".\n") {
			t.Errorf("tern %q: not one line and a pointer to --help:\n%s", tc.args, stderr)
		}
		if strings.Contains(stderr, "Error:") || strings.Contains(stderr, "tern: tern:") {
			t.Errorf("tern %q: error printed twice or doubly prefixed:\n%s", tc.args, stderr)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	dir := t.TempDir()
	if out := must(t, dir, ""); !strings.Contains(out, "Available Commands:") {
		t.Errorf("tern with no command printed:\n%s", out)
	}
	if out := must(t, dir, "", "log", "create", "--help"); !strings.Contains(out, "--retention-age") || !strings.Contains(out, "(default 256MiB)") {
		t.Errorf("tern log create --help printed:\n%s", out)
	}
	out := must(t, dir, "", "log", "create", "--help")
	for _, want := range []string{"--mode local|object", "--flush-bytes size", "(default 4MiB)", "kept for the scripts that set it (default 20ms)", "--uploads-in-flight N", "more latency (default 4)"} {
		if !strings.Contains(out, want) {
			t.Errorf("tern log create --help lacks %q:\n%s", want, out)
		}
	}
	out = must(t, dir, "", "serve", "--help")
	for _, want := range []string{"tern serve --storage 's3://tern/wal?endpoint=127.0.0.1:9000&tls=false' --mode object", "$AWS_ACCESS_KEY_ID", "$TERN_STORAGE_SECRET_KEY", "leaving out\nstorage_secret_key", "--storage-ssec-key-file file"} {
		if !strings.Contains(out, want) {
			t.Errorf("tern serve --help lacks %q:\n%s", want, out)
		}
	}
	if out := must(t, dir, "", "version"); out != "tern devel\n" {
		t.Errorf("tern version printed %q", out)
	}
}

func TestMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	fails(t, 1, dir, "", []string{"log", "list"}, "data directory "+dir+" does not exist", "tern log create NAME")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("log list created the data directory %s", dir)
	}
}

func TestLockedDirectory(t *testing.T) {
	dir := t.TempDir()
	c, err := tern.Open(t.Context(), tern.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fails(t, 1, dir, "", []string{"log", "list"}, "in use by another process", dir)
}

func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	in, feed := io.Pipe()
	defer feed.Close()
	out, outw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		c := run(ctx, []string{"--data", dir, "append", "x"}, in, outw, &stderr)
		outw.Close()
		code <- c
	}()
	lines := bufio.NewScanner(out)
	if _, err := io.WriteString(feed, "one\n"); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || lines.Text() != "0" {
		t.Fatalf("append printed %q, want 0", lines.Text())
	}
	cancel() // while append waits for stdin, which never ends
	for lines.Scan() {
		t.Errorf("append printed %q after the interrupt", lines.Text())
	}
	if c := <-code; c != 1 || !strings.Contains(stderr.String(), "tern: interrupted after line 1") {
		t.Fatalf("interrupted append: exit %d, stderr:\n%s", c, stderr.String())
	}
}

// TestBinary builds the command and runs it as a person would.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tern")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "data")
	tern := func(stdin string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "TERN_DATA="+dir, "TERN_SERVER=")
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("tern %q: %v", args, err)
		}
		if cmd.ProcessState.ExitCode() != 0 {
			t.Logf("tern %q stderr:\n%s", args, stderr.String())
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	if _, code := tern("", "log", "create", "e2e"); code != 0 {
		t.Fatalf("log create: exit %d", code)
	}
	if out, code := tern("alpha\nbeta\n", "append", "e2e"); code != 0 || out != "0\n1\n" {
		t.Fatalf("append: exit %d, printed %q", code, out)
	}
	if out, code := tern("", "read", "e2e"); code != 0 || out != "alpha\nbeta\n" {
		t.Fatalf("read: exit %d, printed %q", code, out)
	}
	if _, code := tern("", "read", "e2e", "--bogus"); code != 2 {
		t.Fatalf("read --bogus: exit %d, want 2", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.db")); err != nil {
		t.Fatalf("$TERN_DATA not used: %v", err)
	}
}
