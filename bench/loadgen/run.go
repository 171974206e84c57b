package loadgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// RunOptions are how Run reports, as opposed to what it runs.
type RunOptions struct {
	// Progress gets a progress line every second while the run lasts
	// (nil: none).
	Progress io.Writer
	// PID is the process under test, for CPU time and peak memory; 0 means
	// this process (an embedded system).
	PID int
	// PIDs, when set, are more processes under test (the nodes of a
	// cluster, with PID one of them): their CPU times and peak memories
	// add up.
	PIDs []int
	// StorageDir is measured for Result.StorageBytes ("": not measured).
	StorageDir string
}

// drainTimeout bounds the wait for appends still in flight when a run ends,
// and for a reader to deliver what was acknowledged: a system that stalls
// longer is reported as failing those operations. Tests shorten it.
var drainTimeout = 60 * time.Second

// errDone stops a reader that has read what it was asked to.
var errDone = errors.New("loadgen: done")

// Run drives t through spec and returns what it measured. The Result's
// System, Variant and Version are left for the caller. Failed operations do
// not fail the run: they are counted in Result.Errors. Run fails when the
// workload cannot run on t at all, or when ctx ends.
func Run(ctx context.Context, spec Spec, t Target, o RunOptions) (*Result, error) {
	spec, err := spec.Normalize()
	if err != nil {
		return nil, err
	}
	if spec.Kind == KindFailover {
		return nil, fmt.Errorf("loadgen: workload %q kills nodes: tern bench failover runs it", spec.Name)
	}
	if spec.Kind != KindAppend {
		if _, ok := t.(Reader); !ok {
			return nil, fmt.Errorf("loadgen: workload %q reads back, and this target cannot read", spec.Name)
		}
	}
	r := &Result{Workload: spec.Name, Spec: spec, Started: time.Now().UTC()}
	switch spec.Kind {
	case KindAppend:
		err = runAppend(ctx, spec, t, o, r)
	case KindEndToEnd:
		err = runEndToEnd(ctx, spec, t, o, r)
	case KindCatchUp:
		err = runCatchUp(ctx, spec, t, o, r)
	case KindPubSub:
		err = runPubSub(ctx, spec, t, o, r)
	}
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if r.Seconds > 0 {
		r.MBPerSec = float64(r.Bytes) / 1e6 / r.Seconds
		r.EntriesPerSec = float64(r.Entries) / r.Seconds
	}
	if o.StorageDir != "" && r.StorageBytes == 0 {
		r.StorageBytes = DirBytes(o.StorageDir)
	}
	if n, ok := t.(Noter); ok {
		r.Notes = append(r.Notes, n.Notes()...)
	}
	return r, nil
}

func runAppend(ctx context.Context, spec Spec, t Target, o RunOptions, r *Result) error {
	l, err := newLoad(spec, t)
	if err != nil {
		return err
	}
	m := StartProc(o.PID, o.PIDs...)
	l.run(ctx, o.Progress)
	l.finish(r, m)
	return nil
}

