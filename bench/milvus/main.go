// Command milvus-bench puts Tern's Milvus WAL backend (contrib/milvus) and
// Woodpecker v0.1.35, Milvus 2.6's own WAL, side by side on the same
// machine in one run, with the same Milvus messages:
//
//	tern                local logs, an embedded tern.Client
//	tern (object)       object logs in MinIO, an embedded tern.Client
//	tern (quorum)       quorum logs (3 replicas, acked at 2) on 3 tern serve
//	                    nodes on an etcd, sealed segments in MinIO
//	woodpecker          embedded, local storage
//	woodpecker-minio    embedded, MinIO storage
//	woodpecker-service  3 LogStore processes, 3 replicas acked at 2
//
// Tern is driven through Milvus's interfaces: walimpls.OpenerImpls.Open of
// a channel at term 1, WALImpls.Append of each message, and a ScannerImpls
// (DeliverPolicyAll) to read back. Milvus 2.6.0's impls/wp does not build
// against Woodpecker v0.1.35, so Woodpecker is driven through its own
// client API with the same messages, the calls impls/wp makes (see
// woodpecker.go). Every message is what Milvus's streaming node hands its
// WAL: the entry as payload, with the properties of an insert message.
//
// The workloads are bench/loadgen's, run by loadgen.Run on a new channel
// each: milvus-sync-1k (one 1 KiB append in flight), milvus-conc-1k (64
// producers with one each) and milvus-catchup-1g (write --total-bytes in
// 64 KiB messages, untimed, then time a scanner reading all of it from the
// start). Each append workload runs --runs times and the median run (by
// p50 for sync, by MB/s otherwise) is kept, the others named in its notes.
// The results are JSON lines in loadgen's shape, for bench/report.
//
// Woodpecker's service mode needs a private network namespace (its
// LogStores bind 0.0.0.0), and the MinIO and tern binary come from outside:
// bench/milvus/run.sh sets all that up. Processes this program starts (tern
// serve nodes, LogStores) are killed with it (PR_SET_PDEATHSIG) and their
// PIDs appended to --pidfile as they start.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/bench/peers/woodpecker/wpservice"
)

// system is one WAL under test, started once for all its runs.
type system interface {
	names() (system, variant string)
	// open opens a writer of a new channel.
	open(ctx context.Context, channel string) (target, error)
	// pids are the processes of the system besides this one.
	pids() []int
	close() error
}

// target is a loadgen target that can be read back.
type target interface {
	loadgen.Target
	loadgen.Reader
}

// env is what the systems share.
type env struct {
	minio    wpservice.MinIO // Bucket unset
	tern     string          // the tern binary
	logstore string          // Woodpecker's LogStore binary
	wpConfig string          // Woodpecker's shipped config/woodpecker.yaml
	pidfile  string
}

// started records the PID of a process this program started.
func (e *env) started(pid int) {
	if e.pidfile == "" {
		return
	}
	f, err := os.OpenFile(e.pidfile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "milvus-bench: record PID %d in %s: %v\n", pid, e.pidfile, err)
		return
	}
	fmt.Fprintln(f, pid)
	f.Close()
}

// allSystems are the systems by name, in the order they run.
var allSystems = []string{"tern-local", "tern-object", "tern-quorum", "woodpecker-local", "woodpecker-minio", "woodpecker-service"}

// workloads are the loadgen presets each workload is run as.
var workloads = map[string]string{"milvus-sync-1k": "sync-1k", "milvus-conc-1k": "conc-1k", "milvus-catchup-1g": "catchup-1g"}

