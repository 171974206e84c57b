package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/check"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/miniotest"
)

// The torture tests run real tern serve processes under a steady workload
// (pipelined appends, a tail reader, a subscriber, truncations and writers
// fencing each other) while a schedule drawn from a seed injects faults. Every
// operation goes into a check.History; once the faults are healed the logs
// are read in full and the history checked: nothing acknowledged lost,
// duplicated, reordered or changed, no cursor moving backwards, no append of
// a fenced writer acknowledged.
//
// TERN_TORTURE_DURATION sets how long faults are injected (default 20s, the
// CI run); TERN_SEED replays a schedule; TERN_TORTURE_JSON appends each
// run's figures to a file as a JSON line. `make torture` runs them long.

// torture is one run: the schedule, the history and the figures.
type torture struct {
	t        *testing.T
	seed     uint64
	rng      *rand.Rand // the schedule; used by the test goroutine only
	duration time.Duration
	h        *check.History

	mu           sync.Mutex
	injected     map[string]int  // faults by kind
	recoveryFrom time.Time       // when the last recovery started
	recoveries   []time.Duration // from there to the next acknowledged append invoked after it
	waiting      bool            // a recovery is being timed
	progress     map[string]tern.Offset
	// unknowns counts the appends whose outcome the application did not
	// learn, by why: the writer's retries end only at a newer writer
	// (fenced) or at the Wait's deadline.
	unknowns map[string]int

	supervise func() // restarts the processes that exited; nil if none may
}

func newTorture(t *testing.T) *torture {
	d := 20 * time.Second
	if s := os.Getenv("TERN_TORTURE_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("TERN_TORTURE_DURATION=%q: %v", s, err)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TERN_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TERN_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d: TERN_SEED=%d replays this run's schedule of faults", seed, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed with seed %d: TERN_SEED=%d go test ./test/e2e -run '^%s$' replays the schedule", seed, seed, t.Name())
		}
	})
	return &torture{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed>>32|1)), duration: d, h: check.New(),
		injected: map[string]int{}, progress: map[string]tern.Offset{}, unknowns: map[string]int{},
	}
}

// between returns a duration drawn uniformly from [lo, hi).
func (tt *torture) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(tt.rng.Int64N(int64(hi-lo)))
}

// fault is a kind of fault: inject starts it, and returns what heals it.
type fault struct {
	name   string
	inject func() (heal func())
}

// s3Errors is the fault of an object store that answers 30% to 100% of
// the requests with errors: before they reach it, or with after, once they
// took effect.
func (tt *torture) s3Errors(s3 *s3Faults, after bool) fault {
	name := "object store errors, request lost"
	if after {
		name = "object store errors, answer lost"
	}
	return fault{name, func() func() {
		s3.fail(300+tt.rng.Int32N(701), after)
		return func() { tt.add("object store requests failed", s3.heal()) }
	}}
}

// run injects faults drawn from the schedule, one at a time, for the
// run's duration, then heals the last. Before each and at the end,
// supervise (if not nil) restarts what exited, as a service manager would. It runs on the test
// goroutine.
func (tt *torture) run(faults []fault, supervise func()) {
	tt.supervise = supervise
	end := time.Now().Add(tt.duration)
	for time.Now().Before(end) {
		time.Sleep(tt.between(300*time.Millisecond, 1500*time.Millisecond))
		if supervise != nil {
			supervise()
		}
		f := faults[tt.rng.IntN(len(faults))]
		tt.count(f.name)
		heal := f.inject()
		time.Sleep(tt.between(200*time.Millisecond, 2*time.Second))
		heal()
	}
	if supervise != nil {
		supervise()
	}
}

// count counts one more fault, or event, of a kind.
func (tt *torture) count(kind string) { tt.add(kind, 1) }

// add counts n more faults, or events, of a kind.
func (tt *torture) add(kind string, n int64) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.injected[kind] += int(n)
}

