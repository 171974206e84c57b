package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/driver"
	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/units"
)

// benchFlags are what tern bench and tern bench disk share.
type benchFlags struct {
	workload string
	spec     loadgen.Spec
	json     string
	fsync    string
	cpuProf  string
}

func (a *app) benchCmd() *cobra.Command {
	var (
		f            benchFlags
		grpcLoopback bool
		sec          driver.Security
		pairs        int
		dedupCost    bool
		compression  tern.Compression
		obj          objectFlags
		cl           clusterFlags
		life         walLife
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Tern on this machine: appends, end-to-end latency, catch-up reads",
		Long: `Measure Tern, embedded, on a fresh directory inside --data (default: the
system's temporary directory), removed afterwards. With --grpc, measure it
through a server started in this process on that directory (embedded etcd,
gRPC on loopback, the remote Go client); with --server, through a running
tern serve, on logs created for the run and deleted afterwards: $TERN_SERVER
counts as --server here too (give --data to measure embedded). The first line
of the output says what is measured: the workload's figures, and where. With --grpc
--pairs N, measure both, embedded and through the server, N times each,
alternating which goes first: the host's share of the CPU (steal) moves one
run against the next, and the median of the pairs' ratios is steadier than
any one pair. Every pair's ratio and steal are printed; the result is the
median pair of those in which neither run lost 5% or more to steal (of all
pairs if none is that quiet).

With --grpc --tls, the server serves TLS with a certificate made for the
run (ECDSA P-256), which the client trusts (it keeps no TLS session, so a
new connection makes a full handshake); with --grpc --auth, the server has
an auth file and the client sends a token. The first
line of the output says which, and the TLS version and key exchange. With
--pairs too, the pairs compare the server so secured with the same server
in plaintext (and without an auth file) instead of the embedded library.
"tern bench connect" times the handshake of a new connection.

With --grpc --pairs N --dedup-cost, the pairs compare the server as it runs
(each append carries its producer's numbers and the log deduplicates them)
with the same server applying the appends without them (unsafe: a retried
append could be applied twice): what exactly-once retries cost.

With --compression zstd or lz4, the logs compress each batch, and --payload
json makes the entries JSON-like text (the default, random bytes, does not
compress): the result's extra figures stored_bytes, logical_bytes and
stored_per_logical say what the logs store per byte appended.

A WAL's normal life, embedded local logs only: --segment-size rolls segments
small, and --truncate-behind SIZE truncates each log every 100ms to keep about
SIZE behind its end, so that sealed segments are deleted while the writers go
on and new segments are written over their files (--reuse-segments -1: new
files instead, to compare), as in
  tern bench --workload conc-4k --segment-size 64MiB --truncate-behind 128MiB
--zero-ahead 0 writes no zeros ahead of the appends (tern serve --zero-ahead),
to compare.

With --storage URL (the flag; $TERN_STORAGE is not used here), measure logs in
object mode, embedded, on that object store: their metadata in the fresh
directory, their objects under a new prefix of the URL's (bench-PID-NANOS),
deleted afterwards. --flush-bytes, --flush-interval and --uploads-in-flight
set their uploads. After the run the client is closed (sealing the open
segments), reopened and the logs compacted; the result says how many objects
(one PUT each) held each GB written before and after compaction. --storage
does not combine with --grpc or --server yet.

With --cluster N, measure logs in quorum mode (--ensemble, --ack-quorum) on N
tern serve processes of this program, started on loopback in the fresh
directory (so their journals share one disk), with an etcd in this process and
their sealed segments in a directory there, or under a new prefix of --storage;
through the remote Go client. "tern bench failover" kills such nodes.

A workload is a preset (--workload) whose figures the other flags override,
or "custom" when no preset is named. With --rate the load is open-loop: appends
start on a fixed schedule, and an append that Tern held back past its scheduled
time is timed from that time, so a stall counts against every append it held
back. Without it, each producer keeps one append (or --in-flight asynchronous
entries) in flight.

Workloads: ` + strings.Join(loadgen.PresetNames(), ", ") + `.

The result is printed as a table, and appended as a JSON line to --json.
"tern bench disk" measures the disk's own limit for the same workload, and
"tern bench s3" an object store's; bench/run.sh runs them all next to the
peers and writes docs/benchmarks.md.`,
		Example: `  tern bench --workload sync-1k
  tern bench --workload conc-1k --grpc
  tern bench --workload conc-1k --grpc --tls --auth --pairs 5
  tern bench --workload sync-1k --grpc --pairs 5 --dedup-cost
  tern bench --workload conc-4k --duration 30s --json results.jsonl
  tern bench --entry-bytes 512 --producers 8 --rate 20000 --fsync interval:5ms
  tern bench --workload obj-put --storage 's3://tern-bench?endpoint=127.0.0.1:9000&tls=false'`,
		Args: noSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := f.resolve(cmd)
			if err != nil {
				return err
			}
			fsync, err := tern.ParseFsync(f.fsync)
			if err != nil {
				return usagef(cmd, "--fsync: %v", err)
			}
			if grpcLoopback && a.server != "" {
				return usagef(cmd, "--grpc starts its own server: leave out --server")
			}
			secured := sec != driver.Security{}
			if secured && !grpcLoopback {
				return usagef(cmd, "--%s applies to the server tern bench starts: add --grpc (a running server is reached with --server and the root flags --tls-ca, --token)",
					changedFlag(cmd, "tls", "auth"))
			}
			if cl.nodes > 0 || strings.HasPrefix(spec.Name, "quorum-") {
				if flag := changedFlag(cmd, "grpc", "tls", "auth", "pairs", "fsync", "flush-bytes", "flush-interval", "uploads-in-flight", "compression"); flag != "" {
					return usagef(cmd, "--%s does not apply to quorum logs on a --cluster", flag)
				}
				if a.server != "" {
					return usagef(cmd, "--cluster starts its own nodes: leave out --server (and $TERN_SERVER)")
				}
				if err := cl.check(cmd, 3); err != nil {
					return err
				}
				c, err := a.cluster(cmd, cl)
				if err != nil {
					return err
				}
				return a.runBench(cmd, f, func(ctx context.Context, env driver.Env) ([]*loadgen.Result, error) {
					what := fmt.Sprintf("on quorum logs (ensemble %d, ack quorum %d) of a cluster of %d tern serve nodes started in %s", c.Ensemble, c.AckQuorum, c.Nodes, env.Dir)
					if err := describeBench(cmd, spec, what); err != nil {
						return nil, err
					}
					return single(driver.Quorum(ctx, env, spec, c))
				})
			}
			if flag := changedFlag(cmd, "ensemble", "ack-quorum", "node-ttl"); flag != "" {
				return usagef(cmd, "--%s applies to quorum logs: add --cluster N", flag)
			}
			if flag := changedFlag(cmd, "segment-size", "truncate-behind", "reuse-segments", "zero-ahead"); flag != "" &&
				(grpcLoopback || a.server != "" || pairs > 0 || cmd.Root().PersistentFlags().Changed("storage")) {
				return usagef(cmd, "--%s applies to local logs embedded in this process: leave out --grpc, --server, --pairs and --storage", flag)
			}
			if life.ahead > maxZeroAhead {
				return usagef(cmd, "--zero-ahead %s: use a size up to %s (0: none)", units.FormatBytes(life.ahead), units.FormatBytes(maxZeroAhead))
			}
			if err := obj.check(cmd, a, grpcLoopback); err != nil {
				return err
			}
			if obj.storage != "" {
				logs, err := obj.logs(a)
				if err != nil {
					return err
				}
				logs.Log.Compression = compression
				return a.runBench(cmd, f, func(ctx context.Context, env driver.Env) ([]*loadgen.Result, error) {
					if err := describeBench(cmd, spec, fmt.Sprintf("on Tern embedded in this process, object logs in %s (metadata in %s)", obj.storage, env.Dir)); err != nil {
						return nil, err
					}
					return single(driver.Objects(ctx, env, spec, logs))
				})
			}
			if dedupCost && (!grpcLoopback || pairs == 0) {
				return usagef(cmd, "--dedup-cost compares the server with and without deduplication: add --grpc and --pairs N")
			}
			if pairs > 0 {
				switch {
				case !grpcLoopback:
					return usagef(cmd, "--pairs compares the server with the embedded library: add --grpc")
				case spec.Kind != loadgen.KindAppend || spec.Rate > 0:
					return usagef(cmd, "--pairs compares throughput: it needs a closed-loop append workload (no --rate), such as conc-1k")
				}
				base, test := driver.Embedded, driver.Loopback
				switch {
				case dedupCost:
					unsafe := sec
					unsafe.NoDedup = true
					base, test = driver.Secured(unsafe), driver.Secured(sec)
				case secured:
					base, test = driver.Loopback, driver.Secured(sec)
				}
				return a.runBench(cmd, f, func(ctx context.Context, env driver.Env) ([]*loadgen.Result, error) {
					what, err := describeSecured(env.Dir, sec, pairs)
					if err != nil {
						return nil, err
					}
					if err := describeBench(cmd, spec, what+fmt.Sprintf(", local logs (fsync %s) in %s", fsync, env.Dir)); err != nil {
						return nil, err
					}
					return driver.Pairs(ctx, env, spec, tern.LogOptions{Fsync: fsync, Compression: compression}, pairs, base, test)
				})
			}
			mode := driver.Embedded
			switch {
			case grpcLoopback:
				mode = driver.Secured(sec)
			case a.server != "":
				opts, err := a.serverOptions()
				if err != nil {
					return err
				}
				mode = driver.ServerAt(opts)
			}
			return a.runBench(cmd, f, func(ctx context.Context, env driver.Env) ([]*loadgen.Result, error) {
				env.KeepBytes, env.ReuseSegments, env.ZeroAhead = life.keep, life.reuse, life.zeroAhead(cmd)
				what := fmt.Sprintf("on Tern embedded in this process, local logs (fsync %s) in %s", fsync, env.Dir)
				switch {
				case grpcLoopback:
					s, err := describeSecured(env.Dir, sec, 0)
					if err != nil {
						return nil, err
					}
					what = s + fmt.Sprintf(", local logs (fsync %s) in %s", fsync, env.Dir)
				case a.server != "":
					from := "--server"
					if !cmd.Flags().Changed("server") {
						from = "$TERN_SERVER"
					}
					what = fmt.Sprintf("through the server at %s (%s), on logs created for the run and deleted after it; unset TERN_SERVER or give --data to measure Tern embedded", a.server, from)
				}
				if err := describeBench(cmd, spec, what); err != nil {
					return nil, err
				}
				return single(driver.Tern(ctx, env, spec, tern.LogOptions{Fsync: fsync, Compression: compression, SegmentBytes: life.segment}, mode))
			})
		},
	}
	f.addFlags(cmd)
	cmd.Flags().StringVar(&f.fsync, "fsync", "always", "durability of the logs: always, interval:DURATION (unsafe) or never (unsafe)")
	cmd.Flags().Var(compressionFlag{&compression}, "compression", "compression of the logs' batches: none, zstd or lz4 (default none); the result's extra figures give the bytes stored per byte appended")
	cmd.Flags().BoolVar(&grpcLoopback, "grpc", false, "measure through a server in this process (embedded etcd, gRPC on loopback), as tern serve runs")
	numberVar(cmd.Flags(), &pairs, "pairs", 0, 0, "with --grpc: measure embedded and through the server `N` times each, alternating, and record the median pair of those the host left alone (steal under 5%); with --tls or --auth, the server in plaintext and secured")
	cmd.Flags().BoolVar(&sec.TLS, "tls", false, "with --grpc: the server serves TLS, with a certificate made for the run")
	cmd.Flags().BoolVar(&sec.Token, "auth", false, "with --grpc: the server has an auth file, and the client sends a bearer token")
	cmd.Flags().BoolVar(&dedupCost, "dedup-cost", false, "with --grpc --pairs N: the pairs compare the server applying appends without their producers' numbers (unsafe) and with them, as it always does: what exactly-once retries cost")
	obj.addFlags(cmd)
	life.addFlags(cmd)
	numberVar(cmd.Flags(), &cl.nodes, "cluster", 0, 0, "measure quorum logs on a cluster of `N` tern serve nodes started on this machine (the quorum-* workloads need it)")
	cl.addFlags(cmd, "")
	cmd.AddCommand(a.benchDiskCmd(), a.benchS3Cmd(), a.benchFailoverCmd(), a.benchConnectCmd())
	return cmd
}

