package e2e

import (
	"context"
	"strings"
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

			q := startQueuing(ctx, w, "r", 32)
			q.ackedMore(t, ctx, 200, "before the restarts")
			for _, id := range []string{"n1", "n2", "n0"} {
				c.nodes[id].stop()
				// A quorum log's new segment (its owner left) needs the
				// three nodes: the appends wait for the restart.
				time.Sleep(500 * time.Millisecond)
				c.nodes[id].restart()
				q.ackedMore(t, ctx, 200, "after "+id+" restarted")
			}
			// And the owner killed: the log moves, the writer's session
			// with it, and what the dead node left unanswered is sent again.
			owner := c.owner(t)
			c.nodes[owner].kill9()
			time.Sleep(500 * time.Millisecond)
			c.nodes[owner].restart()
			q.ackedMore(t, ctx, 200, "after kill -9 of the owner "+owner)
			n := q.end(t, ctx, l, w, "r")
			t.Logf("%d appends through a rolling restart of 3 nodes and a kill -9 of the owner, none failed", n)
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
