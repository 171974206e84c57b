package driver

import (
	"math"
	"testing"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
)

// The median pair is taken from the pairs in which neither run lost 5% or
// more to steal, and from all of them when none is quiet or steal is unknown.
func TestMedianPair(t *testing.T) {
	mk := func(ratio float64, steal ...float64) pair {
		p := pair{base: &loadgen.Result{EntriesPerSec: 1000}, test: &loadgen.Result{EntriesPerSec: 1000 * ratio}}
		if len(steal) == 2 {
			p.test.Extra = map[string]float64{"steal_share": steal[0]}
			p.base.Extra = map[string]float64{"steal_share": steal[1]}
		}
		return p
	}
	for _, tc := range []struct {
		name      string
		ps        []pair
		ratio     float64
		quietOnes int
	}{
		{"quiet ones", []pair{mk(1.1, 0.2, 0.3), mk(0.8, 0.01, 0.02), mk(0.5, 0.2, 0.01), mk(0.7, 0.03, 0.04), mk(0.9, 0.01, 0.01)}, 0.8, 3},
		{"even count takes the lower", []pair{mk(0.9, 0.01, 0.01), mk(1.1, 0.2, 0.3), mk(0.7, 0.01, 0.04)}, 0.7, 2},
		{"one run noisy is not quiet", []pair{mk(0.6, 0.05, 0.01), mk(0.8, 0.01, 0.01)}, 0.8, 1},
		{"none quiet", []pair{mk(0.9, 0.1, 0.1), mk(0.5, 0.2, 0.1), mk(0.7, 0.3, 0.1)}, 0.7, 0},
		{"steal unknown", []pair{mk(0.9), mk(0.5), mk(0.7)}, 0.7, 0},
	} {
		p, quiet := medianPair(tc.ps)
		if got := p.ratio(); math.Abs(got-tc.ratio) > 1e-9 || quiet != tc.quietOnes {
			t.Errorf("%s: ratio %v of %d quiet, want %v of %d", tc.name, got, quiet, tc.ratio, tc.quietOnes)
		}
	}
}

// The latency ratios are medians over all pairs, steal or not; a run
// without latencies gives 0, not a NaN that JSON cannot hold.
func TestMedianLatencyRatios(t *testing.T) {
	mk := func(base, test float64) pair {
		return pair{base: &loadgen.Result{Latency: loadgen.Latency{P50: base, P99: 2 * base}},
			test: &loadgen.Result{Latency: loadgen.Latency{P50: test, P99: 3 * test}}}
	}
	p50, p99 := medianLatencyRatios([]pair{mk(100, 120), mk(100, 90), mk(100, 200)})
	if math.Abs(p50-1.2) > 1e-9 || math.Abs(p99-1.8) > 1e-9 {
		t.Errorf("ratios %v at p50, %v at p99; want 1.2 and 1.8", p50, p99)
	}
	if p50, p99 := medianLatencyRatios([]pair{mk(0, 100)}); p50 != 0 || p99 != 0 {
		t.Errorf("without base latencies: %v, %v; want 0", p50, p99)
	}
}

// The CPU ratio compares CPU time per append, pair by pair.
func TestMedianCPURatio(t *testing.T) {
	mk := func(baseCPU, testCPU float64, testEntries int64) pair {
		return pair{base: &loadgen.Result{CPUSeconds: baseCPU, Entries: 1000}, test: &loadgen.Result{CPUSeconds: testCPU, Entries: testEntries}}
	}
	got, each := medianCPURatio([]pair{mk(1, 1.2, 1000), mk(1, 1.1, 500), mk(2, 2, 1000)})
	if math.Abs(got-1.2) > 1e-9 || len(each) != 3 || each[1] != "2.20" {
		t.Errorf("ratio %v, each %q; want 1.2 of 1.20, 2.20, 1.00", got, each)
	}
	if got, _ := medianCPURatio([]pair{mk(0, 1, 1000)}); got != 0 {
		t.Errorf("without CPU time: %v, want 0", got)
	}
}

// The target delivers what it acknowledged, to a tail reader and from the
// start: every entry, in order, none missing (Errors counts the missing).
func TestBenchTargetReads(t *testing.T) {
	for _, spec := range []loadgen.Spec{
		{Name: "e2e", Kind: loadgen.KindEndToEnd, EntryBytes: 100, Rate: 2000, Producers: 2, Logs: 2, Duration: 300 * time.Millisecond},
		{Name: "e2e async", Kind: loadgen.KindEndToEnd, EntryBytes: 100, Rate: 2000, InFlight: 10, Duration: 300 * time.Millisecond},
		{Name: "catchup", Kind: loadgen.KindCatchUp, EntryBytes: 4000, TotalBytes: 8 << 20},
		{Name: "pubsub", Kind: loadgen.KindPubSub, EntryBytes: 1000, Count: 3000, InFlight: 64},
		{Name: "async", Kind: loadgen.KindAppend, EntryBytes: 100, InFlight: 1000, Logs: 2, Producers: 2, Duration: 300 * time.Millisecond},
	} {
		for _, via := range []string{"embedded", "grpc"} {
			t.Run(spec.Name+"/"+via, func(t *testing.T) {
				spec, err := spec.Normalize()
				if err != nil {
					t.Fatal(err)
				}
				opts := tern.Options{Dir: t.TempDir()}
				if via == "grpc" {
					s, err := startLoopbackServer(t.Context(), t.TempDir(), Security{})
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					opts = s.clientOptions()
				}
				tt, err := openTernTarget(t.Context(), opts, "bench-", spec.Logs, tern.LogOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer tt.Close()
				r, err := loadgen.Run(t.Context(), spec, tt, loadgen.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if r.Errors != 0 || r.Entries == 0 {
					t.Fatalf("%d entries, %d errors: %s", r.Entries, r.Errors, r.FirstError)
				}
			})
		}
	}
}
