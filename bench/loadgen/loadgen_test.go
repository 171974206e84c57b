package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// memTarget is a log in memory: the fake that the generator's tests drive.
type memTarget struct {
	mu      sync.Mutex
	logs    map[int][][]byte
	changed chan struct{} // closed and replaced on every append
	// stallAt, when set, makes the append of that entry number wait stall.
	stallAt int
	stall   time.Duration
	// failEvery makes every n-th append fail.
	failEvery int
	calls     int
}

func newMemTarget() *memTarget {
	return &memTarget{logs: map[int][][]byte{}, changed: make(chan struct{})}
}

func (m *memTarget) Append(ctx context.Context, log int, entries [][]byte) error {
	m.mu.Lock()
	m.calls++
	n := m.calls
	m.mu.Unlock()
	if m.stall > 0 && n == m.stallAt {
		time.Sleep(m.stall)
	}
	if m.failEvery > 0 && n%m.failEvery == 0 {
		return errors.New("injected failure")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range entries {
		m.logs[log] = append(m.logs[log], bytes.Clone(e))
	}
	close(m.changed)
	m.changed = make(chan struct{})
	return nil
}

func (m *memTarget) AppendAsync(ctx context.Context, log int, entry []byte, done func(error)) {
	err := m.Append(ctx, log, [][]byte{entry})
	go done(err)
}

func (m *memTarget) Read(ctx context.Context, log int, fromStart bool, ready func(), fn func([]byte) error) error {
	m.mu.Lock()
	next := len(m.logs[log])
	if fromStart {
		next = 0
	}
	m.mu.Unlock()
	ready()
	for {
		m.mu.Lock()
		es, changed := m.logs[log][next:], m.changed
		m.mu.Unlock()
		for _, e := range es {
			if err := fn(e); err != nil {
				return err
			}
			next++
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (m *memTarget) Close() error { return nil }

func (m *memTarget) count(log int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.logs[log])
}

func TestClosedLoopCountsWhatWasAcknowledged(t *testing.T) {
	m := newMemTarget()
	spec := Spec{EntryBytes: 100, Batch: 3, Producers: 4, Logs: 2, Duration: 200 * time.Millisecond, Warmup: 50 * time.Millisecond}
	r, err := Run(t.Context(), spec, m, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	total := m.count(0) + m.count(1)
	if r.Entries == 0 || r.Entries > int64(total) || r.Entries%3 != 0 {
		t.Fatalf("measured %d entries of %d appended, in batches of 3", r.Entries, total)
	}
	if m.count(0) == 0 || m.count(1) == 0 {
		t.Fatalf("producers not spread over 2 logs: %d and %d entries", m.count(0), m.count(1))
	}
	if r.Bytes != r.Entries*100 || r.Latency.Count != r.Entries/3 || r.Errors != 0 {
		t.Fatalf("bytes %d, latency count %d, errors %d for %d entries", r.Bytes, r.Latency.Count, r.Errors, r.Entries)
	}
	if r.MBPerSec <= 0 || r.Latency.P50 <= 0 || len(r.Percentiles) < 2 || r.CPUSeconds < 0 || r.PeakRSSBytes <= 0 {
		t.Fatalf("figures missing: %+v", r)
	}
	// The hypervisor's share of the CPU over the run (steal), which says
	// how far a noisy host moved the figures.
	if s, ok := r.Extra["steal_share"]; !ok || s < 0 || s > 1 {
		t.Fatalf("steal_share %v (recorded: %v), want a share of the machine's CPU time", s, ok)
	}
	// Payloads differ from one entry to the next, so nothing compresses.
	m.mu.Lock()
	defer m.mu.Unlock()
	if bytes.Equal(m.logs[0][0], m.logs[0][1]) {
		t.Fatal("two neighbouring entries have the same payload")
	}
}

// An open-loop run makes exactly the appends its schedule holds, however
// slow the target, and charges a stall to every append it held back.
func TestOpenLoopCorrectsForCoordinatedOmission(t *testing.T) {
	m := newMemTarget()
	m.stallAt, m.stall = 100, 300*time.Millisecond
	spec := Spec{EntryBytes: 10, Rate: 1000, Duration: time.Second}
	r, err := Run(t.Context(), spec, m, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != 1000 || m.count(0) != 1000 {
		t.Fatalf("%d entries measured, %d appended; the schedule holds 1000", r.Entries, m.count(0))
	}
	// The appends due during the 300 ms stall waited for it: about 300 of
	// them waited 1 to 300 ms, so at least 1 in 10 waited over 100 ms.
	if r.Latency.P90 < 100_000 {
		t.Fatalf("p90 %v µs: the stall was not charged to the appends it delayed", r.Latency.P90)
	}
}

func TestAsyncKeepsEntriesInFlight(t *testing.T) {
	m := newMemTarget()
	r, err := Run(t.Context(), Spec{EntryBytes: 100, InFlight: 50, Duration: 100 * time.Millisecond}, m, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries == 0 || r.Latency.Count != r.Entries {
		t.Fatalf("%d entries, %d latencies", r.Entries, r.Latency.Count)
	}
	if _, err := Run(t.Context(), Spec{EntryBytes: 1, InFlight: 2}, struct{ Target }{m}, RunOptions{}); err == nil {
		t.Fatal("an asynchronous workload ran on a target that cannot append asynchronously")
	}
}

func TestErrorsAreCounted(t *testing.T) {
	m := newMemTarget()
	m.failEvery = 2
	r, err := Run(t.Context(), Spec{EntryBytes: 1, Duration: 50 * time.Millisecond}, m, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors == 0 || r.FirstError != "injected failure" || r.Latency.Count == 0 {
		t.Fatalf("errors %d (%q), %d successes", r.Errors, r.FirstError, r.Latency.Count)
	}
}

func TestEndToEnd(t *testing.T) {
	m := newMemTarget()
	spec := Spec{Kind: KindEndToEnd, EntryBytes: 64, Rate: 500, Producers: 2, Logs: 2, Duration: 200 * time.Millisecond}
	r, err := Run(t.Context(), spec, m, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != 100 || r.Latency.Count != 100 || r.Errors != 0 {
		t.Fatalf("%d entries appended, %d delivered, %d errors (%s); want 100", r.Entries, r.Latency.Count, r.Errors, r.FirstError)
	}
	// The workload's own figures go beside the steal, not instead of it.
	if _, steal := r.Extra["steal_share"]; r.Extra["append_p50_us"] <= 0 || !steal {
		t.Fatalf("append latency or steal missing: %v", r.Extra)
	}
}

// lossyTarget loses every tenth entry between the append and the reader.
type lossyTarget struct{ *memTarget }

func (l lossyTarget) Read(ctx context.Context, log int, fromStart bool, ready func(), fn func([]byte) error) error {
	n := 0
	return l.memTarget.Read(ctx, log, fromStart, ready, func(e []byte) error {
		if n++; n%10 == 0 {
			return nil
		}
		return fn(e)
	})
}

func TestEndToEndReportsUndelivered(t *testing.T) {
	// The loss is reported once the reader has had drainTimeout to catch up.
	defer func(d time.Duration) { drainTimeout = d }(drainTimeout)
	drainTimeout = time.Second
	l := lossyTarget{newMemTarget()}
	ctx, cancel := context.WithTimeout(t.Context(), 2*drainTimeout)
	defer cancel()
	r, err := Run(ctx, Spec{Kind: KindEndToEnd, EntryBytes: 16, Rate: 100, Duration: 100 * time.Millisecond}, l, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors == 0 || !strings.Contains(r.FirstError, "not delivered") {
		t.Fatalf("lost entries not reported: errors %d, %q", r.Errors, r.FirstError)
	}
}

func TestCatchUpAndPubSub(t *testing.T) {
	m := newMemTarget()
	r, err := Run(t.Context(), Spec{Kind: KindCatchUp, EntryBytes: 1000, TotalBytes: 1_000_000}, m, RunOptions{StorageDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Extra["write_s"] <= 0 {
		t.Fatalf("catch-up: write time missing: %v", r.Extra)
	}
	if r.Entries != 1000 || r.Bytes != 1_000_000 || m.count(0) != 1000 || r.Seconds <= 0 {
		t.Fatalf("catch-up read %d entries, %d bytes of %d appended", r.Entries, r.Bytes, m.count(0))
	}
	m = newMemTarget()
	r, err = Run(t.Context(), Spec{Kind: KindPubSub, EntryBytes: 500, Count: 777, InFlight: 8}, m, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != 777 || m.count(0) != 777 || r.Extra["produce_s"] <= 0 || r.Extra["consume_s"] <= 0 {
		t.Fatalf("pubsub: %d entries measured, %d appended, extra %v", r.Entries, m.count(0), r.Extra)
	}
}

func TestNormalizeRejects(t *testing.T) {
	for name, s := range map[string]Spec{
		"unknown kind":     {Kind: "x"},
		"e2e without rate": {Kind: KindEndToEnd, EntryBytes: 100},
		"e2e tiny entries": {Kind: KindEndToEnd, EntryBytes: 8, Rate: 1},
		"catchup no bytes": {Kind: KindCatchUp, EntryBytes: 100},
		"pubsub no count":  {Kind: KindPubSub, EntryBytes: 100},
		"async batch":      {InFlight: 4, Batch: 2},
		"negative":         {EntryBytes: -1},
		"pubsub two logs":  {Kind: KindPubSub, EntryBytes: 1, Count: 1, Logs: 2},
	} {
		if _, err := s.Normalize(); err == nil {
			t.Errorf("%s: Normalize accepted %+v", name, s)
		}
	}
	for _, name := range PresetNames() {
		if _, err := Preset(name); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
}

func TestDriverCommandLine(t *testing.T) {
	var opened Config
	d := Driver{System: "mem", Version: "1", Variants: []string{"durable", "default"},
		Open: func(ctx context.Context, cfg Config) (Target, error) { opened = cfg; return newMemTarget(), nil }}
	var out, errOut bytes.Buffer
	err := runDriver(t.Context(), d, []string{"--workload", "sync-1k", "--duration", "50ms", "--entry-bytes", "10", "--variant", "default", "--addr", "x:1"}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v in %q", err, out.String())
	}
	if r.System != "mem" || r.Variant != "default" || r.Workload != "sync-1k" || r.Spec.EntryBytes != 10 || r.Spec.Duration != 50*time.Millisecond || r.Entries == 0 {
		t.Fatalf("result %+v", r)
	}
	if opened.Addr != "x:1" || opened.Dir == "" || opened.Spec.EntryBytes != 10 {
		t.Fatalf("opened with %+v", opened)
	}
	if !strings.Contains(errOut.String(), "sync-1k") {
		t.Fatalf("no table on stderr: %q", errOut.String())
	}
	for _, args := range [][]string{{}, {"--workload", "nope"}, {"--workload", "sync-1k", "--variant", "fast"}, {"--workload", "sync-1k", "extra"}} {
		if err := runDriver(t.Context(), d, args, &out, &errOut); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// shuffledTarget acknowledges asynchronous appends out of order, from
// several goroutines at once, and counts what is in flight.
type shuffledTarget struct {
	mu       sync.Mutex
	pending  []func(error)
	inflight int
	most     int
	acked    int
}

func (s *shuffledTarget) Append(context.Context, int, [][]byte) error { return nil }
func (s *shuffledTarget) Close() error                                { return nil }

func (s *shuffledTarget) AppendAsync(ctx context.Context, log int, entry []byte, done func(error)) {
	s.mu.Lock()
	s.inflight++
	s.most = max(s.most, s.inflight)
	s.pending = append(s.pending, done)
	var ready []func(error)
	if len(s.pending) >= 7 {
		// The newest first, so that the oldest wait longest.
		ready = s.pending
		s.pending = nil
		s.inflight -= len(ready)
		s.acked += len(ready)
	}
	s.mu.Unlock()
	for i := len(ready) - 1; i >= 0; i-- {
		go ready[i](nil)
	}
}

func TestAsyncWindowTakesAnyOrder(t *testing.T) {
	s := &shuffledTarget{}
	// The target acknowledges in sevens, the newest first: the window
	// must take whichever slot is free, not wait for the oldest. The
	// count is a multiple of 7, so every append is acknowledged.
	r, err := Run(t.Context(), Spec{EntryBytes: 100, InFlight: 7, Count: 7 * 3000}, s, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.most > 7 {
		t.Fatalf("%d appends in flight with a window of 7", s.most)
	}
	if r.Entries != 7*3000 || r.Latency.Count != r.Entries || r.Errors != 0 {
		t.Fatalf("%d entries, %d latencies, %d errors: want %d acknowledged", r.Entries, r.Latency.Count, r.Errors, 7*3000)
	}
}

func TestEntriesAreDistinct(t *testing.T) {
	for _, size := range []int{100, 4096} {
		l, err := newLoad(Spec{Name: "t", EntryBytes: size, Producers: 1, Logs: 1, Batch: 1}, newMemTarget())
		if err != nil {
			t.Fatal(err)
		}
		// No entry repeats until the pool has gone by.
		seen := map[string]bool{}
		for i := range uint64(len(l.pool)/size - 1) {
			e := string(l.entry(i, 0))
			if seen[e] {
				t.Fatalf("%d-byte entry %d repeats an earlier one", size, i)
			}
			seen[e] = true
		}
	}
}