func (f *benchFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.workload, "workload", "", "a preset workload; the flags below override its figures")
	cmd.Flags().StringVar(&f.json, "json", "", "append the result as a JSON line to this `file` (- for standard output)")
	cmd.Flags().StringVar(&f.cpuProf, "cpuprofile", "", "write a CPU profile of this process over the run to `file` (go tool pprof reads it)")
	gfs := flag.NewFlagSet("", flag.ContinueOnError)
	loadgen.AddSpecFlags(gfs, &f.spec)
	fs := cmd.Flags()
	fs.AddGoFlagSet(gfs)
	// The values of this CLI, so that bad ones get its errors and
	// durations take "3d"; the defaults as they are, where loadgen's flags
	// say 0 for "the workload's".
	s := &f.spec
	for name, v := range map[string]pflag.Value{
		"entry-bytes": numberFlag[int]{&s.EntryBytes, 0}, "batch": numberFlag[int]{&s.Batch, 0},
		"producers": numberFlag[int]{&s.Producers, 0}, "in-flight": numberFlag[int]{&s.InFlight, 0},
		"logs": numberFlag[int]{&s.Logs, 0}, "count": numberFlag[int]{&s.Count, 0},
		"duration": durationFlag{&s.Duration}, "warmup": durationFlag{&s.Warmup}, "total-bytes": sizeFlag{&s.TotalBytes},
	} {
		fs.Lookup(name).Value = v
	}
	for name, def := range map[string]string{"entry-bytes": "1024", "batch": "1", "producers": "1", "logs": "1"} {
		fs.Lookup(name).Usage += " (default: the --workload's, else " + def + ")"
	}
	fs.Lookup("duration").DefValue = units.FormatDuration(loadgen.DefaultDuration)
	fs.Lookup("warmup").DefValue = "0"
}

