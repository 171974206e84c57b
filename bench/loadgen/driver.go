package loadgen

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Driver is a benchmark program for one system: each peer in bench/peers
// is a main package that fills one in and calls Main.
type Driver struct {
	// System and Version name what is measured (Result.System, .Version).
	System  string
	Version string
	// Variants the driver can run; the first is the default. "durable"
	// must be one of them: acknowledged means on disk, as Tern's default.
	Variants []string
	// Open returns a fresh target for one run.
	Open func(ctx context.Context, cfg Config) (Target, error)
}

// Config is what Open gets from the command line.
type Config struct {
	Variant string
	// Dir is an empty directory for an embedded system's data.
	Dir string
	// Addr is the address of a server the peer's script started.
	Addr string
	Spec Spec
}

// Main runs a driver's command line and exits:
//
//	DRIVER --workload NAME [--variant V] [--dir DIR] [--addr HOST:PORT]
//	       [--pid PID] [--json FILE] [--duration D] [--warmup D]
//	       [--entry-bytes N] [--batch N] [--producers N] [--in-flight N]
//	       [--rate R] [--logs N] [--count N] [--total-bytes N]
//
// --pid names the process under test when it is a server (its CPU time and
// peak memory are reported); without it the driver's own are. The result is
// appended as a JSON line to --json (default standard output) and printed as
// a table on standard error, with a progress line while it runs.
func Main(d Driver) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runDriver(ctx, d, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", d.System, err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func runDriver(ctx context.Context, d Driver, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(d.System, flag.ContinueOnError)
	fs.SetOutput(stderr)
	workload := fs.String("workload", "", "preset workload: one of "+fmt.Sprint(PresetNames()))
	variant := fs.String("variant", d.Variants[0], fmt.Sprintf("variant: one of %v", d.Variants))
	dir := fs.String("dir", "", "empty directory for an embedded system's data (default: a new temporary one, removed after)")
	addr := fs.String("addr", "", "address of the server under test")
	pid := fs.Int("pid", 0, "process under test, for CPU time and peak memory (default: this one)")
	jsonOut := fs.String("json", "", "append the result as a JSON line to this file (default: standard output)")
	storageDir := fs.String("storage-dir", "", "directory whose size is reported as storage used (default: --dir)")
	var spec Spec
	AddSpecFlags(fs, &spec)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *workload == "" {
		return fmt.Errorf("%w: --workload is required (one of %v)", errUsage, PresetNames())
	}
	base, err := Preset(*workload)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	spec = MergeSpec(base, spec, func(name string) bool { return set[name] })
	if spec, err = spec.Normalize(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	known := false
	for _, v := range d.Variants {
		known = known || v == *variant
	}
	if !known {
		return fmt.Errorf("%w: unknown --variant %q (want one of %v)", errUsage, *variant, d.Variants)
	}
	if *dir == "" {
		tmp, err := os.MkdirTemp("", d.System+"-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		*dir = tmp
	}
	if *storageDir == "" {
		*storageDir = *dir
	}
	t, err := d.Open(ctx, Config{Variant: *variant, Dir: *dir, Addr: *addr, Spec: spec})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	res, err := Run(ctx, spec, t, RunOptions{Progress: stderr, PID: *pid, StorageDir: *storageDir})
	if cerr := t.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err != nil {
		return err
	}
	res.System, res.Variant, res.Version = d.System, *variant, d.Version
	WriteTable(stderr, []*Result{res})
	out := stdout
	if *jsonOut != "" {
		f, err := os.OpenFile(*jsonOut, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	return res.WriteJSON(out)
}

// AddSpecFlags defines the flags that override a workload's figures.
func AddSpecFlags(fs *flag.FlagSet, s *Spec) {
	fs.IntVar(&s.EntryBytes, "entry-bytes", 0, "payload bytes per entry")
	fs.IntVar(&s.Batch, "batch", 0, "entries per append call")
	fs.IntVar(&s.Producers, "producers", 0, "producers appending at once")
	fs.IntVar(&s.InFlight, "in-flight", 0, "asynchronous entries in flight per producer (0: synchronous)")
	fs.Float64Var(&s.Rate, "rate", 0, "open-loop rate, appends per second over all producers (0: closed loop)")
	fs.IntVar(&s.Logs, "logs", 0, "logs the producers are spread over")
	fs.StringVar(&s.Payload, "payload", "", "what the payloads hold: random (bytes nothing compresses) or json (JSON-like text, which compresses about 5:1) (default random)")
	fs.DurationVar(&s.Duration, "duration", 0, "measured time of append and e2e workloads")
	fs.DurationVar(&s.Warmup, "warmup", 0, "unmeasured time before it")
	fs.Int64Var(&s.TotalBytes, "total-bytes", 0, "bytes a catch-up workload writes and reads")
	fs.IntVar(&s.Count, "count", 0, "entries of a pubsub round")
}

// MergeSpec returns base with the figures whose flags were set (as told
// by set, given a flag name of AddSpecFlags) taken from over.
func MergeSpec(base, over Spec, set func(flag string) bool) Spec {
	if set("entry-bytes") {
		base.EntryBytes = over.EntryBytes
	}
	if set("batch") {
		base.Batch = over.Batch
	}
	if set("producers") {
		base.Producers = over.Producers
	}
	if set("in-flight") {
		base.InFlight = over.InFlight
	}
	if set("logs") {
		base.Logs = over.Logs
	}
	if set("count") {
		base.Count = over.Count
	}
	if set("rate") {
		base.Rate = over.Rate
	}
	if set("duration") {
		base.Duration = over.Duration
	}
	if set("warmup") {
		base.Warmup = over.Warmup
	}
	if set("total-bytes") {
		base.TotalBytes = over.TotalBytes
	}
	if set("payload") {
		base.Payload = over.Payload
	}
	return base
}
