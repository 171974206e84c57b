package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/driver"
	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/units"
)

// objectFlags are tern bench's flags for logs in object storage.
type objectFlags struct {
	storage    string // the store's URL, from --storage; empty for local logs
	flushBytes int64
	opts       tern.LogOptions // FlushInterval and UploadsInFlight from the flags
}

func (o *objectFlags) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Var(sizeFlag{&o.flushBytes}, "flush-bytes", fmt.Sprintf("with --storage: upload the queued appends once they reach this size (default %s)", units.FormatBytes(tern.DefaultFlushBytes)))
	durationVar(f, &o.opts.FlushInterval, "flush-interval", 0, fmt.Sprintf("with --storage: no longer used (appends are uploaded as soon as fewer than --uploads-in-flight uploads are under way) (default %s)", units.FormatDuration(tern.DefaultFlushInterval)))
	numberVar(f, &o.opts.UploadsInFlight, "uploads-in-flight", 0, 0, fmt.Sprintf("with --storage: upload at most `N` objects at once (default %d)", tern.DefaultUploadsInFlight))
}

// check refuses the flags that do not go together, and takes the store's
// URL from --storage. $TERN_STORAGE is not used: a benchmark of local logs
// should not turn into one of object logs because of the environment.
func (o *objectFlags) check(cmd *cobra.Command, a *app, grpcLoopback bool) error {
	if cmd.Root().PersistentFlags().Changed("storage") {
		o.storage = a.storage
	}
	flush := changedFlag(cmd, "flush-bytes", "flush-interval", "uploads-in-flight")
	switch {
	case o.storage == "" && flush != "":
		return usagef(cmd, "--%s applies to logs in object storage: add --storage URL", flush)
	case o.storage == "":
		return nil
	case grpcLoopback || a.server != "":
		return usagef(cmd, "--storage measures object logs embedded in this process; it does not combine with --grpc or --server (or $TERN_SERVER) yet")
	case cmd.Flags().Changed("fsync"):
		return usagef(cmd, "--fsync applies to local logs: an object log acknowledges an append once its object is stored")
	case o.flushBytes > math.MaxInt:
		return usagef(cmd, "--flush-bytes %s is too large", units.FormatBytes(o.flushBytes))
	}
	if err := driver.CheckStore(o.storage); err != nil {
		return usagef(cmd, "--storage: %v", err)
	}
	o.opts.Mode, o.opts.FlushBytes = tern.ModeObject, int(o.flushBytes)
	return nil
}

// logs are the object logs the flags describe, with the credentials from
// the environment.
func (o *objectFlags) logs(a *app) (driver.ObjectLogs, error) {
	storage, err := a.storageOptions()
	if err != nil {
		return driver.ObjectLogs{}, err
	}
	return driver.ObjectLogs{Storage: storage, Log: o.opts}, nil
}

// clusterFlags are tern bench's flags for logs in quorum mode, on a
// cluster it starts.
type clusterFlags struct {
	nodes               int
	ensemble, ackQuorum int
	ttl                 time.Duration
}

func (f *clusterFlags) addFlags(cmd *cobra.Command, what string) {
	numberVar(cmd.Flags(), &f.ensemble, "ensemble", 3, 1, "the nodes that hold each segment of a quorum log")
	numberVar(cmd.Flags(), &f.ackQuorum, "ack-quorum", 2, 1, "the nodes that must hold an append before it is acknowledged")
	durationVar(cmd.Flags(), &f.ttl, "node-ttl", 10*time.Second, "the nodes' lease: a dead node's logs move after it"+what)
}

// check refuses a cluster the logs cannot run on.
func (f *clusterFlags) check(cmd *cobra.Command, min int) error {
	switch {
	case f.nodes == 0:
		return usagef(cmd, "quorum logs need a cluster: add --cluster N (%d or more)", min)
	case f.nodes < min:
		return usagef(cmd, "--cluster %d: a cluster here has at least %d nodes", f.nodes, min)
	case f.ackQuorum < 1 || f.ackQuorum > f.ensemble:
		return usagef(cmd, "--ack-quorum %d: use 1 to --ensemble (%d)", f.ackQuorum, f.ensemble)
	case f.ensemble > f.nodes:
		return usagef(cmd, "--ensemble %d needs as many nodes: use --cluster %d or more", f.ensemble, f.ensemble)
	case f.ttl < time.Second:
		return usagef(cmd, "--node-ttl %v: use 1s or more", f.ttl)
	}
	return nil
}

