package driver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
)

// failoverName is the log of tern bench failover.
const failoverName = "failover"

// Failover starts a cluster cl under env.Dir, creates a quorum log and
// appends 1 KiB entries to it with one writer, one at a time, through a
// node that does not serve it; then, kills times, kills the node that
// serves the log (kill -9), times from the kill to the acknowledgement of
// the first append sent after it, and starts the node again. The result's
// latencies are those times; its errors, what the application saw fail
// meanwhile (an append or the reopening of its writer), by class in the
// Extra figures "errors_<class>" (see errorClass); "takeover_p50_s" and
// "takeover_max_s" time the kill to the log's owner key naming another
// node. A node other than the one killed that exits on its own meanwhile
// (its lease lapsed on a loaded machine) is restarted, as a service manager
// would, and counted in "restarts"; a fail-over that does not complete
// says which nodes exited, and keeps the nodes' logs with their goroutines
// in a directory that it names.
func Failover(ctx context.Context, env Env, cl Cluster, kills int) (*loadgen.Result, error) {
	c, err := cl.start(ctx, env.Dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	admin, err := tern.Open(ctx, tern.Options{Server: c.nodes[0].addr})
	if err != nil {
		return nil, err
	}
	_, err = admin.CreateLog(ctx, failoverName, cl.logOptions())
	admin.Close()
	if err != nil {
		return nil, err
	}

	hist, takeovers := loadgen.NewHistogram(), loadgen.NewHistogram()
	classes := map[string]int64{}
	restartsTotal := 0
	r := &loadgen.Result{System: "tern", Version: env.Version, Variant: fmt.Sprintf("%s, ttl %v", cl.variant(), cl.TTL),
		Workload: failoverName, Started: time.Now().UTC()}
	for k := range kills {
		fo, err := c.failover(ctx, cl.TTL)
		if err != nil {
			return nil, fmt.Errorf("kill %d of %d: %w", k+1, kills, err)
		}
		hist.Record(fo.acked)
		takeovers.Record(fo.takeover)
		r.Errors += fo.fails.n
		if r.FirstError == "" && fo.fails.first != nil {
			r.FirstError = fo.fails.first.Error()
		}
		for c, n := range fo.fails.classes {
			classes[c] += n
		}
		restarts := ""
		if len(fo.restarted) > 0 {
			restarts = fmt.Sprintf("; node %s exited on its own meanwhile (its lease lapsed) and was restarted", fo.restarted[0])
			if len(fo.restarted) > 1 {
				restarts = fmt.Sprintf("; nodes %s exited on their own meanwhile (their leases lapsed) and were restarted", strings.Join(fo.restarted, ", "))
			}
			restartsTotal += len(fo.restarted)
		}
		fmt.Fprintf(env.Progress, "kill %d of %d: the next append was acknowledged %v after it (another node took the log %v after it); the application saw %s%s\n",
			k+1, kills, fo.acked.Round(time.Millisecond), fo.takeover.Round(time.Millisecond), fo.fails.describe(), restarts)
	}
	r.Seconds = time.Since(r.Started).Seconds()
	r.Latency, r.Percentiles = hist.Summary()
	r.Spec, err = loadgen.Spec{Name: failoverName, Kind: loadgen.KindFailover, EntryBytes: 1 << 10, Count: kills,
		Duration: time.Duration(r.Seconds * float64(time.Second))}.Normalize()
	if err != nil {
		return nil, err
	}
	r.SetExtra("node_ttl_s", cl.TTL.Seconds()) // the kills are Spec.Count
	tk, _ := takeovers.Summary()
	r.SetExtra("takeover_p50_s", float64(tk.P50)/1e6)
	r.SetExtra("takeover_max_s", float64(tk.Max)/1e6)
	for c, n := range classes {
		r.SetExtra("errors_"+c, float64(n))
	}
	if restartsTotal > 0 {
		r.SetExtra("restarts", float64(restartsTotal))
		r.Notes = append(r.Notes, fmt.Sprintf("%d times a node other than the one killed exited on its own during a fail-over (its lease lapsed: the machine was too loaded for --node-ttl %v) and was restarted; those fail-overs include its restart", restartsTotal, cl.TTL))
	}
	all := failures{n: r.Errors, classes: classes}
	r.Notes = append(r.Notes, fmt.Sprintf("fail-over over %d kills: p50 %s, p99 %s, max %s (the owner key moved after p50 %s, max %s); the latency columns are the fail-over times, the errors what the application saw fail meanwhile (none acknowledged): %s",
		kills, loadgen.Micros(r.Latency.P50), loadgen.Micros(r.Latency.P99), loadgen.Micros(r.Latency.Max), loadgen.Micros(tk.P50), loadgen.Micros(tk.Max), all.describe()))
	return r, nil
}

// failures counts what failed, by class (errorClass), and keeps the first
// error.
type failures struct {
	n       int64
	first   error
	classes map[string]int64
}

func (f *failures) add(o failures) {
	f.n += o.n
	if f.first == nil {
		f.first = o.first
	}
	for c, n := range o.classes {
		if f.classes == nil {
			f.classes = map[string]int64{}
		}
		f.classes[c] += n
	}
}

// describe says how many errors of each class there were.
func (f failures) describe() string {
	if f.n == 0 {
		return "no error"
	}
	cs := slices.Sorted(maps.Keys(f.classes))
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%d %s", f.classes[c], c)
	}
	return plural(f.n, "error") + ": " + strings.Join(parts, ", ")
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// errorClass names what kind of failure err is, prefixed by the step that
// failed ("append", or "open" for the opening of the log and its writer):
// "fenced" (the writer was fenced: the log moved to a new owner, which
// opened it with a new epoch), "not_owner" (the client gave up following
// the log to its owner), "unavailable" (the node was unreachable, or the
// connection was lost with the call in flight), "timeout" (the call's
// deadline passed) or "other".
func errorClass(step string, err error) string {
	var c string
	switch {
	case errors.Is(err, tern.ErrFenced):
		c = "fenced"
	case errors.Is(err, tern.ErrNotOwner):
		c = "not_owner"
	case errors.Is(err, tern.ErrUnavailable), status.Code(err) == codes.Unavailable:
		c = "unavailable"
	case errors.Is(err, context.DeadlineExceeded), status.Code(err) == codes.DeadlineExceeded:
		c = "timeout"
	default:
		c = "other"
	}
	return step + "_" + c
}

// failedOver is what one kill measured.
type failedOver struct {
	acked     time.Duration // from the kill to the first acknowledgement after it
	takeover  time.Duration // from the kill to another node's owner key
	fails     failures
	restarted []string // the nodes that exited on their own meanwhile, restarted
}

// failover kills the node serving the log once, under a steady append,
// and measures the fail-over; then starts the node again.
func (c *benchCluster) failover(ctx context.Context, ttl time.Duration) (failedOver, error) {
	wait := ttl + 2*time.Minute // the bound of every wait here
	var fo failedOver
	for _, seed := range c.nodes {
		// The client's first address must be a node that stays up: one
		// that does not serve the log once the appends have settled.
		client, err := tern.Open(ctx, tern.Options{Server: seed.addr})
		if err != nil {
			return fo, err
		}
		owner, err := c.killOwner(ctx, client, seed, wait, &fo)
		client.Close()
		if err != nil {
			return fo, err
		}
		if owner == nil {
			continue // the seed serves the log: try the next
		}
		return fo, c.start(ctx, owner)
	}
	return fo, errors.New("every node served the log in turn")
}

// killOwner appends to the log through client until the appends settle,
// then kills the node that serves it, and measures the fail-over into fo;
// it returns the node killed, or no node when the seed serves the log.
// The errors the appender saw before the kill count too: there are none
// once the appends settled.
func (c *benchCluster) killOwner(ctx context.Context, client *tern.Client, seed *benchNode, wait time.Duration, fo *failedOver) (*benchNode, error) {
	ap := startAppender(client, failoverName)
	defer func() {
		ap.stop()
		fo.fails.add(ap.failed())
	}()
	// Appends flow through the owner, which has served the log for a
	// while, before it is killed.
	if _, err := ap.ackedAfter(time.Now(), 100, wait); err != nil {
		return nil, fmt.Errorf("before the kill: %w", err)
	}
	owner, err := c.steadyOwner(ctx, wait)
	if err != nil || owner == seed {
		return nil, err
	}
	if _, err := ap.ackedAfter(time.Now(), 100, wait); err != nil {
		return nil, fmt.Errorf("before the kill: %w", err)
	}
	resp, err := c.cli.Get(ctx, etcdRoot+"owners/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != owner.id {
		return nil, fmt.Errorf("the log moved from node %s while appends settled", owner.id)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	moved := c.ownerMoved(wctx, owner.id, resp.Header.Revision+1)
	killed := time.Now()
	c.kill9(owner)
	restarted := c.supervise(ctx, owner)
	acked, err := ap.ackedAfter(killed, 1, wait)
	fo.restarted = restarted()
	if err != nil {
		return nil, fmt.Errorf("after the kill of node %s: %w%s (%s)", owner.id, err, c.exited(owner), c.keepLogs())
	}
	fo.acked = acked.Sub(killed)
	select {
	case t := <-moved:
		fo.takeover = t.Sub(killed)
	case <-time.After(wait):
		return nil, fmt.Errorf("after the kill of node %s: no other node took the log within %v", owner.id, wait)
	}
	return owner, nil
}

// ownerMoved watches the log's owner key from revision rev on, and sends
// when it first names another node than old.
func (c *benchCluster) ownerMoved(ctx context.Context, old string, rev int64) <-chan time.Time {
	moved := make(chan time.Time, 1)
	go func() {
		for wr := range c.cli.Watch(ctx, etcdRoot+"owners/", clientv3.WithPrefix(), clientv3.WithRev(rev)) {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut && string(ev.Kv.Value) != old {
					moved <- time.Now()
					return
				}
			}
		}
	}()
	return moved
}

// steadyOwner returns the node that serves the log once it has served it
// for a second, as a node that joins may take it over.
func (c *benchCluster) steadyOwner(ctx context.Context, wait time.Duration) (*benchNode, error) {
	deadline := time.Now().Add(wait)
	var last *benchNode
	since := time.Now()
	for time.Now().Before(deadline) {
		n, err := c.owner(ctx)
		if err != nil {
			return nil, err
		}
		if n != last {
			last, since = n, time.Now()
		}
		if n != nil && time.Since(since) >= time.Second {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("no node served the log steadily within %v", wait)
}

// appender is the application: one writer that appends 1 KiB entries to a
// log, one at a time, until stopped, and remembers when each append that
// was acknowledged had been sent and acknowledged. On every error it
// counts the error (errorClass), closes the writer if the append failed
// (a writer fenced, or whose node is gone, appends no more), waits
// retryPause and opens the log and a new writer; an open that fails is
// counted and tried again after retryPause.
type appender struct {
	mu      sync.Mutex
	acks    []timedAck
	changed chan struct{}
	fails   failures
	done    chan struct{}
	stopped sync.WaitGroup
	once    sync.Once
}

type timedAck struct{ sent, acked time.Time }

// retryPause is how long the appender waits before it tries a log again
// after an error.
const retryPause = 20 * time.Millisecond

func startAppender(c *tern.Client, name string) *appender {
	ap := &appender{changed: make(chan struct{}), done: make(chan struct{})}
	ap.stopped.Go(func() {
		payload := make([]byte, 1<<10)
		var w *tern.Writer
		defer func() {
			if w != nil {
				w.Close()
			}
		}()
		for {
			select {
			case <-ap.done:
				return
			default:
			}
			var err error
			if w == nil {
				octx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var l *tern.Log
				if l, err = c.OpenLog(octx, name); err == nil {
					w, err = l.OpenWriter(octx)
				}
				cancel()
				if err != nil {
					ap.fail("open", err)
				}
			}
			if err == nil {
				sent := time.Now()
				actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err = w.Append(actx, tern.Entry{Payload: payload})
				cancel()
				if err == nil {
					ap.add(timedAck{sent, time.Now()})
					continue
				}
				w.Close()
				w = nil
				ap.fail("append", err)
			}
			select {
			case <-ap.done:
			case <-time.After(retryPause):
			}
		}
	})
	return ap
}

func (ap *appender) add(a timedAck) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.acks = append(ap.acks, a)
	close(ap.changed)
	ap.changed = make(chan struct{})
}

func (ap *appender) fail(step string, err error) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.fails.add(failures{n: 1, classes: map[string]int64{errorClass(step, err): 1}})
	if ap.fails.first == nil && !errors.Is(err, tern.ErrClosed) {
		ap.fails.first = err
	}
}

func (ap *appender) failed() failures {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return ap.fails
}

// ackedAfter waits until n appends sent after t are acknowledged, and
// returns when the first of them was.
func (ap *appender) ackedAfter(t time.Time, n int, wait time.Duration) (time.Time, error) {
	deadline := time.After(wait)
	for {
		ap.mu.Lock()
		var first time.Time
		count := 0
		for i := len(ap.acks) - 1; i >= 0 && !ap.acks[i].sent.Before(t); i-- {
			first, count = ap.acks[i].acked, count+1
		}
		changed := ap.changed
		ap.mu.Unlock()
		if count >= n {
			return first, nil
		}
		select {
		case <-changed:
		case <-deadline:
			// The failures now: changed tells acknowledgements only.
			fails := ap.failed()
			return time.Time{}, fmt.Errorf("%d appends acknowledged within %v, want %d (%s; the first error: %v)", count, wait, n, fails.describe(), fails.first)
		}
	}
}

// stop ends the appends and waits for the one in flight.
func (ap *appender) stop() {
	ap.once.Do(func() { close(ap.done) })
	ap.stopped.Wait()
}

// supervise restarts the nodes but killed that exit on their own, as a
// service manager restarts a tern serve that lost its lease (on a loaded
// machine, a node may not renew a short --node-ttl in time, and exits):
// with fewer than the ensemble's nodes left, no node could serve the log
// again. The function it returns stops it, once any restart under way is
// done, and lists the nodes it restarted.
func (c *benchCluster) supervise(ctx context.Context, killed *benchNode) func() []string {
	stop, stopped := make(chan struct{}), make(chan struct{})
	var restarted []string
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, n := range c.exitedBut(killed) {
				restarted = append(restarted, n.id)
				if err := c.start(ctx, n); err != nil {
					return // exited() tells it
				}
			}
		}
	}()
	return func() []string {
		close(stop)
		<-stopped
		return restarted
	}
}