func runEndToEnd(ctx context.Context, spec Spec, t Target, o RunOptions, r *Result) error {
	l, err := newLoad(spec, t)
	if err != nil {
		return err
	}
	l.stamp = true
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	delivered := NewHistogram()
	var seen atomic.Int64
	var readers sync.WaitGroup
	ready := make(chan struct{}, spec.Logs)
	readErr := make(chan error, spec.Logs)
	for log := range spec.Logs {
		readers.Go(func() {
			var once sync.Once
			err := t.(Reader).Read(rctx, log, false, func() { once.Do(func() { ready <- struct{}{} }) }, func(e []byte) error {
				now := time.Now()
				if len(e) < stampBytes {
					return fmt.Errorf("loadgen: read a %d-byte entry, shorter than its timestamp", len(e))
				}
				intended := time.Unix(0, int64(binary.LittleEndian.Uint64(e)))
				if !intended.Before(l.start.Add(time.Duration(l.fromNS))) {
					delivered.Record(now.Sub(intended))
				}
				seen.Add(1)
				return nil
			})
			if err != nil && rctx.Err() == nil {
				readErr <- fmt.Errorf("loadgen: reader of log %d: %w", log, err)
			}
		})
	}
	for range spec.Logs {
		select {
		case <-ready:
		case err := <-readErr:
			return err
		case <-time.After(drainTimeout):
			return fmt.Errorf("loadgen: readers not positioned at the end after %v", drainTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m := StartProc(o.PID, o.PIDs...)
	l.run(ctx, o.Progress)
	deadline := time.Now().Add(drainTimeout)
	for seen.Load() < l.ackedAll.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	readers.Wait()
	if missing := l.ackedAll.Load() - seen.Load(); missing > 0 {
		l.fail(fmt.Errorf("%d acknowledged entries not delivered to the reader within %v", missing, drainTimeout))
	}
	appended := l.hist
	l.hist = delivered
	l.finish(r, m)
	al, _ := appended.Summary()
	r.SetExtra("append_p50_us", al.P50)
	r.SetExtra("append_p99_us", al.P99)
	r.SetExtra("append_p999_us", al.P999)
	select {
	case err := <-readErr:
		return err
	default:
	}
	return nil
}

func runCatchUp(ctx context.Context, spec Spec, t Target, o RunOptions, r *Result) error {
	// Write the data as fast as the target takes it, unmeasured.
	w := spec
	w.Count = int(spec.TotalBytes / int64(spec.EntryBytes))
	w.Batch = max(spec.Batch, (1<<20)/spec.EntryBytes)
	w.Producers, w.InFlight, w.Rate = 4, 0, 0
	l, err := newLoad(w, t)
	if err != nil {
		return err
	}
	t0 := time.Now()
	l.run(ctx, o.Progress)
	if n := l.errs.Load(); n > 0 {
		return fmt.Errorf("loadgen: %d appends of the data to read failed: %s", n, *l.firstErr.Load())
	}
	written := l.ackedAll.Load()
	r.SetExtra("write_s", time.Since(t0).Seconds())
	if o.StorageDir != "" {
		r.StorageBytes = DirBytes(o.StorageDir)
	}
	r.Notes = append(r.Notes, DropCaches())

	m := StartProc(o.PID, o.PIDs...)
	var n, bytes int64
	var first time.Duration
	t0 = time.Now()
	err = t.(Reader).Read(ctx, 0, true, func() {}, func(e []byte) error {
		if n == 0 {
			first = time.Since(t0)
		}
		n++
		bytes += int64(len(e))
		if n == written {
			return errDone
		}
		return nil
	})
	r.Seconds = time.Since(t0).Seconds()
	if !errors.Is(err, errDone) {
		return fmt.Errorf("loadgen: catch-up read stopped after %d of %d entries: %w", n, written, err)
	}
	r.Entries, r.Bytes = n, bytes
	r.Extra["first_entry_ms"] = float64(first.Microseconds()) / 1e3
	r.StopProc(m)
	return nil
}

func runPubSub(ctx context.Context, spec Spec, t Target, o RunOptions, r *Result) error {
	if _, ok := t.(AsyncAppender); spec.InFlight > 0 && !ok {
		spec.Producers, spec.InFlight = spec.InFlight, 0
		r.Notes = append(r.Notes, fmt.Sprintf("published by %d synchronous producers: the target has no asynchronous append", spec.Producers))
	}
	l, err := newLoad(spec, t)
	if err != nil {
		return err
	}
	m := StartProc(o.PID, o.PIDs...)
	t0 := time.Now()
	l.run(ctx, o.Progress)
	produce := time.Since(t0)
	if o.StorageDir != "" {
		r.StorageBytes = DirBytes(o.StorageDir)
	}
	want := l.ackedAll.Load()
	var n int64
	t1 := time.Now()
	err = t.(Reader).Read(ctx, 0, true, func() {}, func(e []byte) error {
		n++
		if n == want {
			return errDone
		}
		return nil
	})
	consume := time.Since(t1)
	if want > 0 && !errors.Is(err, errDone) {
		return fmt.Errorf("loadgen: consumed %d of %d entries: %w", n, want, err)
	}
	l.finish(r, m)
	r.Seconds = (produce + consume).Seconds()
	r.SetExtra("produce_s", produce.Seconds())
	r.SetExtra("consume_s", consume.Seconds())
	return nil
}

// DropCaches asks the kernel to drop the page cache, so that a catch-up
// read comes from the disk, and says whether it did.
func DropCaches() string {
	syncAll()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0); err != nil {
		return fmt.Sprintf("page cache not dropped (%v): the read may be served from memory", err)
	}
	return "page cache dropped before the read"
}

// stampBytes is the prefix of an end-to-end entry: its intended append
// time in Unix nanoseconds and a sequence number, little-endian.
const stampBytes = 16

// A load is the appending side of a run: producers on a schedule or in a
// closed loop, until a time or a count.
type load struct {
	spec  Spec
	t     Target
	async AsyncAppender
	pool  []byte
	// stamp makes every entry start with its intended time (e2e).
	stamp bool

	// start is when the run started; every other time of the load is in
	// nanoseconds after it, on the monotonic clock (since), which is read
	// once at each end of an append. The measured part is from fromNS to
	// endNS (math.MaxInt64 when the load is a count).
	start         time.Time
	fromNS, endNS int64
	// claimed counts entries handed out when the load is a count.
	claimed atomic.Int64

	hist     *Histogram
	entries  atomic.Int64 // measured, acknowledged
	lastDone atomic.Int64 // when the last measured ack came
	ackedAll atomic.Int64 // every acknowledged entry, warmup included
	errs     atomic.Int64
	firstErr atomic.Pointer[string]
	// undrained is set by a producer whose appends were not all done
	// drainTimeout after it stopped.
	undrained atomic.Bool
}

func newLoad(spec Spec, t Target) (*load, error) {
	l := &load{spec: spec, t: t, hist: NewHistogram()}
	if spec.InFlight > 0 {
		a, ok := t.(AsyncAppender)
		if !ok {
			return nil, fmt.Errorf("loadgen: workload %q appends asynchronously, and this target cannot", spec.Name)
		}
		l.async = a
	}
	// Entries are windows on a pool of random bytes, one after another
	// (see entry), so no two neighbours are alike and nothing compresses;
	// or on a pool of JSON-like records.
	l.pool = make([]byte, max(8<<20, 2*spec.EntryBytes))
	rng := rand.NewChaCha8([32]byte{'t', 'e', 'r', 'n'})
	if spec.Payload == PayloadJSON {
		fillJSON(l.pool, rand.New(rng))
	} else {
		rng.Read(l.pool)
	}
	return l, nil
}

// run appends until the spec's duration is over or its count is reached,
// and waits for what is in flight.
func (l *load) run(ctx context.Context, progress io.Writer) {
	l.start = time.Now()
	l.fromNS = int64(l.spec.Warmup)
	l.endNS = l.fromNS + int64(l.spec.Duration)
	var end time.Time
	if l.spec.Count > 0 {
		// Until the count, however long, all of it measured.
		l.fromNS, l.endNS = 0, math.MaxInt64
	} else {
		end = l.start.Add(time.Duration(l.endNS))
	}
	stop := make(chan struct{})
	var pg sync.WaitGroup
	if progress != nil {
		pg.Go(func() { l.progress(progress, stop) })
	}
	var producers sync.WaitGroup
	for p := range l.spec.Producers {
		producers.Go(func() { l.produce(ctx, p) })
	}
	// An asynchronous producer returns once its appends are done, or
	// drainTimeout after it stopped starting them.
	if !waitFor(&producers, end, ctx) || l.undrained.Load() {
		l.fail(fmt.Errorf("appends still unacknowledged %v after the run ended", drainTimeout))
	}
	close(stop)
	pg.Wait()
}

// waitFor waits for wg until drainTimeout after end (or after now, when
// end is zero), and reports whether it finished.
func waitFor(wg *sync.WaitGroup, end time.Time, ctx context.Context) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if end.IsZero() {
		select {
		case <-done:
			return true
		case <-ctx.Done():
			// The target was told; give it a moment to say so.
		}
		end = time.Now()
	}
	select {
	case <-done:
		return true
	case <-time.After(time.Until(end) + drainTimeout):
		return false
	}
}

func (l *load) produce(ctx context.Context, p int) {
	s := l.spec
	log := p % s.Logs
	var interval time.Duration
	if s.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(s.Producers) / s.Rate)
	}
	// Producers' schedules interleave rather than fire together.
	offset := time.Duration(p) * interval / time.Duration(s.Producers)
	var w *window
	if l.async != nil {
		w = newWindow(l, s.InFlight)
		defer func() {
			if !w.drain(time.Now().Add(drainTimeout)) {
				l.undrained.Store(true)
			}
			l.hist.Merge(w.hist)
		}()
	}
	batch := make([][]byte, s.Batch)
	next := uint64(p) * 7919
	for i := 0; ctx.Err() == nil; i++ {
		n := s.Batch
		if s.Count > 0 {
			claimed := l.claimed.Add(int64(n))
			if over := claimed - int64(s.Count); over > 0 {
				n -= int(over)
			}
			if n <= 0 {
				return
			}
		}
		var intended int64
		if interval > 0 {
			intended = int64(offset + time.Duration(i)*interval)
			if intended >= l.endNS {
				return
			}
			// Ahead of schedule, the append starts when the producer
			// wakes: the timer's lateness (hundreds of microseconds) is
			// the generator's, not the target's. Behind schedule, latency
			// runs from the scheduled time: the target held it back.
			if d := time.Duration(intended - l.since()); d > 0 {
				time.Sleep(d)
				intended = l.since()
			}
		} else {
			intended = l.since()
			if intended >= l.endNS {
				return
			}
		}
		for j := range n {
			batch[j] = l.entry(next, intended)
			next++
		}
		if w == nil {
			err := l.t.Append(ctx, log, batch[:n])
			l.record(l.hist, intended, n, err)
			continue
		}
		// As a synchronous append's, the latency includes the wait for
		// room in the window.
		sl := w.take(ctx.Done())
		if sl == nil {
			return
		}
		sl.intended = intended
		l.async.AppendAsync(ctx, log, batch[0], sl.done)
	}
}

