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

// queuing is an application that queues appends through one writer
// without pause, window of them in flight, each a unique payload
// "<prefix>-<i>", and keeps their Pendings.
type queuing struct {
	mu      sync.Mutex
	pending []*tern.Pending
	stop    chan struct{}
	done    chan struct{}
}

func startQueuing(ctx context.Context, w *tern.Writer, prefix string, window int) *queuing {
	q := &queuing{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		for i := 0; ; i++ {
			select {
			case <-q.stop:
				return
			default:
			}
			p := w.AppendAsync(tern.Entry{Payload: fmt.Appendf(nil, "%s-%d", prefix, i)})
			q.mu.Lock()
			q.pending = append(q.pending, p)
			q.mu.Unlock()
			if i%window == window-1 {
				p.Wait(ctx)
			}
		}
	}()
	return q
}

func (q *queuing) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// waitQueued waits until n appends are queued.
func (q *queuing) waitQueued(n int) {
	for q.queued() < n {
		time.Sleep(time.Millisecond)
	}
}

// ackedMore waits until the append n after the last queued now is
// acknowledged, and fails the test if it fails.
func (q *queuing) ackedMore(t *testing.T, ctx context.Context, n int, what string) {
	t.Helper()
	i := q.queued() + n
	q.waitQueued(i + 1)
	q.mu.Lock()
	p := q.pending[i]
	q.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if _, err := p.Wait(wctx); err != nil {
		t.Fatalf("%s: append %d: %v", what, i, err)
	}
}

// end stops the queuing and checks that every append was acknowledged
// once, in the order queued (append i at offset i), that the log ends
// after the last at w's epoch, and holds each payload at its offset. It
// returns the number of appends.
func (q *queuing) end(t *testing.T, ctx context.Context, l *tern.Log, w *tern.Writer, prefix string) int {
	t.Helper()
	close(q.stop)
	<-q.done
	for i, p := range q.pending {
		off, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("append %d: %v: the application saw an error", i, err)
		}
		if off != tern.Offset(i) {
			t.Fatalf("append %d acknowledged at %d: each append once, in order, gets offset %d", i, off, i)
		}
	}
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != w.Epoch() || info.End != tern.Offset(len(q.pending)) {
		t.Fatalf("epoch %d, end %d; want the writer's epoch %d and end %d", info.Epoch, info.End, w.Epoch(), len(q.pending))
	}
	for i, e := range readAll(t, l, 0, info.End) {
		if want := fmt.Sprintf("%s-%d", prefix, i); string(e.Payload) != want {
			t.Fatalf("entry %d is %q, want %q", i, e.Payload, want)
		}
	}
	return len(q.pending)
}

// A remote writer appends through a SIGTERM restart and a kill -9 restart
// of its server: it keeps its epoch, every append it queued is
// acknowledged, and the log holds each exactly once, in the order queued.
func TestWriterRidesThroughRestarts(t *testing.T) {
	for _, how := range []string{"sigterm", "kill9"} {
		t.Run(how, func(t *testing.T) {
			srv, l := startWithLog(t, "rides", tern.LogOptions{})
			ctx := deadline(t)
			w, err := l.OpenWriter(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			q := startQueuing(ctx, w, "e", 64)
			q.waitQueued(500)
			srv.down(how)
			srv.restart()
			q.waitQueued(q.queued() + 500)
			q.end(t, ctx, l, w, "e")
		})
	}
}

// cliOn returns how to run the tern CLI with stdin, requiring an exit code,
// on a fresh data directory (where "embedded") or a fresh server's.
func cliOn(t *testing.T, where string) func(stdin string, code int, args ...string) (string, string) {
	at := []string{"--data", t.TempDir()}
	if where == "remote" {
		at = []string{"--server", startServer(t, t.TempDir()).addr}
	}
	return func(stdin string, code int, args ...string) (string, string) {
		t.Helper()
		return ternIO(t, stdin, code, append(append([]string{}, at...), args...)...)
	}
}

// Epochs through the CLI, embedded and remote: lower is refused, equal
// reopens, higher fences, and describe shows the epoch.
func TestCLIEpochs(t *testing.T) {
	for _, where := range []string{"embedded", "remote"} {
		t.Run(where, func(t *testing.T) {
			cli := cliOn(t, where)
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
			cli := cliOn(t, where)
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