// recovering starts timing a recovery: after the kill -9 of the node
// serving a log, or the restart of a killed standalone server. The next
// append invoked after it and acknowledged ends it.
func (tt *torture) recovering() {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.recoveryFrom, tt.waiting = time.Now(), true
}

func (tt *torture) acked(invoked time.Time, log string, off tern.Offset) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.waiting && invoked.After(tt.recoveryFrom) {
		tt.recoveries = append(tt.recoveries, time.Since(tt.recoveryFrom))
		tt.waiting = false
	}
	tt.progress[log] = max(tt.progress[log], off+1)
}

// workload runs on each log until ctx ends: a writer appending pipelined,
// a reader following the tail, a subscriber acknowledging what it gets,
// and truncations behind both.
type workload struct {
	tt   *torture
	log  string
	addr func() string // the server a new handle's client starts at
	meta *meta.Etcd    // where the subscription's committed cursor is read

	mu        sync.Mutex
	tailNext  tern.Offset // where the tail reader reads next
	subAcked  tern.Offset // the subscriber's last acknowledgement + 1
	truncates int
}

const (
	workSub      = "torture"
	appendsPerS  = 1500 // per log: enough to stress, few enough to check a long run
	appendWindow = 16   // appends in flight
	opTimeout    = 10 * time.Second
)