func openSystem(ctx context.Context, e *env, name, dir string) (system, error) {
	kind, mode, _ := strings.Cut(name, "-")
	if kind == "tern" {
		return openTern(ctx, e, mode, dir)
	}
	return openWoodpecker(ctx, e, mode, dir)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "milvus-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var (
		e                        env
		systems, works, jsonPath string
		dir                      string
		duration, warmup         time.Duration
		runs                     int
		totalBytes               int64
	)
	flag.StringVar(&systems, "systems", strings.Join(allSystems, ","), "the systems to run, comma-separated")
	flag.StringVar(&works, "workloads", "milvus-sync-1k,milvus-conc-1k,milvus-catchup-1g", "the workloads, comma-separated")
	flag.StringVar(&jsonPath, "json", "", "append the results as JSON lines to this file (default: standard output)")
	flag.StringVar(&dir, "dir", "", "a directory on the disk under test for the systems' data (required)")
	flag.DurationVar(&duration, "duration", 5*time.Second, "the measured time of an append run")
	flag.DurationVar(&warmup, "warmup", time.Second, "the unmeasured load before it")
	flag.IntVar(&runs, "runs", 3, "runs of each append workload; the median one is kept")
	flag.Int64Var(&totalBytes, "total-bytes", 1<<30, "what milvus-catchup-1g writes and reads back")
	flag.StringVar(&e.minio.Endpoint, "minio", "", "HOST:PORT of a MinIO (plain HTTP) for the object, quorum, minio and service systems; credentials in $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY")
	flag.StringVar(&e.tern, "tern", "", "the tern binary, for tern-quorum")
	flag.StringVar(&e.logstore, "logstore", "", "Woodpecker's LogStore server binary, for woodpecker-service")
	flag.StringVar(&e.wpConfig, "wp-config", "", "Woodpecker's shipped config/woodpecker.yaml")
	flag.StringVar(&e.pidfile, "pidfile", "", "append the PIDs of the processes started here to this file")
	flag.Parse()
	if dir == "" {
		return fmt.Errorf("--dir is required: a directory on the disk under test")
	}
	e.minio.AccessKey, e.minio.Secret = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	out := os.Stdout
	if jsonPath != "" {
		f, err := os.OpenFile(jsonPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	var all []*loadgen.Result
	for _, name := range strings.Split(systems, ",") {
		if !slices.Contains(allSystems, name) {
			return fmt.Errorf("unknown system %q (want some of %s)", name, strings.Join(allSystems, ","))
		}
		rs, err := runSystem(ctx, &e, name, filepath.Join(dir, name), strings.Split(works, ","), duration, warmup, runs, totalBytes)
		for _, r := range rs {
			if err := r.WriteJSON(out); err != nil {
				return err
			}
		}
		all = append(all, rs...)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return loadgen.WriteTable(os.Stderr, all)
}

// runSystem starts one system and runs the workloads on it, each on a
// channel of its own.
func runSystem(ctx context.Context, e *env, name, dir string, works []string, duration, warmup time.Duration, runs int, totalBytes int64) (_ []*loadgen.Result, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "milvus-bench: starting %s in %s\n", name, dir)
	s, err := openSystem(ctx, e, name, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := s.close(); cerr != nil && err == nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	var results []*loadgen.Result
	for _, w := range works {
		preset, ok := workloads[w]
		if !ok {
			return results, fmt.Errorf("unknown workload %q (want milvus-sync-1k, milvus-conc-1k or milvus-catchup-1g)", w)
		}
		spec, err := loadgen.Preset(preset)
		if err != nil {
			return results, err
		}
		spec.Name, spec.Duration, spec.Warmup = w, duration, warmup
		n := runs
		if spec.Kind == loadgen.KindCatchUp {
			spec.TotalBytes, n = totalBytes, 1
		}
		var rs []*loadgen.Result
		for i := range n {
			r, err := runOnce(ctx, s, spec, fmt.Sprintf("bench-%s-%d", strings.TrimPrefix(w, "milvus-"), i))
			if err != nil {
				return results, fmt.Errorf("%s run %d: %w", w, i+1, err)
			}
			rs = append(rs, r)
		}
		results = append(results, median(rs, spec))
	}
	return results, nil
}

// runOnce runs spec on a new channel of s.
func runOnce(ctx context.Context, s system, spec loadgen.Spec, channel string) (*loadgen.Result, error) {
	t, err := s.open(ctx, channel)
	if err != nil {
		return nil, err
	}
	r, err := loadgen.Run(ctx, spec, t, loadgen.RunOptions{PIDs: s.pids()})
	if cerr := t.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close channel %s: %w", channel, cerr)
	}
	if err != nil {
		return nil, err
	}
	r.System, r.Variant = s.names()
	r.Version = versions[r.System]
	if len(s.pids()) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("CPU and memory: this process and the %d server processes (not MinIO)", len(s.pids())))
	}
	return r, nil
}

// versions are those of the systems measured.
var versions = map[string]string{"woodpecker": "v0.1.35", "woodpecker-minio": "v0.1.35", "woodpecker-service": "v0.1.35", "tern": "devel"}

// median returns the median of rs by the workload's headline figure, with
// the others' figures in its notes.
func median(rs []*loadgen.Result, spec loadgen.Spec) *loadgen.Result {
	if len(rs) == 1 {
		return rs[0]
	}
	key := func(r *loadgen.Result) float64 { return r.MBPerSec }
	unit, scale := "MB/s", 1.0
	if spec.Producers == 1 && spec.InFlight == 0 {
		key, unit, scale = func(r *loadgen.Result) float64 { return r.Latency.P50 }, "p50 µs", 1
	}
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b *loadgen.Result) int {
		switch {
		case key(a) < key(b):
			return -1
		case key(a) > key(b):
			return 1
		}
		return 0
	})
	m := sorted[len(sorted)/2]
	var figs []string
	for _, r := range rs {
		figs = append(figs, strconv.FormatFloat(key(r)*scale, 'f', 1, 64))
	}
	m.Notes = append(m.Notes, fmt.Sprintf("median of %d runs by %s (%s)", len(rs), unit, strings.Join(figs, ", ")))
	return m
}
