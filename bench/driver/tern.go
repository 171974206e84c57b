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
)

// Mode is where Tern is measured: embedded (the zero value), through a
// server started in this process, or through a running server.
type Mode struct {
	loopback bool
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

// Tern measures spec on Tern in mode, with its data in env.Dir.
func Tern(ctx context.Context, env Env, spec loadgen.Spec, fsync tern.Fsync, mode Mode) (*loadgen.Result, error) {
	dir := env.Dir
	copts, prefix, variant := tern.Options{Dir: dir}, "bench-", "durable"
	storage := dir
	switch {
	case mode.loopback:
		s, err := startLoopbackServer(ctx, dir)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		copts, variant = tern.Options{Server: s.addr}, "gRPC"
	case mode.server != nil:
		copts, variant, storage = *mode.server, "gRPC, server "+mode.server.Server, ""
		prefix = fmt.Sprintf("bench-%d-%d-", os.Getpid(), time.Now().UnixNano())
	}
	t, err := openTernTarget(ctx, copts, prefix, spec.Logs, tern.LogOptions{Fsync: fsync})
	if err != nil {
		return nil, err
	}
	r, err := loadgen.Run(ctx, spec, t, loadgen.RunOptions{Progress: env.Progress, StorageDir: storage})
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
	return r, nil
}

// Pairs measures spec n times embedded and n times through a server in
// this process, alternating which of a pair goes first, each run in a fresh
// directory under env.Dir. The host's share of the CPU (steal) moves from one run to the
// next, so one pair can say little about the server's cost; the median of
// several says more. It returns the median pair (see medianPair), with
// every pair's ratio and steal in its notes.
func Pairs(ctx context.Context, env Env, spec loadgen.Spec, fsync tern.Fsync, n int) ([]*loadgen.Result, error) {
	ps := make([]pair, n)
	described := make([]string, n) // each pair's ratio and steal, in order
	for i := range ps {
		modes := []Mode{Embedded, Loopback}
		if i%2 == 1 {
			slices.Reverse(modes)
		}
		for _, m := range modes {
			name := "embedded"
			if m.loopback {
				name = "grpc"
			}
			run := filepath.Join(env.Dir, fmt.Sprintf("pair%d-%s", i+1, name))
			if err := os.Mkdir(run, 0o755); err != nil {
				return nil, err
			}
			runEnv := env
			runEnv.Dir = run
			r, err := Tern(ctx, runEnv, spec, fsync, m)
			if err != nil {
				return nil, err
			}
			if err := os.RemoveAll(run); err != nil {
				return nil, err
			}
			if m.loopback {
				ps[i].grpc = r
			} else {
				ps[i].emb = r
			}
		}
		p := ps[i]
		described[i] = fmt.Sprintf("%.2f (steal %s, %s)", p.ratio(), stealOf(p.grpc), stealOf(p.emb))
		fmt.Fprintf(env.Progress, "pair %d of %d: %.0f appends/s through the server, %.0f embedded: %s\n",
			i+1, n, p.grpc.EntriesPerSec, p.emb.EntriesPerSec, described[i])
	}
	m, quiet := medianPair(ps)
	note := fmt.Sprintf("gRPC/embedded throughput over %d alternating pairs, in order, with the steal of the gRPC and the embedded run: %s; ",
		n, strings.Join(described, ", "))
	if quiet > 0 {
		note += fmt.Sprintf("the median of the %d pairs with under %.0f%% steal in both runs is %.2f, this pair", quiet, 100*loadgen.NoisyStealShare, m.ratio())
	} else {
		note += fmt.Sprintf("no pair had under %.0f%% steal in both runs; the median of all is %.2f, this pair", 100*loadgen.NoisyStealShare, m.ratio())
	}
	for _, r := range []*loadgen.Result{m.emb, m.grpc} {
		r.Notes = append(r.Notes, note)
		r.SetExtra("pairs", float64(n))
		r.SetExtra("quiet_pairs", float64(quiet))
	}
	m.grpc.SetExtra("median_ratio", m.ratio())
	return []*loadgen.Result{m.emb, m.grpc}, nil
}

// pair is an embedded run and a gRPC run of the same workload, one after
// the other.
type pair struct{ emb, grpc *loadgen.Result }

// ratio is gRPC's throughput over embedded's.
func (p pair) ratio() float64 { return p.grpc.EntriesPerSec / p.emb.EntriesPerSec }

// medianPair returns the pair whose ratio is the median (the lower of the
// two middle ones for an even count) of the quiet pairs, those in which
// neither run lost loadgen.NoisyStealShare or more to the host, and how
// many were quiet. Steal takes CPU from one run of a pair more than from
// the other, in either direction, so a disturbed pair says little. With no
// quiet pair, or no steal figures at all, it is the median of all of them.
func medianPair(ps []pair) (pair, int) {
	var quiet []pair
	for _, p := range ps {
		e, eok := p.emb.Extra["steal_share"]
		g, gok := p.grpc.Extra["steal_share"]
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

// stealOf is the host's share of the CPU during r, or "?" where unknown.
func stealOf(r *loadgen.Result) string {
	s, ok := r.Extra["steal_share"]
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*s)
}