// open returns a handle on the log through a client of its own. It runs
// on the test goroutine.
func (w *workload) open() *tern.Log {
	t := w.tt.t
	t.Helper()
	l, err := openClient(t, w.addr()).OpenLog(deadline(t), w.log)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// cursor reads the subscription's committed cursor from the metadata.
func (w *workload) cursor(ctx context.Context) (uint64, error) {
	sub, err := w.meta.Sub(ctx, w.log, workSub)
	return sub.Cursor, err
}

// start opens a handle for each part of the workload (on the test
// goroutine: open may fail the test) and starts them.
func (w *workload) start(ctx context.Context, wg *sync.WaitGroup) {
	for _, part := range []func(context.Context, *tern.Log){w.write, w.tail, w.subscribe, w.maintain} {
		l := w.open()
		wg.Go(func() { part(ctx, l) })
	}
}

// write appends unique values, appendWindow in flight, through one writer
// until it fails, then opens another (fencing the failed one's epoch).
func (w *workload) write(ctx context.Context, l *tern.Log) {
	n := 0
	begin := time.Now()
	for ctx.Err() == nil {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		wr, err := l.OpenWriter(octx)
		cancel()
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		w.tt.h.Fence(w.log, wr.Epoch()).Done() // the open has returned
		type inFlight struct {
			a       *check.Append
			p       *tern.Pending
			invoked time.Time
		}
		queue := make(chan inFlight, appendWindow)
		broken := make(chan struct{})
		var waiter sync.WaitGroup
		waiter.Go(func() {
			failed := false
			for f := range queue {
				wctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				off, err := f.p.Wait(wctx)
				cancel()
				if err != nil {
					f.a.Unknown(err)
					w.tt.unknown(err)
					if !failed {
						failed = true
						close(broken)
					}
					continue
				}
				f.a.OK(uint64(off))
				w.tt.acked(f.invoked, w.log, off)
			}
		})
	appending:
		for ctx.Err() == nil {
			// Pace the appends: n appends take at least n/appendsPerS.
			if ahead := time.Duration(n)*time.Second/appendsPerS - time.Since(begin); ahead > 0 {
				sleep(ctx, ahead)
			}
			v := fmt.Sprintf("%s-%d", w.log, n)
			n++
			a := w.tt.h.Invoke(w.log, wr.Epoch(), v)
			f := inFlight{a: a, invoked: time.Now(), p: wr.AppendAsync(tern.Entry{Payload: []byte(v)})}
			select {
			case queue <- f:
			case <-broken:
				queue <- f
				break appending
			}
		}
		close(queue)
		waiter.Wait()
		wr.Close()
	}
}

// tail follows the log from its start, reading again from where it was
// after every error.
func (w *workload) tail(ctx context.Context, l *tern.Log) {
	r := w.tt.h.Reader(w.log, "tail")
	var next tern.Offset
	for ctx.Err() == nil {
		rd, err := l.OpenReader(ctx, next)
		var te *tern.TruncatedError
		if errors.As(err, &te) {
			next = tern.Offset(te.Start)
			continue
		}
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		r.Restart(uint64(next))
		for {
			es, err := rd.NextBatch(ctx, 256)
			if err != nil {
				break
			}
			for _, e := range es {
				r.Saw(uint64(e.Offset), string(e.Payload))
				next = e.Offset + 1
			}
			w.mu.Lock()
			w.tailNext = next
			w.mu.Unlock()
		}
		rd.Close()
	}
}

// subscribe consumes the subscription, acknowledging every entry; after an
// error it subscribes again, from the committed cursor.
func (w *workload) subscribe(ctx context.Context, l *tern.Log) {
	r := w.tt.h.Subscriber(w.log, workSub)
	for ctx.Err() == nil {
		first := true
		// A subscriber that rides through a restart starts a new stream
		// from the committed cursor: entries after it come again.
		reconnected := tern.WithReconnectNotify(func(err error) {
			if err == nil {
				first = true
			}
		})
		s, err := l.Subscribe(ctx, workSub, reconnected)
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		for {
			es, err := s.NextBatch(ctx, 256)
			var te *tern.TruncatedError
			if errors.As(err, &te) {
				// Behind a truncation (the subscription does not pin
				// the log): go on from the start.
				sctx, cancel := context.WithTimeout(ctx, opTimeout)
				if l.Seek(sctx, workSub, tern.Offset(te.Start)) == nil {
					w.tt.h.Seek(w.log, workSub, te.Start)
				}
				cancel()
				break
			}
			if err != nil {
				break
			}
			for _, e := range es {
				if first {
					r.Restart(uint64(e.Offset))
					first = false
				}
				r.Saw(uint64(e.Offset), string(e.Payload))
			}
			last := es[len(es)-1].Offset
			if s.Ack(last) != nil {
				break
			}
			w.mu.Lock()
			w.subAcked = last + 1
			w.mu.Unlock()
		}
		s.Close()
	}
}

// maintain observes the subscription's committed cursor, and now and then
// truncates the log below where both readers are.
func (w *workload) maintain(ctx context.Context, l *tern.Log) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if c, err := w.cursor(cctx); err == nil {
			w.tt.h.Cursor(w.log, workSub, c)
		}
		cancel()
		if i%12 != 11 { // about every 3 s
			continue
		}
		w.mu.Lock()
		below := min(w.tailNext, w.subAcked)
		w.mu.Unlock()
		if below < 200 {
			continue
		}
		before := below - 100
		// Recorded before the call: a truncation whose answer is lost may
		// still have happened.
		w.tt.h.Truncated(w.log, uint64(before))
		tctx, cancel := context.WithTimeout(ctx, opTimeout)
		if l.Truncate(tctx, before) == nil {
			w.mu.Lock()
			w.truncates++
			w.mu.Unlock()
		}
		cancel()
	}
}

// fence opens a writer on the log through another handle, appends a few
// entries with it and closes it: the workload's writer is fenced, and
// opens a new one in turn.
func (w *workload) fence(l *tern.Log) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	wr, err := l.OpenWriter(ctx)
	if err != nil {
		return
	}
	defer wr.Close()
	w.tt.h.Fence(w.log, wr.Epoch()).Done() // the open has returned
	for i := range 3 {
		v := fmt.Sprintf("%s-fence-%d-%d", w.log, wr.Epoch(), i)
		a := w.tt.h.Invoke(w.log, wr.Epoch(), v)
		off, err := wr.Append(ctx, tern.Entry{Payload: []byte(v)})
		if err != nil {
			a.Unknown(err)
			w.tt.unknown(err)
			return
		}
		a.OK(uint64(off))
	}
}

