// Package physical measures the limits of the hardware under Tern: how
// fast a disk makes small writes durable, how fast it streams with the page
// cache out of the way, and how fast an S3 endpoint stores and returns
// objects. Tern cannot beat these figures, so benchmarks print them beside
// Tern's own, and `tern doctor` holds them against published guidance.
//
// Every function is measured by the same harness as Tern's benchmarks: it
// returns a *loadgen.Result whose System is "disk" or "s3" and whose
// Variant names what was done; the caller sets Workload. Latencies are
// per operation, recorded in an HDR histogram in microseconds. CPU time
// and peak memory are this process's. A function that measures for a
// duration runs operations back to back until it has passed; cancelling
// ctx stops it and it returns ctx's error. Any failed operation ends the
// measurement and is returned: a figure made with errors is no limit.
//
// The disk functions need Linux for O_DIRECT and fdatasync. Their files
// are created in the given directory and removed when they return; a file
// that writes for a duration grows to at most MaxFileBytes and then starts
// again from its beginning (or, for DiskSync's NewFiles and for
// GroupCommit, is replaced by a new one), so a long run on a fast disk does
// not fill it (the Result then carries a note).
package physical

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ternwal/tern/bench/loadgen"
)

// MaxFileBytes bounds the file a timed disk measurement writes.
const MaxFileBytes = 1 << 30

// fileLimit is MaxFileBytes, smaller in tests.
var fileLimit = MaxFileBytes

// blockBytes is the alignment O_DIRECT needs of offsets, sizes and buffers
// (the logical block size, 512 or 4096 on current disks; 4096 is both).
const blockBytes = 4096

// meter times one measurement.
type meter struct {
	hist  *loadgen.Histogram
	proc  *loadgen.ProcMeter
	start time.Time
	notes []string
}

func startMeter() *meter {
	return &meter{hist: loadgen.NewHistogram(), proc: loadgen.StartProc(0), start: time.Now()}
}

// loop calls op one at a time until deadline or until ctx is done,
// recording the latency of each call, and returns how many succeeded.
func (m *meter) loop(ctx context.Context, deadline time.Time, op func() error) (int64, error) {
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		t0 := time.Now()
		if !t0.Before(deadline) {
			return n, nil
		}
		if err := op(); err != nil {
			return n, err
		}
		m.hist.Record(time.Since(t0))
		n++
	}
}

// note adds a note to the result, once.
func (m *meter) note(s string) {
	if !slices.Contains(m.notes, s) {
		m.notes = append(m.notes, s)
	}
}

// result is what the measurement did: ops operations of size bytes each
// since the meter started.
func (m *meter) result(system, variant string, spec loadgen.Spec, ops int64, size int) *loadgen.Result {
	elapsed := time.Since(m.start).Seconds()
	r := &loadgen.Result{
		System:  system,
		Variant: variant,
		Spec:    spec,
		Started: m.start.UTC(),
		Seconds: elapsed,
		Entries: ops,
		Bytes:   ops * int64(size),
		Notes:   m.notes,
	}
	r.StopProc(m.proc)
	if elapsed > 0 {
		r.MBPerSec = float64(r.Bytes) / 1e6 / elapsed
		r.EntriesPerSec = float64(ops) / elapsed
	}
	r.Latency, r.Percentiles = m.hist.Summary()
	return r
}

// payload returns size bytes that do not compress, so that a disk or a
// server that compresses does not flatter the figures.
func payload(size int) []byte {
	b := make([]byte, size)
	fill(b)
	return b
}

func fill(b []byte) {
	r := rand.NewChaCha8([32]byte{'t', 'e', 'r', 'n'})
	r.Read(b)
}