// since is the time since the run started, from the monotonic clock alone
// (one read; time.Now reads the wall clock too).
func (l *load) since() int64 { return int64(time.Since(l.start)) }

// entry returns the payload of entry number i, started intended
// nanoseconds into the run.
func (l *load) entry(i uint64, intended int64) []byte {
	size := l.spec.EntryBytes
	// Consecutive entries are consecutive windows of the pool: they do
	// not overlap, so a compressor does not find an entry in the one
	// before, and no entry repeats until the pool (8 MiB at least) has
	// gone by, farther back than a compressor's window or a batch. Taken
	// in order they also stay in the cache lines the CPU prefetches;
	// entries spread over the pool (as they were until 2026-11-26, 4,099
	// bytes apart) cost every system a cache and TLB miss per entry.
	off := int(i*uint64(size)) % (len(l.pool) - size + 1)
	e := l.pool[off : off+size]
	if !l.stamp {
		return e
	}
	e = append([]byte(nil), e...)
	binary.LittleEndian.PutUint64(e, uint64(l.start.Add(time.Duration(intended)).UnixNano()))
	binary.LittleEndian.PutUint64(e[8:], i)
	return e
}

// record records in h the outcome of an append of n entries started
// intended nanoseconds into the run; its acknowledgement is now.
func (l *load) record(h *Histogram, intended int64, n int, err error) {
	now := l.since()
	if err != nil {
		l.fail(err)
		return
	}
	l.ackedAll.Add(int64(n))
	if intended < l.fromNS {
		return
	}
	h.Record(time.Duration(now - intended))
	l.entries.Add(int64(n))
	for t := l.lastDone.Load(); now > t && !l.lastDone.CompareAndSwap(t, now); t = l.lastDone.Load() {
	}
}

