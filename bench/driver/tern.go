package driver

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/units"
)

// Mode is where Tern is measured: embedded (the zero value), through a
// server started in this process, or through a running server.
type Mode struct {
	loopback bool
	sec      Security      // with loopback: how the server is reached
	server   *tern.Options // a pointer keeps Mode comparable
}

var (
	// Embedded measures the library in this process.
	Embedded = Mode{}
	// Loopback measures a server started in this process, as tern serve
	// runs (embedded etcd, gRPC on loopback), through the remote client.
	Loopback = Mode{loopback: true}
)

// ServerAt measures the tern serve at opts.Server, reached with opts (its
// TLS and token), on logs created for the run and deleted afterwards.
func ServerAt(opts tern.Options) Mode { return Mode{server: &opts} }

// Tern measures spec on Tern in mode, with its data in env.Dir, on logs
// created with log's Fsync and Compression.
func Tern(ctx context.Context, env Env, spec loadgen.Spec, log tern.LogOptions, mode Mode) (*loadgen.Result, error) {
	fsync := log.Fsync
	dir := env.Dir
	copts, prefix, variant := tern.Options{Dir: dir, ReuseSegments: env.ReuseSegments, ZeroAheadBytes: env.ZeroAhead}, "bench-", "durable"
	storage := dir
	switch {
	case mode.loopback:
		s, err := startLoopbackServer(ctx, dir, mode.sec)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		copts, variant = s.clientOptions(), "gRPC"
		if mode.sec != (Security{}) {
			variant += ", " + mode.sec.String()
		}
	case mode.server != nil:
		copts, variant, storage = *mode.server, "gRPC, server "+mode.server.Server, ""
		prefix = fmt.Sprintf("bench-%d-%d-", os.Getpid(), time.Now().UnixNano())
	}
	t, err := openTernTarget(ctx, copts, prefix, spec.Logs, tern.LogOptions{Fsync: fsync, Compression: log.Compression, SegmentBytes: log.SegmentBytes})
	if err != nil {
		return nil, err
	}
	stop := t.truncateBehind(spec, env.KeepBytes)
	r, err := loadgen.Run(ctx, spec, t, loadgen.RunOptions{Progress: env.Progress, StorageDir: storage})
	stop()
	if err == nil {
		err = t.sizes(ctx, r)
	}
	if cerr := t.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	r.System, r.Version = "tern", env.Version
	r.Variant = variant
	if fsync.Mode != tern.FsyncAlways {
		r.Variant = "fsync=" + fsync.String() + " (unsafe)"
		if variant != "durable" {
			r.Variant = variant + ", " + r.Variant
		}
	}
	r.Variant += compressed(log.Compression)
	if log.SegmentBytes > 0 {
		r.Variant += fmt.Sprintf(", segments of %s", units.FormatBytes(log.SegmentBytes))
	}
	if env.ZeroAhead < 0 {
		r.Variant += ", no zeros ahead"
	}
	if env.KeepBytes > 0 {
		r.Variant += fmt.Sprintf(", truncated to keep %s", units.FormatBytes(env.KeepBytes))
		if env.ReuseSegments < 0 {
			r.Variant += ", no segment reuse"
		}
	}
	return r, nil
}

// Pairs measures spec n times in mode base and n times in mode test
// (Embedded and Loopback, or Loopback and Secured), alternating which of a
// pair goes first, each run in a fresh directory under env.Dir. The host's
// share of the CPU (steal) moves from one run to the next, so one pair can
// say little about what test costs against base; the median of several
// says more. It returns the median pair (see medianPair), base's run
// first, with every pair's ratio and steal in its notes.
func Pairs(ctx context.Context, env Env, spec loadgen.Spec, log tern.LogOptions, n int, base, test Mode) ([]*loadgen.Result, error) {
	within := base.loopback && test.loopback
	ps := make([]pair, n)
	described := make([]string, n) // each pair's ratio and steal, in order
	for i := range ps {
		modes := []Mode{base, test}
		if i%2 == 1 {
			slices.Reverse(modes)
		}
		for _, m := range modes {
			run := filepath.Join(env.Dir, fmt.Sprintf("pair%d-%s", i+1, m.name()))
			if err := os.Mkdir(run, 0o755); err != nil {
				return nil, err
			}
			runEnv := env
			runEnv.Dir = run
			r, err := Tern(ctx, runEnv, spec, log, m)
			if err != nil {
				return nil, err
			}
			if err := os.RemoveAll(run); err != nil {
				return nil, err
			}
			if m == test {
				ps[i].test = r
			} else {
				ps[i].base = r
			}
		}
		p := ps[i]
		described[i] = fmt.Sprintf("%.2f (steal %s, %s)", p.ratio(), stealOf(p.test), stealOf(p.base))
		fmt.Fprintf(env.Progress, "pair %d of %d: %.0f appends/s %s, %.0f %s: %s\n",
			i+1, n, p.test.EntriesPerSec, test.where(within), p.base.EntriesPerSec, base.where(within), described[i])
	}
	m, quiet := medianPair(ps)
	note := fmt.Sprintf("%s/%s throughput over %d alternating pairs, in order, with the steal of the %s and the %s run: %s; ",
		test.label(within), base.label(within), n, test.label(within), base.label(within), strings.Join(described, ", "))
	if quiet > 0 {
		note += fmt.Sprintf("the median of the %d pairs with under %.0f%% steal in both runs is %.2f, this pair", quiet, 100*loadgen.NoisyStealShare, m.ratio())
	} else {
		note += fmt.Sprintf("no pair had under %.0f%% steal in both runs; the median of all is %.2f, this pair", 100*loadgen.NoisyStealShare, m.ratio())
	}
	p50, p99 := medianLatencyRatios(ps)
	note += fmt.Sprintf("; the median of all pairs' %s/%s latency ratios is %.2f at p50 and %.2f at p99", test.label(within), base.label(within), p50, p99)
	cpu, cpus := medianCPURatio(ps)
	if cpu > 0 {
		note += fmt.Sprintf(", and of their CPU time per append (this process's: client and server, when in it) %.2f (%s)", cpu, strings.Join(cpus, ", "))
	}
	for _, r := range []*loadgen.Result{m.base, m.test} {
		r.Notes = append(r.Notes, note)
		r.SetExtra("pairs", float64(n))
		r.SetExtra("quiet_pairs", float64(quiet))
	}
	m.test.SetExtra("median_ratio", m.ratio())
	m.test.SetExtra("median_p50_ratio", p50)
	m.test.SetExtra("median_p99_ratio", p99)
	if cpu > 0 {
		m.test.SetExtra("median_cpu_ratio", cpu)
	}
	return []*loadgen.Result{m.base, m.test}, nil
}

