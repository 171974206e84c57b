package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
)

// ternMode is where tern bench measures Tern: embedded (the zero value),
// through a server it starts in this process, or through a running server.
type ternMode struct {
	loopback bool
	server   string
}

var (
	embedded     = ternMode{}
	loopbackGRPC = ternMode{loopback: true}
)

func serverAt(addr string) ternMode { return ternMode{server: addr} }

// benchTern measures spec on Tern in mode, with its data in dir.
func benchTern(ctx context.Context, progress io.Writer, dir string, spec loadgen.Spec, fsync tern.Fsync, mode ternMode) (*loadgen.Result, error) {
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
	case mode.server != "":
		copts, variant, storage = tern.Options{Server: mode.server}, "gRPC, server "+mode.server, ""
		prefix = fmt.Sprintf("bench-%d-%d-", os.Getpid(), time.Now().UnixNano())
	}
	t, err := openTernTarget(ctx, copts, prefix, spec.Logs, tern.LogOptions{Fsync: fsync})
	if err != nil {
		return nil, err
	}
	r, err := loadgen.Run(ctx, spec, t, loadgen.RunOptions{Progress: progress, StorageDir: storage})
	if cerr := t.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	r.System, r.Version = "tern", version()
	r.Variant = variant
	if fsync.Mode != tern.FsyncAlways {
		r.Variant = "fsync=" + fsync.String() + " (unsafe)"
		if variant != "durable" {
			r.Variant = variant + ", " + r.Variant
		}
	}
	return r, nil
}

// benchPairs measures spec n times embedded and n times through a server in
// this process, alternating which of a pair goes first, each run in a fresh
// directory. The host's share of the CPU (steal) moves from one run to the
// next, so one pair can say little about the server's cost; the median of
// several says more. It returns the pair whose gRPC/embedded throughput is
// the median (the lower of the two middle ones for an even n), with every
// pair's ratio in its notes.
func benchPairs(ctx context.Context, progress io.Writer, dir string, spec loadgen.Spec, fsync tern.Fsync, n int) ([]*loadgen.Result, error) {
	type pair struct {
		emb, grpc *loadgen.Result
		ratio     float64
	}
	ps := make([]pair, n)
	for i := range ps {
		modes := []ternMode{embedded, loopbackGRPC}
		if i%2 == 1 {
			slices.Reverse(modes)
		}
		for _, m := range modes {
			name := "embedded"
			if m.loopback {
				name = "grpc"
			}
			run := filepath.Join(dir, fmt.Sprintf("pair%d-%s", i+1, name))
			if err := os.Mkdir(run, 0o755); err != nil {
				return nil, err
			}
			r, err := benchTern(ctx, progress, run, spec, fsync, m)
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
		p := &ps[i]
		p.ratio = p.grpc.EntriesPerSec / p.emb.EntriesPerSec
		fmt.Fprintf(progress, "pair %d of %d: %.0f appends/s through the server, %.0f embedded: %.2f (steal %s, %s)\n",
			i+1, n, p.grpc.EntriesPerSec, p.emb.EntriesPerSec, p.ratio, stealOf(p.grpc), stealOf(p.emb))
	}
	byRatio := slices.Clone(ps)
	slices.SortFunc(byRatio, func(a, b pair) int { return cmp.Compare(a.ratio, b.ratio) })
	median := byRatio[(n-1)/2]
	ratios := make([]string, n)
	for i, p := range ps {
		ratios[i] = fmt.Sprintf("%.2f (steal %s, %s)", p.ratio, stealOf(p.grpc), stealOf(p.emb))
	}
	note := fmt.Sprintf("gRPC/embedded throughput over %d alternating pairs, in order, with the steal of the gRPC and the embedded run: %s; median %.2f, range %.2f-%.2f; this is the median pair",
		n, strings.Join(ratios, ", "), median.ratio, byRatio[0].ratio, byRatio[n-1].ratio)
	for _, r := range []*loadgen.Result{median.emb, median.grpc} {
		r.Notes = append(r.Notes, note)
		if r.Extra == nil {
			r.Extra = map[string]float64{}
		}
		r.Extra["pairs"] = float64(n)
	}
	median.grpc.Extra["median_ratio"] = median.ratio
	return []*loadgen.Result{median.emb, median.grpc}, nil
}

// stealOf is the host's share of the CPU during r, or "?" where unknown.
func stealOf(r *loadgen.Result) string {
	s, ok := r.Extra["steal_share"]
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*s)
}