func (l *load) fail(err error) {
	l.errs.Add(1)
	s := err.Error()
	l.firstErr.CompareAndSwap(nil, &s)
}

// finish fills in r from what the load measured.
func (l *load) finish(r *Result, m *ProcMeter) {
	r.StopProc(m)
	// Every entry of a load has EntryBytes.
	r.Entries = l.entries.Load()
	r.Bytes = r.Entries * int64(l.spec.EntryBytes)
	if last := l.lastDone.Load(); last > 0 {
		r.Seconds = time.Duration(last - l.fromNS).Seconds()
	}
	r.Latency, r.Percentiles = l.hist.Summary()
	if r.Latency.Count == 0 {
		r.Notes = append(r.Notes, "nothing started in the measured time was acknowledged (or delivered) before the run ended: the figures are empty; try a longer --duration")
	}
	r.Errors = l.errs.Load()
	if s := l.firstErr.Load(); s != nil {
		r.FirstError = *s
	}
}

func (l *load) progress(w io.Writer, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last int64
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			n := l.ackedAll.Load()
			elapsed := now.Sub(l.start).Round(time.Second)
			total := "until done"
			if l.endNS != math.MaxInt64 {
				total = time.Duration(l.endNS).Round(time.Second).String()
			}
			fmt.Fprintf(w, "%s: %v of %s: %d entries/s, %.1f MB/s, %d errors\n", l.spec.Name, elapsed, total,
				n-last, float64(n-last)*float64(l.spec.EntryBytes)/1e6, l.errs.Load())
			last = n
		}
	}
}

// NoisyStealShare is the share of CPU time taken by the hypervisor above
// which a result says its figures are low for that reason.
const NoisyStealShare = 0.05

// StopProc fills in the CPU time and peak memory that m measured, and the
// machine's steal time over the run.
func (r *Result) StopProc(m *ProcMeter) {
	steal, stealOK := m.StealShare()
	var note string
	r.CPUSeconds, r.PeakRSSBytes, note = m.Stop()
	if note != "" {
		r.Notes = append(r.Notes, note)
	}
	if stealOK {
		r.SetExtra("steal_share", steal)
		if steal >= NoisyStealShare {
			r.Notes = append(r.Notes, fmt.Sprintf("the hypervisor took %.0f%% of this machine's CPU time (steal) during the run: a CPU-bound figure is low by up to that much", 100*steal))
		}
	}
}