// resolve returns the workload the flags describe.
func (f *benchFlags) resolve(cmd *cobra.Command) (loadgen.Spec, error) {
	base := loadgen.Spec{Name: "custom", EntryBytes: 1 << 10}
	if f.workload != "" {
		var err error
		if base, err = loadgen.Preset(f.workload); err != nil {
			return base, usagef(cmd, "--workload: %v", strings.TrimPrefix(err.Error(), "loadgen: "))
		}
	}
	if f.spec.Rate < 0 {
		return base, usagef(cmd, "--rate: %v is too small: give a number of appends per second, 0 or more", f.spec.Rate)
	}
	spec, err := loadgen.MergeSpec(base, f.spec, cmd.Flags().Changed).Normalize()
	if err != nil {
		return spec, usagef(cmd, "%s", strings.TrimPrefix(err.Error(), "loadgen: "))
	}
	return spec, nil
}

// single is the result of a measure that has one, for runBench.
func single(r *loadgen.Result, err error) ([]*loadgen.Result, error) {
	if err != nil {
		return nil, err
	}
	return []*loadgen.Result{r}, nil
}

// runBench runs measure on a fresh directory and reports what it returns.
func (a *app) runBench(cmd *cobra.Command, f benchFlags, measure func(ctx context.Context, env driver.Env) ([]*loadgen.Result, error)) error {
	parent := os.TempDir()
	if cmd.Flags().Changed("data") || cmd.Flags().Changed("dir") {
		parent = a.dir
	}
	dir, err := os.MkdirTemp(parent, "tern-bench-")
	if err != nil {
		return fmt.Errorf("make a directory to measure in: %w (--data names the disk to measure)", err)
	}
	defer os.RemoveAll(dir)
	if f.cpuProf != "" {
		out, err := os.Create(f.cpuProf)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rs, err := measure(cmd.Context(), driver.Env{Dir: dir, Progress: cmd.ErrOrStderr(), Version: version()})
	if err != nil {
		return err
	}
	return a.report(cmd, f, rs)
}

func (a *app) report(cmd *cobra.Command, f benchFlags, rs []*loadgen.Result) error {
	if err := loadgen.WriteTable(cmd.OutOrStdout(), rs); err != nil {
		return err
	}
	if f.json == "" {
		return nil
	}
	var w io.Writer = cmd.OutOrStdout()
	if f.json != "-" {
		out, err := os.OpenFile(f.json, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer out.Close()
		w = out
	}
	for _, r := range rs {
		if err := r.WriteJSON(w); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) benchDiskCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "disk",
		Short: "Measure the disk's own limit for a workload, without Tern",
		Long: `Measure the physical limit that a workload's figures are held against, on a
fresh file inside --data (default: the system's temporary directory):

  sync-1k, e2e-1k   write + fdatasync of one entry at a time, on a growing file
                    and on a preallocated one (and, for e2e, O_DIRECT)
  conc-*            write + fdatasync of all producers' entries at once (what a
                    perfect group commit does), buffered (on a growing file,
                    on new files as a log's segments are, and preallocated)
                    and O_DIRECT; and the
                    producers appending to a bare group commit in this process,
                    directly and as clients of a loopback gRPC server (raw
                    bytes, one stream), so that Tern's gRPC/embedded ratio has
                    the machine's own beside it
  async-100b        write + fdatasync of 1 MiB at a time (the disk's bandwidth);
                    the growing file is written again from its start once it
                    holds 1 GiB, so a second row goes on in new files instead,
                    as a log's segments do (also for obj-* and quorum-put)
  catchup-1g        a sequential O_DIRECT read of the same amount, 1 MiB at a time
  pubsub-*          write + fdatasync of 1 MiB at a time
  quorum-*          the same as the other append workloads, and the quorum data
                    path with nothing of Tern's in it: records sent over
                    loopback TCP to 3 nodes in this process, each writing and
                    fdatasyncing a file of its own, done at 2 of 3`,
		Example: "  tern bench disk --workload conc-4k --data /data",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.workload == "" {
				return usagef(cmd, "--workload is required: one of %s", strings.Join(loadgen.PresetNames(), ", "))
			}
			spec, err := f.resolve(cmd)
			if err != nil {
				return err
			}
			return a.runBench(cmd, f, func(ctx context.Context, env driver.Env) ([]*loadgen.Result, error) {
				return driver.DiskLimits(ctx, env.Dir, spec)
			})
		},
	}
	f.addFlags(cmd)
	return cmd
}

