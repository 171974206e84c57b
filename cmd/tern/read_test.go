package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

func TestReadJSON(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	must(t, dir, "plain\n\ttabbed <a&b> é\n", "append", "x")
	// Entries the command cannot append: binary, with properties.
	c, err := tern.Open(t.Context(), tern.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.OpenLog(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, e := range []tern.Entry{
		{Payload: []byte{0xff, 'a'}, Time: at},
		{Payload: []byte("bell\a"), Time: at},
		{Payload: []byte("props"), Properties: map[string][]byte{"k": {0, 1}}, Time: at},
	} {
		if _, err := w.Append(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	out := must(t, dir, "", "read", "x", "--format", "json")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		`{"offset":2,"payload":"/2E=","encoding":"base64","time":"2025-01-02T03:04:05.000000006Z"}`,
		`{"offset":3,"payload":"YmVsbAc=","encoding":"base64","time":"2025-01-02T03:04:05.000000006Z"}`,
		`{"offset":4,"payload":"props","time":"2025-01-02T03:04:05.000000006Z","properties":{"k":"AAE="},"properties_encoding":"base64"}`,
	}
	if len(lines) != 5 || strings.Join(lines[2:], "\n") != strings.Join(want, "\n") {
		t.Fatalf("read --format json printed:\n%s\nwant its last lines:\n%s", out, strings.Join(want, "\n"))
	}
	for i, payload := range []string{"plain", "\ttabbed <a&b> é"} {
		var e struct {
			Offset   int
			Payload  string
			Encoding *string
			Time     time.Time
		}
		if err := json.Unmarshal([]byte(lines[i]), &e); err != nil {
			t.Fatal(err)
		}
		if e.Offset != i || e.Payload != payload || e.Encoding != nil || time.Since(e.Time) > time.Hour {
			t.Errorf("line %d: %s", i, lines[i])
		}
	}
	if !strings.Contains(lines[1], "<a&b>") {
		t.Errorf("HTML-escaped: %s", lines[1])
	}
	if out := must(t, dir, "", "read", "x", "--from", "4", "--format", "text"); out != "props\n" {
		t.Errorf("read --format text printed %q", out)
	}
}

func TestReadFromLimit(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	var in strings.Builder
	for i := range 2500 {
		fmt.Fprintln(&in, i)
	}
	must(t, dir, in.String(), "append", "x")
	for _, tc := range []struct {
		args       []string
		first, n   int
		wantExitOK bool
	}{
		{[]string{"--from", "10", "--limit", "3"}, 10, 3, true},
		{[]string{"--from", "1500"}, 1500, 1000, true},
		{[]string{"--limit", "2000"}, 0, 2000, true},
		{[]string{"--limit", "0"}, 0, 0, true},
		{[]string{"--from", "2500"}, 0, 0, true},
		{[]string{"--from", "2490", "--limit", "5", "--follow"}, 2490, 5, true},
	} {
		out := must(t, dir, "", append([]string{"read", "x"}, tc.args...)...)
		var want strings.Builder
		for i := tc.first; i < tc.first+tc.n; i++ {
			fmt.Fprintln(&want, i)
		}
		if out != want.String() {
			t.Errorf("read %q printed %d lines, want %d from %d", tc.args, strings.Count(out, "\n"), tc.n, tc.first)
		}
	}
	fails(t, 1, dir, "", []string{"read", "x", "--from", "2501"}, "offset 2501 is beyond the end", "next append will give offset 2500")
}

// TestReadFollow follows a log while it is appended to. The commands share
// a Client, as only one may have the directory open.
func TestReadFollow(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	must(t, dir, "before\n", "append", "x")
	newApp, f := startFollower(t, dir, "read", "x", "--follow")
	cancel, code, stderr := f.cancel, f.code, f.stderr
	lines := bufio.NewScanner(f.out)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("read --follow ended early: %v, stderr:\n%s", lines.Err(), stderr.String())
		}
		return lines.Text()
	}
	if got := next(); got != "before" {
		t.Fatalf("read --follow printed %q, want before", got)
	}

	// Appends after the follower caught up; the second is exactly one
	// NextBatch, so only catching up with the log's end can flush it.
	appendLines := func(in string, args ...string) {
		t.Helper()
		var out, errb bytes.Buffer
		if code := newApp(strings.NewReader(in), &out, &errb).run(t.Context(), append([]string{"--data", dir, "append", "x"}, args...)); code != 0 {
			t.Fatalf("append: exit %d, stderr:\n%s", code, errb.String())
		}
	}
	appendLines("after 1\nafter 2\n")
	for _, want := range []string{"after 1", "after 2"} {
		if got := next(); got != want {
			t.Fatalf("read --follow printed %q, want %q", got, want)
		}
	}
	appendLines(strings.Repeat("x\n", readBatch), "--batch", fmt.Sprint(readBatch))
	for range readBatch {
		if got := next(); got != "x" {
			t.Fatalf("read --follow printed %q, want x", got)
		}
	}

	cancel()
	for lines.Scan() {
		t.Errorf("read --follow printed %q after the interrupt", lines.Text())
	}
	if c := <-code; c != 0 || stderr.Len() != 0 {
		t.Fatalf("interrupted read --follow: exit %d, stderr:\n%s", c, stderr.String())
	}
}

// --from-end prints nothing of what the log held when the command started:
// alone nothing at all, with --follow only what is appended afterwards.
func TestReadFromEnd(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	must(t, dir, "a\nb\n", "append", "x")
	if out := must(t, dir, "", "read", "x", "--from-end"); out != "" {
		t.Errorf("read --from-end printed %q, want nothing", out)
	}
	fails(t, 2, dir, "", []string{"read", "x", "--from", "1", "--from-end"}, "--from and --from-end cannot be used together")

	a, f := startFollower(t, dir, "read", "x", "--follow", "--from-end")
	cancel, code, stderr, out := f.cancel, f.code, f.stderr, f.out
	// Append until the follower prints: the first line it prints is one
	// appended after it started, never a or b.
	lines := bufio.NewScanner(out)
	printed := make(chan string, 1)
	go func() {
		if lines.Scan() {
			printed <- lines.Text()
		}
		close(printed)
	}()
	for i := 0; ; i++ {
		var o, e bytes.Buffer
		if code := a(strings.NewReader(fmt.Sprintf("new %d\n", i)), &o, &e).run(t.Context(), []string{"--data", dir, "append", "x"}); code != 0 {
			t.Fatalf("append: exit %d, stderr:\n%s", code, e.String())
		}
		select {
		case got := <-printed:
			if !strings.HasPrefix(got, "new ") {
				t.Fatalf("read --follow --from-end printed %q first, want an entry appended after it started", got)
			}
			cancel()
			io.Copy(io.Discard, out)
			if c := <-code; c != 0 {
				t.Fatalf("exit %d, stderr:\n%s", c, stderr.String())
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if i > 1000 {
			t.Fatalf("read --follow --from-end printed nothing; stderr:\n%s", stderr.String())
		}
	}
}

// follower is a command that follows a log, running in the background.
type follower struct {
	out    *io.PipeReader // its stdout
	stderr *bytes.Buffer  // read once code has answered
	code   chan int       // its exit code, once it ended
	cancel context.CancelFunc
}

// startFollower opens the data directory dir in one Client, runs args on it
// in the background, and returns how to make more commands that share the
// Client (only one may have the directory open) and the running command.
func startFollower(t *testing.T, dir string, args ...string) (func(stdin io.Reader, stdout, stderr io.Writer) *app, *follower) {
	t.Helper()
	c, err := tern.Open(t.Context(), tern.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	newApp := func(stdin io.Reader, stdout, stderr io.Writer) *app {
		return &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv,
			open: func(context.Context, string) (*tern.Client, error) { return c, nil }}
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	out, outw := io.Pipe()
	f := &follower{out: out, stderr: new(bytes.Buffer), code: make(chan int, 1), cancel: cancel}
	go func() {
		code := newApp(nil, outw, f.stderr).run(ctx, append([]string{"--data", dir}, args...))
		outw.Close()
		f.code <- code
	}()
	return newApp, f
}