// finish stops the workload, reads every log in full through a client
// of its own and checks the history.
func (tt *torture) finish(cancel context.CancelFunc, wg *sync.WaitGroup, addr string, ws []*workload) {
	t := tt.t
	t.Helper()
	// Let every log serve appends again after the last fault, so that
	// nothing is left unrecovered when the workload stops.
	for _, w := range ws {
		tt.mu.Lock()
		at := tt.progress[w.log]
		tt.mu.Unlock()
		until := time.Now().Add(waitTimeout)
		for {
			tt.mu.Lock()
			moved := tt.progress[w.log] > at+100
			tt.mu.Unlock()
			if moved {
				break
			}
			if tt.supervise != nil {
				tt.supervise()
			}
			if time.Now().After(until) {
				t.Fatalf("log %s acknowledged nothing within %v of the last fault", w.log, waitTimeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cancel()
	wg.Wait()

	c := openClient(t, addr)
	ctx := deadline(t)
	for _, w := range ws {
		l, err := c.OpenLog(ctx, w.log)
		if err != nil {
			t.Fatal(err)
		}
		info, err := l.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var values []string
		for _, e := range readAll(t, l, info.Start, info.End) {
			values = append(values, string(e.Payload))
		}
		tt.h.Final(w.log, uint64(info.Start), values)
	}
	rep := tt.h.Check()
	tt.report(rep, ws)
	if rep.Anomalies() > 0 {
		t.Errorf("the history has anomalies (seed %d):\n%s", tt.seed, rep)
	}
}

// unknown counts an append whose outcome the application did not learn.
func (tt *torture) unknown(err error) {
	why := "other"
	switch {
	case errors.Is(err, tern.ErrFenced):
		why = "fenced"
	case errors.Is(err, context.DeadlineExceeded):
		why = "wait deadline"
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.unknowns[why]++
	if why == "other" && tt.unknowns[why] == 1 {
		tt.t.Logf("first append of unknown outcome for another reason: %v", err)
	}
}

// report logs the run's figures, and appends them to $TERN_TORTURE_JSON.
func (tt *torture) report(rep *check.Report, ws []*workload) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	rec := slices.Clone(tt.recoveries)
	slices.Sort(rec)
	pct := func(p float64) time.Duration {
		if len(rec) == 0 {
			return 0
		}
		return rec[min(len(rec)-1, int(p*float64(len(rec))))]
	}
	truncates := 0
	for _, w := range ws {
		w.mu.Lock()
		truncates += w.truncates
		w.mu.Unlock()
	}
	var kinds []string
	for k, n := range tt.injected {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	tt.t.Logf("%s, %v of faults (%s), %d truncations; recovery: p50 %v, p99 %v over %d; unknown outcomes by why: %v\n%s",
		tt.t.Name(), tt.duration, strings.Join(kinds, ", "), truncates, pct(0.5), pct(0.99), len(rec), tt.unknowns, rep)
	path := os.Getenv("TERN_TORTURE_JSON")
	if path == "" {
		return
	}
	line, err := json.Marshal(map[string]any{
		"scenario": tt.t.Name(), "seed": tt.seed, "duration": tt.duration.String(), "faults": tt.injected,
		"truncations": truncates, "recovery_p50_ms": pct(0.5).Milliseconds(), "recovery_p99_ms": pct(0.99).Milliseconds(),
		"recoveries": len(rec), "anomalies": rep.Anomalies(), "check": rep, "unknown_by_why": tt.unknowns,
	})
	if err != nil {
		tt.t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		tt.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		tt.t.Fatal(err)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// pause stops a process with SIGSTOP; the returned function resumes it.
func pause(t *testing.T, s *server) func() {
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
}

// openEtcdStore opens the metadata store at the endpoints of an etcd, for
// reading cursors.
func openEtcdStore(t *testing.T, endpoints ...string) *meta.Etcd {
	t.Helper()
	st, err := meta.OpenEtcd(t.Context(), meta.EtcdOptions{Endpoints: endpoints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestTortureStandalone runs the workload on a local log and an object log
// of one tern serve (its embedded etcd, MinIO for the objects) while the
// schedule kills it with -9, pauses it, stops MinIO or makes it answer
// errors, and fences the writers.
func TestTortureStandalone(t *testing.T) {
	tt := newTorture(t)
	m := miniotest.Start(t)
	s3 := startS3Faults(t, m.Endpoint)
	env := []string{"AWS_ACCESS_KEY_ID=" + m.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.SecretKey}
	data := t.TempDir()
	srv := startServerEnv(t, data, env, "--storage", "s3://"+m.Bucket+"/torture?endpoint="+s3.Endpoint+"&tls=false")

	// The embedded etcd keeps its socket (or ports) across restarts, in its
	// directory.
	eps, err := meta.EmbeddedEndpoints(filepath.Join(data, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	st := openEtcdStore(t, eps...)

	setup := openClient(t, srv.addr)
	ctx := deadline(t)
	ws := []*workload{}
	for _, lc := range []struct {
		name string
		opts tern.LogOptions
	}{
		{"local", tern.LogOptions{SegmentBytes: 256 << 10}},
		{"object", tern.LogOptions{Mode: tern.ModeObject, SegmentBytes: 256 << 10}},
	} {
		l, err := setup.CreateLog(ctx, lc.name, lc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.CreateSubscription(ctx, workSub, tern.SubOptions{}); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, &workload{tt: tt, log: lc.name, addr: func() string { return srv.addr }, meta: st})
	}
	fencer := openClient(t, srv.addr)
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range ws {
		w.start(runCtx, &wg)
	}

	tt.run([]fault{
		{"kill -9", func() func() {
			srv.kill9()
			time.Sleep(tt.between(0, time.Second))
			srv.restart()
			tt.recovering() // the log cannot recover before the server is back
			return func() {}
		}},
		{"pause", func() func() { return pause(t, srv) }},
		{"object store down", func() func() {
			m.Stop()
			return func() { m.Restart(t) }
		}},
		tt.s3Errors(s3, false),
		tt.s3Errors(s3, true),
		{"fence", func() func() {
			w := ws[tt.rng.IntN(len(ws))]
			l, err := fencer.OpenLog(context.Background(), w.log)
			if err == nil {
				w.fence(l)
			}
			return func() {}
		}},
	}, nil)
	tt.finish(cancel, &wg, srv.addr, ws)
}

// TestTortureCluster runs the workload on a quorum log of four tern serve
// nodes, each behind a proxy, sharing an etcd of three members and a
// MinIO, while the schedule kills nodes with -9 (the log's owner among
// them), pauses them, cuts them off or slows their network, stops MinIO or
// makes it answer errors, kills or pauses etcd members, or all of them, or
// cuts the nodes off etcd, and fences the writers.
func TestTortureCluster(t *testing.T) {
	tt := newTorture(t)
	c := startProxiedCluster(t, 4)
	ids := []string{"n0", "n1", "n2", "n3"}
	st := openEtcdStore(t, c.etcdMembers.Endpoints()...)

	const name = "quorum"
	ctx := deadline(t)
	setup := openClient(t, c.proxies["n0"].Listen)
	l, err := setup.CreateLog(ctx, name, tern.LogOptions{Mode: tern.ModeQuorum, SegmentBytes: 256 << 10, SegmentAge: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateSubscription(ctx, workSub, tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each handle's client starts at another node, and follows the log
	// wherever it is served.
	next := 0
	w := &workload{tt: tt, log: name, meta: st, addr: func() string {
		next++
		return c.proxies[ids[next%len(ids)]].Listen
	}}
	fencer := w.open()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	w.start(runCtx, &wg)

	anyNode := func() string { return ids[tt.rng.IntN(len(ids))] }
	// A node may have exited since the schedule last restarted it (a lost
	// lease): signals go to one that runs.
	running := func(id string) *server {
		if s := c.nodes[id]; !s.running() {
			s.restart()
		}
		return c.nodes[id]
	}
	// A node that could not renew its lease within --node-ttl (etcd down,
	// or the node paused) exits, to be restarted.
	supervise := func() {
		for _, id := range ids {
			if !c.nodes[id].running() {
				tt.count("restart after exit")
				c.nodes[id].restart()
			}
		}
	}
	tt.run([]fault{
		{"kill -9 of a node", func() func() {
			id := anyNode()
			running(id).kill9()
			time.Sleep(tt.between(0, time.Second))
			c.nodes[id].restart()
			return func() {}
		}},
		{"kill -9 of the owner", func() func() {
			id := ""
			for deadline := time.Now().Add(waitTimeout); id == ""; {
				// Nodes that lost their lease to the last fault may be
				// exiting: the log has an owner once they are back.
				supervise()
				if id = c.ownerNow(t); id == "" && time.Now().After(deadline) {
					t.Fatalf("no node served the log within %v", waitTimeout)
				}
				time.Sleep(50 * time.Millisecond)
			}
			running(id).kill9()
			tt.recovering()
			time.Sleep(tt.between(0, time.Second))
			c.nodes[id].restart()
			return func() {}
		}},
		{"pause", func() func() { return pause(t, running(anyNode())) }},
		{"partition", func() func() {
			id := anyNode()
			c.partition(t, id)
			return func() { c.heal(t, id) }
		}},
		{"network delay", func() func() {
			id := anyNode()
			c.delay(t, id, tt.between(5*time.Millisecond, 100*time.Millisecond))
			return func() { c.undelay(t, id) }
		}},
		{"object store down", func() func() {
			c.minio.Stop()
			return func() { c.minio.Restart(t) }
		}},
		tt.s3Errors(c.s3, false),
		tt.s3Errors(c.s3, true),
		{"etcd unreachable from the nodes", func() func() {
			for _, p := range c.etcdProxies {
				blackhole(t, p)
			}
			return func() {
				for _, p := range c.etcdProxies {
					unblackhole(t, p)
				}
			}
		}},
		{"kill -9 of an etcd member", func() func() {
			i := tt.rng.IntN(len(c.etcdProxies))
			c.etcdMembers.kill9(i)
			return func() { c.etcdMembers.start(i) }
		}},
		{"pause of an etcd member", func() func() {
			return c.etcdMembers.pause(tt.rng.IntN(len(c.etcdProxies)))
		}},
		{"pause of every etcd member", func() func() {
			var resume []func()
			for i := range c.etcdProxies {
				resume = append(resume, c.etcdMembers.pause(i))
			}
			return func() {
				for _, r := range resume {
					r()
				}
			}
		}},
		{"kill -9 of every etcd member", func() func() {
			c.stopEtcd()
			time.Sleep(tt.between(0, time.Second))
			return func() { c.startEtcd(t) }
		}},
		{"fence", func() func() {
			w.fence(fencer)
			return func() {}
		}},
	}, supervise)
	tt.finish(cancel, &wg, c.proxies["n0"].Listen, []*workload{w})
}

// ownerNow returns the ID of the node that serves the only log, or "" if
// none does now.
func (c *testCluster) ownerNow(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	resp, err := c.etcd.Get(ctx, "/tern/owners/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// delay adds latency to every byte to and from node id.
func (c *proxiedCluster) delay(t *testing.T, id string, d time.Duration) {
	t.Helper()
	for _, dir := range partitionDirections {
		toxic := fmt.Sprintf(`{"name": "delay-%s", "type": "latency", "stream": %q, "attributes": {"latency": %d, "jitter": %d}}`,
			dir, dir, d.Milliseconds(), d.Milliseconds()/2)
		if _, err := c.proxies[id].Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			t.Fatalf("delay %s (%s): %v", id, dir, err)
		}
	}
}

// undelay removes the latency that delay added.
func (c *proxiedCluster) undelay(t *testing.T, id string) {
	t.Helper()
	for _, dir := range partitionDirections {
		if err := c.proxies[id].Toxics.RemoveToxic(t.Context(), "delay-"+dir); err != nil {
			t.Fatalf("undelay %s (%s): %v", id, dir, err)
		}
	}
}
