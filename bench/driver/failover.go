package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
)

// failoverName is the log of tern bench failover.
const failoverName = "failover"

// Failover starts a cluster cl under env.Dir, creates a quorum log and
// appends 1 KiB entries to it, one at a time, through a node that does not
// serve it; then, kills times, kills the node that serves the log (kill -9),
// times from the kill to the acknowledgement of the first append sent
// after it, and starts the node again. The result's latencies are those
// times; its errors, the appends that failed meanwhile.
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

	hist := loadgen.NewHistogram()
	r := &loadgen.Result{System: "tern", Version: env.Version, Variant: fmt.Sprintf("%s, ttl %v", cl.variant(), cl.TTL),
		Workload: failoverName, Started: time.Now().UTC()}
	for k := range kills {
		d, failed, err := c.failover(ctx, cl.TTL)
		if err != nil {
			return nil, fmt.Errorf("kill %d of %d: %w", k+1, kills, err)
		}
		hist.Record(d)
		r.Errors += failed.n
		if r.FirstError == "" && failed.first != nil {
			r.FirstError = failed.first.Error()
		}
		fmt.Fprintf(env.Progress, "kill %d of %d: the next append was acknowledged %v after it\n", k+1, kills, d.Round(time.Millisecond))
	}
	r.Seconds = time.Since(r.Started).Seconds()
	r.Latency, r.Percentiles = hist.Summary()
	r.Spec, err = loadgen.Spec{Name: failoverName, Kind: loadgen.KindFailover, EntryBytes: 1 << 10, Count: kills,
		Duration: time.Duration(r.Seconds * float64(time.Second))}.Normalize()
	if err != nil {
		return nil, err
	}
	r.SetExtra("node_ttl_s", cl.TTL.Seconds()) // the kills are Spec.Count
	r.Notes = append(r.Notes, fmt.Sprintf("fail-over over %d kills: p50 %s, max %s; the latency columns are the fail-over times, the errors the appends that failed meanwhile (none acknowledged)",
		kills, loadgen.Micros(r.Latency.P50), loadgen.Micros(r.Latency.Max)))
	return r, nil
}

// failures counts the appends that failed, and keeps the first error.
type failures struct {
	n     int64
	first error
}

// failover kills the node serving the log once, under a steady append,
// and returns the time from the kill to the acknowledgement of the first
// append sent after it; then starts the node again.
func (c *benchCluster) failover(ctx context.Context, ttl time.Duration) (time.Duration, failures, error) {
	wait := ttl + 2*time.Minute // the bound of every wait here
	var fails failures
	for _, seed := range c.nodes {
		// The client's first address must be a node that stays up: one
		// that does not serve the log once the appends have settled.
		client, err := tern.Open(ctx, tern.Options{Server: seed.addr})
		if err != nil {
			return 0, fails, err
		}
		d, owner, err := c.killOwner(ctx, client, seed, wait, &fails)
		client.Close()
		if err != nil {
			return 0, fails, err
		}
		if owner == nil {
			continue // the seed serves the log: try the next
		}
		return d, fails, c.start(ctx, owner)
	}
	return 0, fails, errors.New("every node served the log in turn")
}

// killOwner appends to the log through client until the appends settle,
// then kills the node that serves it, and returns the time from the kill
// to the first acknowledgement of an append sent after it, and the node
// killed; or no node when the seed serves the log.
func (c *benchCluster) killOwner(ctx context.Context, client *tern.Client, seed *benchNode, wait time.Duration, fails *failures) (time.Duration, *benchNode, error) {
	ap := startAppender(client, failoverName)
	defer func() {
		ap.stop()
		f := ap.failed()
		fails.n += f.n
		if fails.first == nil {
			fails.first = f.first
		}
	}()
	// Appends flow through the owner, which has served the log for a
	// while, before it is killed.
	if _, err := ap.ackedAfter(time.Now(), 100, wait); err != nil {
		return 0, nil, fmt.Errorf("before the kill: %w", err)
	}
	owner, err := c.steadyOwner(ctx, wait)
	if err != nil || owner == seed {
		return 0, nil, err
	}
	if _, err := ap.ackedAfter(time.Now(), 100, wait); err != nil {
		return 0, nil, fmt.Errorf("before the kill: %w", err)
	}
	if now, err := c.owner(ctx); err != nil || now != owner {
		return 0, nil, fmt.Errorf("the log moved from node %s while appends settled: %v", owner.id, err)
	}
	killed := time.Now()
	c.kill9(owner)
	acked, err := ap.ackedAfter(killed, 1, wait)
	if err != nil {
		return 0, nil, fmt.Errorf("after the kill of node %s: %w", owner.id, err)
	}
	return acked.Sub(killed), owner, nil
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

// appender appends 1 KiB entries to a log, one at a time, until stopped,
// opening the log and a new writer whenever its writer fails, and
// remembers when each append that was acknowledged had been sent and
// acknowledged.
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
			}
			ap.fail(err)
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

func (ap *appender) fail(err error) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.fails.n++
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
		changed, fails := ap.changed, ap.fails
		ap.mu.Unlock()
		if count >= n {
			return first, nil
		}
		select {
		case <-changed:
		case <-deadline:
			return time.Time{}, fmt.Errorf("%d appends acknowledged within %v, want %d (%d failed; the first: %v)", count, wait, n, fails.n, fails.first)
		}
	}
}

// stop ends the appends and waits for the one in flight.
func (ap *appender) stop() {
	ap.once.Do(func() { close(ap.done) })
	ap.stopped.Wait()
}
