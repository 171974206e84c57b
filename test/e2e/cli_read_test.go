package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// cliFollower is a tern command that follows a log, in a process of its
// own: its stdout lines, and its exit.
type cliFollower struct {
	lines  chan string
	stderr *syncBuffer
	done   chan struct{}
	code   int
}

func startCLIFollower(t *testing.T, addr string, args ...string) *cliFollower {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	cmd := exec.CommandContext(ctx, ternBin, append([]string{"--server", addr}, args...)...)
	cmd.Env = append(cmd.Environ(), "TERN_SERVER=", "TERN_DIR=")
	f := &cliFollower{lines: make(chan string, 100), stderr: new(syncBuffer), done: make(chan struct{})}
	cmd.Stderr = f.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
		cmd.Wait()
		f.code = cmd.ProcessState.ExitCode()
		cancel()
		close(f.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-f.done
	})
	return f
}

// next is the next line the follower prints, or "" if it printed none
// within d.
func (f *cliFollower) next(d time.Duration) string {
	select {
	case l := <-f.lines:
		return l
	case <-time.After(d):
		return ""
	}
}

// TestCLIFollowersOfADeletedLog: tern read --follow and tern sub consume
// --follow --from-end on a server print what is appended (consume only
// what comes after it started), and when the log is deleted they say so
// and exit 1.
func TestCLIFollowersOfADeletedLog(t *testing.T) {
	srv := startServer(t, t.TempDir())
	runCLI(t, srv.addr, "", 0, "log", "create", "doomed")
	runCLI(t, srv.addr, "a\nb\n", 0, "append", "doomed")
	runCLI(t, srv.addr, "", 0, "sub", "create", "doomed", "s")

	reader := startCLIFollower(t, srv.addr, "read", "doomed", "--follow")
	consumer := startCLIFollower(t, srv.addr, "sub", "consume", "doomed", "s", "--follow", "--from-end")
	for _, want := range []string{"a", "b"} {
		if got := reader.next(waitTimeout); got != want {
			t.Fatalf("read --follow printed %q, want %q; stderr:\n%s", got, want, reader.stderr)
		}
	}
	// The consumer skipped a and b; it prints the first entry appended after
	// it moved its cursor to the end, which it does not say it did: append
	// until it prints one.
	var first string
	for i := 0; first == ""; i++ {
		if i == 100 {
			t.Fatalf("sub consume --follow --from-end printed nothing; stderr:\n%s", consumer.stderr)
		}
		runCLI(t, srv.addr, "c\n", 0, "append", "doomed")
		first = consumer.next(200 * time.Millisecond)
	}
	if first != "c" {
		t.Fatalf("sub consume --follow --from-end printed %q first, want c", first)
	}
	runCLI(t, srv.addr, "", 0, "log", "delete", "doomed")
	for _, f := range []struct {
		name string
		f    *cliFollower
	}{{"read --follow", reader}, {"sub consume --follow", consumer}} {
		for range f.f.lines { // the c's not yet taken
		}
		<-f.f.done
		if f.f.code != 1 || !strings.Contains(f.f.stderr.String(), `log "doomed" was deleted`) {
			t.Errorf("%s of a deleted log: exit %d, stderr:\n%s", f.name, f.f.code, f.f.stderr)
		}
	}
}
