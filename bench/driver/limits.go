package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/bench/physical"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/units"
)

// DiskLimits measures what the disk under dir can do for spec: the
// physical limit its figures are held against (tern bench disk --help says
// which for each workload).
func DiskLimits(ctx context.Context, dir string, spec loadgen.Spec) ([]*loadgen.Result, error) {
	d := spec.Duration
	const mib = 1 << 20
	var runs []func() (*loadgen.Result, error)
	switch spec.Kind {
	case loadgen.KindAppend, loadgen.KindEndToEnd:
		size := spec.EntryBytes * spec.Batch
		switch {
		case spec.Kind == loadgen.KindEndToEnd:
			// A steady rate: the floor is one entry made durable.
		case spec.InFlight > 0:
			size = mib
		case spec.Producers > 1:
			size *= spec.Producers
		}
		runs = append(runs,
			func() (*loadgen.Result, error) { return physical.DiskSync(ctx, dir, size, physical.Growing, d) },
			func() (*loadgen.Result, error) { return physical.DiskSync(ctx, dir, size, physical.Preallocated, d) })
		if spec.Kind == loadgen.KindAppend && (spec.InFlight > 0 || spec.Producers > 1) {
			// Past MaxFileBytes the growing file is overwritten, which a
			// fast disk reaches in a second; a log's segments and journals
			// are new files, whose every fdatasync commits growth.
			runs = append(runs, func() (*loadgen.Result, error) { return physical.DiskSync(ctx, dir, size, physical.NewFiles, d) })
		}
		if spec.Kind == loadgen.KindAppend && spec.Producers > 1 && spec.InFlight == 0 {
			// The group commit the producers' appends make, alone and
			// behind gRPC: how much of it gRPC leaves on this machine.
			entry := spec.EntryBytes * spec.Batch
			for _, overGRPC := range []bool{false, true} {
				runs = append(runs, func() (*loadgen.Result, error) {
					return physical.GroupCommit(ctx, dir, entry, spec.Producers, overGRPC, d)
				})
			}
		}
		if spec.Producers > 1 || spec.InFlight > 0 { // O_DIRECT needs 4 KiB blocks
			aligned := (size + 4095) &^ 4095 // O_DIRECT writes whole blocks
			runs = append(runs, func() (*loadgen.Result, error) { return physical.DiskDirect(ctx, dir, aligned, true, d) })
		}
		if strings.HasPrefix(spec.Name, "quorum-") {
			// As many records in flight as the workload has bytes.
			inFlight := max(spec.InFlight*spec.EntryBytes/size, 1)
			q := quorum.Default
			runs = append(runs, func() (*loadgen.Result, error) {
				r, err := physical.Pipeline(ctx, dir, size, q.Ensemble, q.AckQuorum, inFlight, d)
				if r != nil {
					r.SetExtra("replicas_per_disk", float64(q.Ensemble))
				}
				return r, err
			})
		}
	case loadgen.KindCatchUp:
		runs = append(runs, func() (*loadgen.Result, error) { return physical.DiskRead(ctx, dir, mib, spec.TotalBytes) })
	case loadgen.KindPubSub:
		runs = append(runs, func() (*loadgen.Result, error) { return physical.DiskSync(ctx, dir, mib, physical.Growing, d) })
	}
	var rs []*loadgen.Result
	for _, run := range runs {
		r, err := run()
		if err != nil {
			return nil, err
		}
		// What each operation wrote or read, for the report to show.
		r.SetExtra("op_bytes", float64(r.Bytes/max(r.Entries, 1)))
		r.Workload, r.Spec = spec.Name, spec
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil, errors.New("no disk limit for this workload")
	}
	return rs, nil
}

// S3Limits is a measure of an object store's own limit.
type S3Limits struct {
	// Size is the objects' size, Concurrency the requests in flight, and
	// Duration the measured time of each of PUT and GET.
	Size        int64
	Concurrency int
	Duration    time.Duration
	// Workload, when it has a name, limits the measure to what that
	// workload on object logs is held against (ObjectLimit: PUTs or GETs)
	// and names the results after it. A catch-up reads TotalBytes (the
	// workload's when zero) once, cold, from distinct objects.
	Workload   loadgen.Spec
	TotalBytes int64
}

// S3 measures PUT, then GET, of objects of l.Size against the bucket and
// prefix path ("BUCKET/PREFIX") of client, under a new prefix removed
// afterwards.
func S3(ctx context.Context, client *minio.Client, path string, l S3Limits) ([]*loadgen.Result, error) {
	n, concurrency, workload := l.Size, l.Concurrency, l.Workload.Name
	type op func(context.Context, *minio.Client, string, int, int, time.Duration) (*loadgen.Result, error)
	ops := []op{physical.ObjectPut, physical.ObjectGet}
	if workload != "" {
		if _, _, get := ObjectLimit(l.Workload); get {
			ops = ops[1:]
		} else {
			ops = ops[:1]
		}
	}
	spec := loadgen.Spec{Name: fmt.Sprintf("s3-%s-x%d", units.FormatBytes(n), concurrency), Kind: loadgen.KindAppend,
		EntryBytes: int(n), Batch: 1, Producers: concurrency, Logs: 1, Duration: l.Duration}
	if workload != "" && l.Workload.Kind == loadgen.KindCatchUp {
		// A catch-up reads its log once: read as much, cold, of
		// distinct objects.
		total := cmp.Or(l.TotalBytes, l.Workload.TotalBytes)
		r, err := physical.ObjectGetCold(ctx, client, path, int(n), concurrency, total)
		if err != nil {
			return nil, err
		}
		r.Workload = workload
		return []*loadgen.Result{r}, nil
	}
	var rs []*loadgen.Result
	for _, measure := range ops {
		r, err := measure(ctx, client, path, int(n), concurrency, l.Duration)
		if err != nil {
			return nil, err
		}
		r.Workload, r.Spec = cmp.Or(workload, spec.Name), spec
		rs = append(rs, r)
	}
	if rate := int(l.Workload.Rate); rate > 0 && workload != "" {
		// A log at the workload's rate uploads each append as it comes
		// while fewer than its uploads are in flight: that bare path,
		// on the same store.
		r, err := physical.ObjectPutAt(ctx, client, path, int(n), rate, tern.DefaultUploadsInFlight, l.Duration)
		if err != nil {
			return nil, err
		}
		r.Workload = workload
		rs = append(rs, r)
	}
	return rs, nil
}

// ObjectLimit is what a workload run on object logs with the default flush
// settings is held against (see tern bench s3 --help): the object size, the
// requests in flight, and whether they are GETs rather than PUTs.
func ObjectLimit(s loadgen.Spec) (size int64, concurrency int, get bool) {
	switch {
	case s.Kind == loadgen.KindCatchUp:
		// A catch-up reader's ranged GETs and read-ahead
		// (docs/object-storage.md, "Reads").
		return 4 << 20, 4, true
	case s.Rate > 0:
		// A log below its uploads in flight uploads each append as it
		// comes: a fragment of one append's entries.
		size := min(int64(max(s.Batch, 1))*int64(s.EntryBytes), tern.DefaultFlushBytes)
		return max(size, 1), 1, false
	}
	return tern.DefaultFlushBytes, tern.DefaultUploadsInFlight, false
}