// name names a mode's runs' directories.
func (m Mode) name() string {
	switch {
	case !m.loopback:
		return "embedded"
	case m.sec == Security{}:
		return "grpc"
	}
	return "grpc-" + strings.ReplaceAll(strings.ToLower(m.sec.String()), ", ", "-")
}

// label names a mode in a ratio: "embedded" against "gRPC", or between
// two modes through a server (within), how it is reached: "plaintext",
// "TLS+token".
func (m Mode) label(within bool) string {
	switch {
	case !m.loopback:
		return "embedded"
	case within:
		return strings.ReplaceAll(m.sec.String(), ", ", "+")
	}
	return "gRPC"
}

// where says, in a progress line, how a mode's appends went: "embedded"
// against "through the server", or between two modes through a server
// (within), "in plaintext", "over TLS with a token".
func (m Mode) where(within bool) string {
	switch {
	case !m.loopback:
		return "embedded"
	case !within:
		return "through the server"
	}
	w := "in plaintext"
	if m.sec.TLS {
		w = "over TLS"
	}
	if m.sec.Token {
		w += " with a token"
	}
	if m.sec.NoDedup {
		w += ", without deduplication (unsafe)"
	}
	return w
}

// pair is a run in the base mode and one in the test mode of the same
// workload, one after the other.
type pair struct{ base, test *loadgen.Result }

// ratio is the test run's throughput over the base run's.
func (p pair) ratio() float64 { return p.test.EntriesPerSec / p.base.EntriesPerSec }

// medianPair returns the pair whose ratio is the median (the lower of the
// two middle ones for an even count) of the quiet pairs, those in which
// neither run lost loadgen.NoisyStealShare or more to the host, and how
// many were quiet. Steal takes CPU from one run of a pair more than from
// the other, in either direction, so a disturbed pair says little. With no
// quiet pair, or no steal figures at all, it is the median of all of them.
func medianPair(ps []pair) (pair, int) {
	var quiet []pair
	for _, p := range ps {
		e, eok := p.base.Extra["steal_share"]
		g, gok := p.test.Extra["steal_share"]
		if eok && gok && e < loadgen.NoisyStealShare && g < loadgen.NoisyStealShare {
			quiet = append(quiet, p)
		}
	}
	from := quiet
	if len(quiet) == 0 {
		from = slices.Clone(ps)
	}
	slices.SortFunc(from, func(a, b pair) int { return cmp.Compare(a.ratio(), b.ratio()) })
	return from[(len(from)-1)/2], len(quiet)
}

// medianLatencyRatios are the medians (the lower middle one for an even
// count), over all pairs, of the test run's p50 and p99 latencies over
// the base run's; 0 when no base run has latencies.
func medianLatencyRatios(ps []pair) (p50, p99 float64) {
	median := func(of func(loadgen.Latency) float64) float64 {
		var rs []float64
		for _, p := range ps {
			if b := of(p.base.Latency); b > 0 {
				rs = append(rs, of(p.test.Latency)/b)
			}
		}
		if len(rs) == 0 {
			return 0
		}
		slices.Sort(rs)
		return rs[(len(rs)-1)/2]
	}
	return median(func(l loadgen.Latency) float64 { return l.P50 }), median(func(l loadgen.Latency) float64 { return l.P99 })
}

// medianCPURatio is the median (the lower middle one for an even count),
// over all pairs, of the test run's CPU time per append over the base
// run's, and each pair's in order; 0 when a run has no CPU time or no
// appends. Steal slows a run down more than it makes it spend CPU, so
// this ratio is steadier than the throughputs' on a busy host.
func medianCPURatio(ps []pair) (float64, []string) {
	perAppend := func(r *loadgen.Result) float64 {
		if r.Entries == 0 {
			return 0
		}
		return r.CPUSeconds / float64(r.Entries)
	}
	rs := make([]float64, len(ps))
	each := make([]string, len(ps))
	for i, p := range ps {
		b, t := perAppend(p.base), perAppend(p.test)
		if b == 0 || t == 0 {
			return 0, nil
		}
		rs[i] = t / b
		each[i] = fmt.Sprintf("%.2f", rs[i])
	}
	slices.Sort(rs)
	return rs[(len(rs)-1)/2], each
}

// stealOf is the host's share of the CPU during r, or "?" where unknown.
func stealOf(r *loadgen.Result) string {
	s, ok := r.Extra["steal_share"]
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*s)
}