// cluster is the cluster the flags describe: its nodes are this program,
// and its object store --storage (not $TERN_STORAGE), or a directory of
// the run's.
func (a *app) cluster(cmd *cobra.Command, f clusterFlags) (driver.Cluster, error) {
	exe, err := os.Executable()
	if err != nil {
		return driver.Cluster{}, fmt.Errorf("find this program, to run its nodes: %w", err)
	}
	c := driver.Cluster{Nodes: f.nodes, Ensemble: f.ensemble, AckQuorum: f.ackQuorum, TTL: f.ttl, Program: exe}
	if cmd.Root().PersistentFlags().Changed("storage") {
		if err := driver.CheckStore(a.storage); err != nil {
			return driver.Cluster{}, usagef(cmd, "--storage: %v", err)
		}
		c.Storage = a.storage
	}
	return c, nil
}

func (a *app) benchFailoverCmd() *cobra.Command {
	var (
		f     benchFlags
		cl    clusterFlags
		kills int
	)
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Measure fail-over: kill -9 the node serving a quorum log, and time the next acknowledged append",
		Long: `Start a cluster of --cluster tern serve nodes on this machine (an embedded
etcd, the nodes' data in a fresh directory inside --data, sealed data in a
directory there or under a new prefix of --storage), create a quorum log, and
append 1 KiB entries to it with one writer, one at a time, through a node
that does not serve it. Then --kills times: kill -9 the node that serves the
log, time from the kill to the acknowledgement of the first append sent after
it, start the node again and let the appends settle. The result gives p50,
p99 and max of these times, and when another node took the log.

The other nodes see the dead node's connections go and evict it from the
cluster within a fraction of a second, without waiting for --node-ttl.
Errors are what the application saw fail meanwhile, by class (an append in
flight on the dead node, a writer fenced when the log moved, an open that
gave up following the log): on each, the writer is closed and a new one
opened after 20ms. None of them was acknowledged.`,
		Example: `  tern bench failover
  tern bench failover --cluster 4 --kills 10 --node-ttl 2s --json results.jsonl`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cl.check(cmd, cl.ensemble+1); err != nil {
				return err
			}
			c, err := a.cluster(cmd, cl)
			if err != nil {
				return err
			}
			return a.runBench(cmd, f, func(ctx context.Context, env driver.Env) ([]*loadgen.Result, error) {
				return single(driver.Failover(ctx, env, c, kills))
			})
		},
	}
	numberVar(cmd.Flags(), &cl.nodes, "cluster", 4, 1, "the nodes of the cluster: one more than --ensemble, so that a segment can start while a node is dead")
	numberVar(cmd.Flags(), &kills, "kills", 20, 1, "how many times to kill the log's node")
	cmd.Flags().StringVar(&f.json, "json", "", "append the result as a JSON line to this `file` (- for standard output)")
	cl.addFlags(cmd, " (unless the others evict it sooner, as they do a node killed -9)")
	return cmd
}

// walLife are tern bench's flags for a WAL's normal life: local logs
// truncated behind their writers, so that segments are deleted as they go
// and new ones are written over their files.
type walLife struct {
	segment int64 // LogOptions.SegmentBytes; 0: the default
	keep    int64 // truncate each log to keep about this many bytes; 0: never
	reuse   int   // tern.Options.ReuseSegments
	ahead   int64 // tern.Options.ZeroAheadBytes; --zero-ahead 0 sets -1
}

func (l *walLife) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Var(sizeFlag{&l.segment}, "segment-size", "local logs embedded: roll segments at this size (default 256MiB)")
	f.Var(sizeFlag{&l.keep}, "truncate-behind", "local logs embedded: every 100ms, truncate each log to keep about this much behind its end, as a WAL's consumer does, so that its segments are deleted as the writers go (default: never)")
	numberVar(f, &l.reuse, "reuse-segments", 0, -1, "local logs embedded: the files of deleted segments each log keeps to write new segments over (tern.Options.ReuseSegments; default 2, -1: none)")
	f.Var(sizeFlag{&l.ahead}, "zero-ahead", "local logs embedded: how far past its last append each log writes zeros while its appends are small, as tern serve --zero-ahead (default 1MiB, 0: none)")
}

// zeroAhead is tern.Options.ZeroAheadBytes as --zero-ahead says.
func (l *walLife) zeroAhead(cmd *cobra.Command) int64 {
	if cmd.Flags().Changed("zero-ahead") && l.ahead == 0 {
		return -1
	}
	return l.ahead
}
