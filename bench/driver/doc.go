// Package driver measures Tern for tern bench: embedded, through a server
// started in this process or a running one, on object logs, on quorum logs
// on a cluster of tern serve processes started on this machine, and
// through fail-overs; and the disk's and an object store's own limits for a
// workload, with bench/physical. Each measure returns loadgen results; the
// command prints and saves them.
package driver

import "io"

// Env is what every measure of Tern needs.
type Env struct {
	// Dir is a fresh directory the measure may fill: the logs' data, an
	// etcd, a cluster's nodes. The caller removes it.
	Dir string
	// Progress receives a line now and then while a measure runs.
	Progress io.Writer
	// Version labels the results (loadgen.Result.Version).
	Version string
	// KeepBytes, when positive, makes Tern's append runs truncate each log
	// every 100 ms so that it keeps about this many bytes of entries
	// behind its end, as a WAL's consumer does: its sealed segments are
	// deleted as the writers go (a WAL's normal life, with --segment-size).
	KeepBytes int64
	// ReuseSegments is tern.Options.ReuseSegments for the logs embedded
	// in this process.
	ReuseSegments int
	// ZeroAhead is tern.Options.ZeroAheadBytes for the logs embedded in
	// this process.
	ZeroAhead int64
}