func (a *app) benchS3Cmd() *cobra.Command {
	var (
		f            benchFlags
		size         string
		concurrency  int
		duration     time.Duration
		createBucket bool
		totalBytes   int64
		workload     string
	)
	cmd := &cobra.Command{
		Use:   "s3 s3://BUCKET[/PREFIX]?endpoint=HOST:PORT[&tls=false]",
		Short: "Measure an object store's own limit: PUT and GET at a size and concurrency",
		Long: `Measure PUT, then GET, of objects of --size by --concurrency workers for
--duration each, against an S3-compatible store: the limit that object-storage
logs are held against. The URL has the form of tern serve --storage: HTTPS
unless it says tls=false. Credentials come from TERN_STORAGE_ACCESS_KEY and
TERN_STORAGE_SECRET_KEY, or else AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
as for tern serve. The objects are written under a new prefix and removed
afterwards.

With --workload, measure only what that workload run on object logs (tern
bench --storage, default flush settings) is held against, and label the
result with its name, as "tern bench disk" does:

  catchup-1g      GETs of 4MiB, 4 at once, as a catch-up reader does
  with a --rate   PUTs of one append's entries, the fragment an append to a
                  log below its uploads in flight goes in (obj-1k: 1KiB),
                  one at a time; then the same PUTs due at the workload's
                  rate, at most 4 at once (uploads in flight), each timed
                  from when it was due until it and every PUT before it
                  completed, as a log acknowledges: the bare path of a log
                  at that rate
  others          PUTs of full fragments (4MiB), 4 at once (uploads in flight)

--size and --concurrency override these.`,
		Example: `  tern bench s3 's3://bench?endpoint=127.0.0.1:9000&tls=false' --size 4MiB --concurrency 8
  tern bench s3 's3://bench?endpoint=127.0.0.1:9000&tls=false' --workload obj-put`,
		Args: exactArgs("URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := url.Parse(args[0])
			if err != nil || u.Scheme != "s3" {
				return usagef(cmd, "%q is not an s3:// URL: use s3://BUCKET[/PREFIX]?endpoint=HOST:PORT", args[0])
			}
			n, err := units.ParseBytes(size)
			if err != nil || n == 0 || n > 1<<30 {
				return usagef(cmd, "--size %q: use an object size from 1 byte to 1GiB, such as 4KiB or 4MiB", size)
			}
			l := driver.S3Limits{Size: n, Concurrency: concurrency, Duration: duration, TotalBytes: totalBytes}
			if workload != "" {
				l.Workload, err = loadgen.Preset(workload)
				if err != nil {
					return usagef(cmd, "--workload: %v", strings.TrimPrefix(err.Error(), "loadgen: "))
				}
				lsize, lconc, _ := driver.ObjectLimit(l.Workload)
				if !cmd.Flags().Changed("size") {
					l.Size = lsize
				}
				if !cmd.Flags().Changed("concurrency") {
					l.Concurrency = lconc
				}
			}
			if l.Concurrency < 1 || l.Duration <= 0 {
				return usagef(cmd, "--concurrency and --duration must be positive")
			}
			client, path, err := a.s3Bucket(cmd, args[0], createBucket)
			if err != nil {
				return err
			}
			rs, err := driver.S3(cmd.Context(), client, path, l)
			if err != nil {
				return err
			}
			return a.report(cmd, f, rs)
		},
	}
	cmd.Flags().StringVar(&size, "size", "4MiB", "object `size`")
	numberVar(cmd.Flags(), &concurrency, "concurrency", 8, 1, "requests in flight")
	durationVar(cmd.Flags(), &duration, "duration", 10*time.Second, "measured time of each of PUT and GET")
	cmd.Flags().StringVar(&f.json, "json", "", "append the results as JSON lines to this `file` (- for standard output)")
	cmd.Flags().BoolVar(&createBucket, "create-bucket", false, "create the bucket if it does not exist")
	cmd.Flags().StringVar(&workload, "workload", "", "measure only what this workload on object logs is held against, under its name (see above)")
	cmd.Flags().Var(sizeFlag{&totalBytes}, "total-bytes", "with a catch-up --workload: the `size` written as distinct objects and read once, cold (default: the workload's)")
	return cmd
}
