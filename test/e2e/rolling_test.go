package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// openClusterClient opens a remote client of the cluster whose nodes are at
// addrs, closed by the test's cleanup.
func openClusterClient(t *testing.T, addrs ...string) *tern.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	c, err := tern.Open(ctx, tern.Options{Server: addrs[0], Nodes: addrs[1:]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A rolling restart of a 3-node cluster under load shows the application
// no error at all: one writer appends without pause while each node in
// turn stops (SIGTERM) and starts again, then while the log's owner is
// killed (kill -9) and started again, and every append it queued is
// acknowledged, exactly once, in the order queued, at its writer's epoch.
func TestClusterRollingRestart(t *testing.T) {
	for _, mode := range []tern.Mode{tern.ModeQuorum, tern.ModeObject} {
		t.Run(string(mode), func(t *testing.T) {
			c := startCluster(t, 3)
			ctx := deadline(t)
			cl := openClusterClient(t, c.nodes["n0"].addr, c.nodes["n1"].addr, c.nodes["n2"].addr)
			l, err := cl.CreateLog(ctx, "rolling", tern.LogOptions{Mode: mode, SegmentBytes: 256 << 10})
			if err != nil {
				t.Fatal(err)
			}
			w, err := l.OpenWriter(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()

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
					p := w.AppendAsync(tern.Entry{Payload: fmt.Appendf(nil, "r-%d", i)})
					mu.Lock()
					pending = append(pending, p)
					mu.Unlock()
					if i%32 == 31 {
						p.Wait(ctx) // a window of appends in flight
					}
				}
			}()
			// ackedMore waits until n more appends than now are acknowledged.
			ackedMore := func(n int, what string) {
				t.Helper()
				mu.Lock()
				from := len(pending)
				mu.Unlock()
				for {
					mu.Lock()
					k := len(pending)
					var p *tern.Pending
					if k > from+n {
						p = pending[from+n]
					}
					mu.Unlock()
					if p != nil {
						wctx, cancel := context.WithTimeout(ctx, waitTimeout)
						_, err := p.Wait(wctx)
						cancel()
						if err != nil {
							t.Fatalf("%s: append %d: %v", what, from+n, err)
						}
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			ackedMore(200, "before the restarts")
			for _, id := range []string{"n1", "n2", "n0"} {
				c.nodes[id].stop()
				// A quorum log's new segment (its owner left) needs the
				// three nodes: the appends wait for the restart.
				time.Sleep(500 * time.Millisecond)
				c.nodes[id].restart()
				ackedMore(200, "after "+id+" restarted")
			}
			// And the owner killed: the log moves, the writer's session
			// with it, and what the dead node left unanswered is sent again.
			owner := c.owner(t)
			c.nodes[owner].kill9()
			time.Sleep(500 * time.Millisecond)
			c.nodes[owner].restart()
			ackedMore(200, "after kill -9 of the owner "+owner)
			close(stop)
			<-done

			for i, p := range pending {
				off, err := p.Wait(ctx)
				if err != nil {
					t.Fatalf("append %d: %v: the rolling restart showed the application an error", i, err)
				}
				if off != tern.Offset(i) {
					t.Fatalf("append %d acknowledged at %d, want %d: each append once, in order", i, off, i)
				}
			}
			info, err := l.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Epoch != w.Epoch() || info.End != tern.Offset(len(pending)) {
				t.Fatalf("after the restarts: epoch %d, end %d; want the writer's epoch %d and end %d", info.Epoch, info.End, w.Epoch(), len(pending))
			}
			for i, e := range readAll(t, l, 0, info.End) {
				if want := fmt.Sprintf("r-%d", i); string(e.Payload) != want {
					t.Fatalf("entry %d is %q, want %q", i, e.Payload, want)
				}
			}
			t.Logf("%d appends through a rolling restart of 3 nodes and a kill -9 of the owner, none failed", len(pending))
		})
	}
}

// A client given several nodes connects to the first that answers, in Go
// and in the CLI.
func TestClientNodes(t *testing.T) {
	srv := startServer(t, t.TempDir())
	dead := freeAddr(t)
	c := openClusterClient(t, dead, srv.addr)
	if _, err := c.CreateLog(deadline(t), "seen", tern.LogOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, _ := ternIO(t, "", 0, "--server", dead+","+srv.addr, "log", "list"); !strings.Contains(out, "seen") {
		t.Fatalf("log list through the second of two addresses:\n%s", out)
	}
	if _, errs := ternIO(t, "", 1, "--server", dead, "log", "list"); !strings.Contains(errs, "cannot reach") {
		t.Fatalf("log list with only a dead address: %s", errs)
	}
}
