package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// ternIO runs the tern binary with args (which say --server or --dir) and
// stdin, requires exit code code, and returns its output.
func ternIO(t *testing.T, stdin string, code int, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ternBin, args...)
	cmd.Env = append(cmd.Environ(), "TERN_SERVER=", "TERN_DIR=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	got := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		got = ee.ExitCode()
	} else if err != nil {
		t.Errorf("tern %s: %v", strings.Join(args, " "), err)
	}
	if got != code {
		t.Errorf("tern %s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, &out, &errs)
	}
	return out.String(), errs.String()
}

// A remote writer appends through a SIGTERM restart and a kill -9 restart
// of its server: it keeps its epoch, every append it queued is
// acknowledged, and the log holds each exactly once, in the order queued.
func TestWriterRidesThroughRestarts(t *testing.T) {
	for _, restart := range []string{"sigterm", "kill9"} {
		t.Run(restart, func(t *testing.T) {
			srv := startServer(t, t.TempDir())
			c := openClient(t, srv.addr)
			ctx := deadline(t)
			l, err := c.CreateLog(ctx, "rides", tern.LogOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w, err := l.OpenWriter(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()

			// A producer queues appends without pause while the server
			// goes down and comes back.
			var (
				mu      sync.Mutex
				pending []*tern.Pending
				stop    = make(chan struct{})
				done    = make(chan struct{})
			)
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					p := w.AppendAsync(tern.Entry{Payload: fmt.Appendf(nil, "e-%d", i)})
					mu.Lock()
					pending = append(pending, p)
					mu.Unlock()
					if i%64 == 63 {
						p.Wait(ctx) // a window of appends in flight
					}
				}
			}()
			waitQueued := func(n int) {
				for {
					mu.Lock()
					k := len(pending)
					mu.Unlock()
					if k >= n {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
			waitQueued(500)
			if restart == "sigterm" {
				srv.stop()
			} else {
				srv.kill9()
			}
			srv.restart()
			mu.Lock()
			n := len(pending)
			mu.Unlock()
			waitQueued(n + 500)
			close(stop)
			<-done

			for i, p := range pending {
				off, err := p.Wait(ctx)
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
				if off != tern.Offset(i) {
					t.Fatalf("append %d acknowledged at %d: each append once, in order, gets offset %d", i, off, i)
				}
			}
			info, err := l.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Epoch != w.Epoch() || info.End != tern.Offset(len(pending)) {
				t.Fatalf("after the restart: epoch %d, end %d; want the writer's epoch %d and end %d", info.Epoch, info.End, w.Epoch(), len(pending))
			}
			for i, e := range readAll(t, l, 0, info.End) {
				if want := fmt.Sprintf("e-%d", i); string(e.Payload) != want {
					t.Fatalf("entry %d is %q, want %q", i, e.Payload, want)
				}
			}
		})
	}
}

// Epochs through the CLI, embedded and remote: lower is refused, equal
// reopens, higher fences, and describe shows the epoch.
func TestCLIEpochs(t *testing.T) {
	for _, where := range []string{"embedded", "remote"} {
		t.Run(where, func(t *testing.T) {
			at := []string{"--dir", t.TempDir()}
			if where == "remote" {
				at = []string{"--server", startServer(t, t.TempDir()).addr}
			}
			cli := func(stdin string, code int, args ...string) (string, string) {
				t.Helper()
				return ternIO(t, stdin, code, append(append([]string{}, at...), args...)...)
			}
			cli("", 0, "log", "create", "terms")
			if out, _ := cli("a\n", 0, "append", "--exclusive", "--epoch", "5", "terms"); out != "0\n" {
				t.Fatalf("append at epoch 5 printed %q", out)
			}
			if _, errs := cli("b\n", 1, "append", "--exclusive", "--epoch", "3", "terms"); !strings.Contains(errs, "fenced") || !strings.Contains(errs, "below") {
				t.Fatalf("append at epoch 3 under 5: %s", errs)
			}
			if out, _ := cli("c\n", 0, "append", "--exclusive", "--epoch", "5", "terms"); out != "1\n" {
				t.Fatalf("append at epoch 5 again printed %q", out)
			}
			if out, _ := cli("d\n", 0, "append", "--exclusive", "--epoch", "9", "terms"); out != "2\n" {
				t.Fatalf("append at epoch 9 printed %q", out)
			}
			if out, _ := cli("", 0, "log", "describe", "terms"); !strings.Contains(out, "Writer epoch:") || !strings.Contains(out, "9") {
				t.Fatalf("describe after epoch 9:\n%s", out)
			}
			if out, _ := cli("", 0, "log", "describe", "--json", "terms"); !strings.Contains(out, `"epoch":9`) && !strings.Contains(out, `"epoch": 9`) {
				t.Fatalf("describe --json after epoch 9:\n%s", out)
			}
			// The writers closed their sessions: shared producers append.
			if out, _ := cli("e\n", 0, "append", "terms"); out != "3\n" {
				t.Fatalf("shared append after the exclusive writers printed %q", out)
			}
			cli("", 2, "append", "--epoch", "4", "terms")
			if out, _ := cli("", 0, "read", "terms"); out != "a\nc\nd\ne\n" {
				t.Fatalf("read printed %q", out)
			}
		})
	}
}

// Two tern append processes on one log both complete: shared producers do
// not fence each other.
func TestCLISharedProducers(t *testing.T) {
	srv := startServer(t, t.TempDir())
	ternIO(t, "", 0, "--server", srv.addr, "log", "create", "many")
	const lines = 300
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for p := range 2 {
		var in strings.Builder
		for i := range lines {
			fmt.Fprintf(&in, "p%d-%d\n", p, i)
		}
		wg.Go(func() {
			outs[p], _ = ternIO(t, in.String(), 0, "--server", srv.addr, "append", "many")
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for p, out := range outs {
		if n := strings.Count(out, "\n"); n != lines {
			t.Errorf("producer %d printed %d offsets, want %d", p, n, lines)
		}
		for off := range strings.FieldsSeq(out) {
			if seen[off] {
				t.Errorf("offset %s printed twice", off)
			}
			seen[off] = true
		}
	}
	out, _ := ternIO(t, "", 0, "--server", srv.addr, "read", "many")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != 2*lines {
		t.Fatalf("the log holds %d entries, want %d", len(got), 2*lines)
	}
	next := [2]int{}
	for _, e := range got {
		var p, i int
		if _, err := fmt.Sscanf(e, "p%d-%d", &p, &i); err != nil || p < 0 || p > 1 || i != next[p] {
			t.Fatalf("entry %q out of its producer's order (next of each: %v)", e, next)
		}
		next[p]++
	}

	// An exclusive writer keeps the shared producers out until it closes.
	ctx := deadline(t)
	c := openClient(t, srv.addr)
	l, err := c.OpenLog(ctx, "many")
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := ternIO(t, "x\n", 1, "--server", srv.addr, "append", "many"); !strings.Contains(errs, "exclusive writer") {
		t.Fatalf("tern append while an exclusive writer is open: %s", errs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out, _ := ternIO(t, "y\n", 0, "--server", srv.addr, "append", "many"); out != fmt.Sprintf("%d\n", 2*lines) {
		t.Fatalf("tern append after the exclusive writer closed printed %q", out)
	}
}

// tern append --if-end appends only at the end it names, embedded and
// through a server, and says where the log ends when it is elsewhere.
func TestCLIIfEnd(t *testing.T) {
	for _, where := range []string{"embedded", "remote"} {
		t.Run(where, func(t *testing.T) {
			at := []string{"--dir", t.TempDir()}
			if where == "remote" {
				at = []string{"--server", startServer(t, t.TempDir()).addr}
			}
			cli := func(stdin string, code int, args ...string) (string, string) {
				t.Helper()
				return ternIO(t, stdin, code, append(append([]string{}, at...), args...)...)
			}
			cli("", 0, "log", "create", "cas")
			if out, _ := cli("a\nb\n", 0, "append", "--if-end", "0", "cas"); out != "0\n1\n" {
				t.Fatalf("append --if-end 0 printed %q", out)
			}
			out, errs := cli("x\n", 1, "append", "--if-end", "1", "cas")
			if out != "" || !strings.Contains(errs, "condition") || !strings.Contains(errs, "2") {
				t.Fatalf("append --if-end 1 at end 2: stdout %q, stderr %s", out, errs)
			}
			if out, _ := cli("c\n", 0, "append", "--exclusive", "--if-end", "2", "cas"); out != "2\n" {
				t.Fatalf("append --exclusive --if-end 2 printed %q", out)
			}
			cli("", 2, "append", "--if-end", "-1", "cas")
			if out, _ := cli("", 0, "read", "cas"); out != "a\nb\nc\n" {
				t.Fatalf("read printed %q", out)
			}
		})
	}
}