// exitedBut returns the nodes other than killed whose process has exited.
func (c *benchCluster) exitedBut(killed *benchNode) []*benchNode {
	var out []*benchNode
	for _, n := range c.nodes {
		select {
		case <-n.done:
			if n != killed {
				out = append(out, n)
			}
		default:
		}
	}
	return out
}

// exited says which nodes but killed have exited on their own, as a node
// that lost its lease does (its lease not renewed within --node-ttl, on a
// loaded machine), with the last line of each one's log: with too few
// nodes left, no other node can serve the log.
func (c *benchCluster) exited(killed *benchNode) string {
	var parts []string
	for _, n := range c.exitedBut(killed) {
		last := "no log"
		if b, err := os.ReadFile(n.logFile); err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			last = lines[len(lines)-1]
		}
		parts = append(parts, fmt.Sprintf("node %s exited on its own, its log ending %q", n.id, last))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// keepLogs is for a fail-over that did not complete, whose cause is in the
// nodes: it makes the nodes that run print their goroutines to their logs
// (SIGQUIT, on which the Go runtime dumps them and exits), then copies
// every node's log out of the run's directory, which is removed, into a new
// directory under the system's temporary one, and says where.
func (c *benchCluster) keepLogs() string {
	for _, n := range c.nodes {
		select {
		case <-n.done:
		default:
			n.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-n.done:
			case <-time.After(10 * time.Second):
			}
		}
	}
	dir, err := os.MkdirTemp("", "tern-failover-logs-")
	if err != nil {
		return fmt.Sprintf("the nodes' logs, with their goroutines, are lost: %v", err)
	}
	for _, n := range c.nodes {
		b, err := os.ReadFile(n.logFile)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(n.logFile)), b, 0o644)
		}
		if err != nil {
			return fmt.Sprintf("the nodes' logs, with their goroutines, are partly in %s: %v", dir, err)
		}
	}
	return "the nodes' logs, with their goroutines, are in " + dir
}
