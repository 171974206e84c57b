package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/spf13/cobra"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/bench/physical"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/units"
)

// The thresholds the doctor holds figures against; docs/doctor.md gives
// each one's source and what to do about a figure that misses it.
const (
	// etcd: the 99th percentile of WAL fdatasync should be under 10 ms.
	syncP99Max = 10_000 // µs
	// etcd: 50 sequential IOPS required (a 7200 RPM disk), 500
	// recommended for heavily loaded clusters (a local SSD).
	iopsOK, iopsMin = 500, 50
	// etcd: 10 MB/s recovers 100 MB in 15 s; 100 MB/s or more is
	// recommended, to recover 1 GB in 15 s. Held against streaming to and
	// from the disk and the object store alike.
	bandwidthOK, bandwidthMin = 100, 10 // MB/s
	// AWS: small S3 requests (under 512 KB) have median latencies of tens
	// of milliseconds; a request still unanswered after 2 s is worth
	// retrying.
	objectP50Max = 100_000   // µs
	objectP99Max = 2_000_000 // µs
)

// The sizes the doctor measures with.
const (
	smallObjectBytes  = 4 << 10
	largeObjectBytes  = 4 << 20
	largeConcurrency  = 8
	streamBytes       = 1 << 20
	minReadBytes      = 16 << 20
	maxReadBytes      = 2 << 30
	probeTimeout      = 10 * time.Second
	defaultDoctorTime = 3 * time.Second
)

// check is one line of the doctor's report.
type check struct {
	Name string `json:"name"`
	// Figure is what was measured, as printed.
	Figure string `json:"figure"`
	// Verdict is "ok", "warn" or "FAIL".
	Verdict string `json:"verdict"`
	// Threshold is what the figure was held against, and whose guidance
	// that is.
	Threshold string          `json:"threshold"`
	Result    *loadgen.Result `json:"result"`
}

// step is a measurement and the checks judged on it.
type step struct {
	name    string
	measure func(ctx context.Context) (*loadgen.Result, error)
	checks  []judgement
}

// judgement is a check: the figure of a result it looks at, and its verdict.
type judgement struct {
	name  string
	judge func(r *loadgen.Result) (figure, verdict, threshold string)
}

// one is a step with a single check of the same name.
func one(name string, measure func(ctx context.Context) (*loadgen.Result, error), judge func(r *loadgen.Result) (figure, verdict, threshold string)) step {
	return step{name, measure, []judgement{{name, judge}}}
}

func (a *app) doctorCmd() *cobra.Command {
	var (
		d        time.Duration
		jsonOut  bool
		argNames = "PATH|s3://BUCKET[/PREFIX]?endpoint=HOST:PORT[&tls=false]|etcd://HOST:PORT[,...]"
	)
	cmd := &cobra.Command{
		Use:   "doctor " + argNames,
		Short: "Measure whether a disk or an S3 endpoint is fast enough for Tern, or check an etcd's upkeep",
		Long: `Measure the limits of the storage under Tern and judge each figure against
published guidance (docs/doctor.md says whose, and what to do about a miss):

  PATH, a directory on the disk to check: fdatasync latency of 1 KiB and
  4 KiB appends, durable 4 KiB writes per second, and sequential O_DIRECT
  write and read bandwidth in 1 MiB blocks. Its files are removed after.

  s3://BUCKET[/PREFIX]?endpoint=HOST:PORT[&tls=false], an existing bucket,
  in the URL form of tern serve --storage (region=, ca= too): PUT and GET
  latency of 4 KiB objects, and PUT and GET bandwidth of 4 MiB objects, 8 at
  a time. HTTPS unless tls=false. Credentials come from
  $TERN_STORAGE_ACCESS_KEY and $TERN_STORAGE_SECRET_KEY, or else
  $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY ($AWS_SESSION_TOKEN if set),
  as for tern serve. The objects are written under PREFIX and removed after.

  etcd://HOST:PORT[,HOST:PORT...], the client endpoints of an etcd cluster
  for --etcd (etcd://unix:///DIR/client.sock for the etcd tern serve
  embeds, as it runs, with its directory DIR): its alarms (NOSPACE, CORRUPT), whether its auto-compaction
  looks off (revision 1 still readable far behind the current one), its
  database size against its quota, and how much of the file a
  defragmentation would free. It only reads.

Each figure gets a verdict: ok, warn or FAIL. The exit code is 1 if any
check fails.`,
		Args: exactArgs(argNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if d <= 0 {
				return usagef(cmd, "--duration %s: use a positive duration such as 3s", d)
			}
			steps, err := a.doctorSteps(cmd, args[0], d)
			if err != nil {
				return err
			}
			return a.doctor(cmd.Context(), args[0], steps, jsonOut)
		},
	}
	durationVar(cmd.Flags(), &d, "duration", defaultDoctorTime, "how long each check measures")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as one JSON object, with every figure measured")
	return cmd
}

// doctor runs the steps, prints the report and fails if a check failed.
func (a *app) doctor(ctx context.Context, target string, steps []step, jsonOut bool) error {
	var checks []check
	if !jsonOut {
		fmt.Fprintf(a.stdout, "%-28s %-30s %-7s %s\n", "CHECK", "FIGURE", "VERDICT", "THRESHOLD")
	}
	for _, s := range steps {
		r, err := s.measure(ctx)
		if err != nil {
			return fmt.Errorf("doctor %s: %s: %w", target, s.name, err)
		}
		r.Workload = "doctor"
		for _, j := range s.checks {
			c := check{Name: j.name, Result: r}
			c.Figure, c.Verdict, c.Threshold = j.judge(r)
			checks = append(checks, c)
			if !jsonOut {
				fmt.Fprintf(a.stdout, "%-28s %-30s %-7s %s\n", c.Name, c.Figure, c.Verdict, c.Threshold)
			}
		}
		if !jsonOut {
			for _, n := range r.Notes {
				fmt.Fprintf(a.stdout, "  note: %s\n", n)
			}
		}
	}
	var failed, warned []string
	for _, c := range checks {
		switch c.Verdict {
		case "FAIL":
			failed = append(failed, c.Name)
		case "warn":
			warned = append(warned, c.Name)
		}
	}
	if jsonOut {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		err := enc.Encode(struct {
			Target string  `json:"target"`
			Checks []check `json:"checks"`
			Failed bool    `json:"failed"`
		}{target, checks, len(failed) > 0})
		if err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d checks failed (%s): docs/doctor.md says what each threshold means and what to do", len(failed), len(checks), strings.Join(failed, ", "))
	}
	if !jsonOut {
		if len(warned) > 0 {
			fmt.Fprintf(a.stdout, "%d of %d checks warn (%s): docs/doctor.md says what to do\n", len(warned), len(checks), strings.Join(warned, ", "))
		} else {
			fmt.Fprintf(a.stdout, "all %d checks ok\n", len(checks))
		}
	}
	return nil
}

// doctorSteps parses the target and returns the checks to run on it.
func (a *app) doctorSteps(cmd *cobra.Command, target string, d time.Duration) ([]step, error) {
	if strings.HasPrefix(target, "etcd://") {
		return a.etcdSteps(cmd, target)
	}
	if strings.Contains(target, "://") {
		u, err := url.Parse(target)
		if err != nil {
			return nil, usagef(cmd, "%q is not a URL: %v", target, errors.Unwrap(err))
		}
		if u.Scheme != "s3" {
			return nil, usagef(cmd, "%q: the doctor checks a directory (a plain path), an S3 bucket (s3://BUCKET[/PREFIX]?endpoint=HOST:PORT) or an etcd cluster (etcd://HOST:PORT[,...]); scheme %q is none of them", target, u.Scheme)
		}
		return a.objectSteps(cmd, target, d)
	}
	info, err := os.Stat(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("directory %s does not exist: give a directory on the disk to check (where the data directory will live)", target)
	case err != nil:
		return nil, err
	case !info.IsDir():
		return nil, fmt.Errorf("%s is not a directory: give a directory on the disk to check (where the data directory will live)", target)
	}
	return diskSteps(target, d), nil
}

func diskSteps(dir string, d time.Duration) []step {
	var writeMBps float64 // measured by the write step, sizes the read step
	// Appends to a growing file, each made durable before the next, as
	// Tern's log writes them.
	appends := func(size int) func(context.Context) (*loadgen.Result, error) {
		return func(ctx context.Context) (*loadgen.Result, error) {
			return physical.DiskSync(ctx, dir, size, physical.Growing, d)
		}
	}
	return []step{
		one("fdatasync 1KiB append", appends(1<<10), judgeSync),
		{"fdatasync 4KiB append", appends(4 << 10), []judgement{
			{"fdatasync 4KiB append", judgeSync},
			{"durable 4KiB writes/s", judgeIOPS},
		}},
		one("sequential write 1MiB", func(ctx context.Context) (*loadgen.Result, error) {
			r, err := physical.DiskDirect(ctx, dir, streamBytes, false, d)
			if err == nil {
				writeMBps = r.MBPerSec
			}
			return r, err
		}, judgeBandwidth),
		one("sequential read 1MiB", func(ctx context.Context) (*loadgen.Result, error) {
			// About as much as the write step wrote, so that the read
			// lasts about as long.
			total := int64(writeMBps * 1e6 * d.Seconds())
			total = min(max(total, minReadBytes), maxReadBytes)
			return physical.DiskRead(ctx, dir, streamBytes, total)
		}, judgeBandwidth),
	}
}

// s3Bucket checks the S3 URL raw (blob.ParseS3URL's form), connects with
// the credentials tern serve takes from the environment, makes sure the
// bucket is there, and returns a client and the BUCKET/PREFIX path that
// bench/physical takes. With create, a missing bucket is made.
func (a *app) s3Bucket(cmd *cobra.Command, raw string, create bool) (*minio.Client, string, error) {
	o, err := a.s3Options(raw)
	if err != nil {
		return nil, "", usagef(cmd, "%s", strings.TrimPrefix(err.Error(), "blob: "))
	}
	if o.AccessKey == "" && (a.getenv("AWS_ACCESS_KEY_ID") == "" || a.getenv("AWS_SECRET_ACCESS_KEY") == "") {
		return nil, "", errors.New("no S3 credentials: set TERN_STORAGE_ACCESS_KEY and TERN_STORAGE_SECRET_KEY, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, to a key that may write to the bucket")
	}
	client, err := blob.NewS3Client(o)
	if err != nil {
		return nil, "", usagef(cmd, "%s", strings.TrimPrefix(err.Error(), "blob: "))
	}
	if create {
		if ok, err := client.BucketExists(cmd.Context(), o.Bucket); err == nil && !ok {
			if err := client.MakeBucket(cmd.Context(), o.Bucket, minio.MakeBucketOptions{Region: o.Region}); err != nil {
				return nil, "", fmt.Errorf("create bucket %q: %w", o.Bucket, err)
			}
		}
	}
	if err := probeBucket(cmd.Context(), client, o.Endpoint, o.Bucket, o.TLS); err != nil {
		return nil, "", err
	}
	return client, path.Join(o.Bucket, o.Prefix), nil
}

// s3Options are the options of the S3 URL raw, with the credentials from
// the environment that tern serve reads: $TERN_STORAGE_ACCESS_KEY and
// $TERN_STORAGE_SECRET_KEY, or, when they are unset, the AWS_* variables
// (which blob reads itself).
func (a *app) s3Options(raw string) (blob.S3Options, error) {
	id, secret := a.getenv("TERN_STORAGE_ACCESS_KEY"), a.getenv("TERN_STORAGE_SECRET_KEY")
	if (id == "") != (secret == "") {
		return blob.S3Options{}, errors.New("TERN_STORAGE_ACCESS_KEY and TERN_STORAGE_SECRET_KEY go together: set both, or neither to use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	return blob.ParseS3URL(raw, blob.S3Options{AccessKey: id, SecretKey: secret})
}

// objectSteps checks the S3 URL raw, connects to it, makes sure the bucket
// is there, and returns the checks to run on it.
func (a *app) objectSteps(cmd *cobra.Command, raw string, d time.Duration) ([]step, error) {
	client, path, err := a.s3Bucket(cmd, raw, false)
	if err != nil {
		return nil, err
	}
	objects := func(f func(context.Context, *minio.Client, string, int, int, time.Duration) (*loadgen.Result, error), size, concurrency int) func(context.Context) (*loadgen.Result, error) {
		return func(ctx context.Context) (*loadgen.Result, error) {
			return f(ctx, client, path, size, concurrency, d)
		}
	}
	return []step{
		one("PUT 4KiB", objects(physical.ObjectPut, smallObjectBytes, 1), judgeObjectLatency),
		one("GET 4KiB", objects(physical.ObjectGet, smallObjectBytes, 1), judgeObjectLatency),
		one("PUT 4MiB x8", objects(physical.ObjectPut, largeObjectBytes, largeConcurrency), judgeBandwidth),
		one("GET 4MiB x8", objects(physical.ObjectGet, largeObjectBytes, largeConcurrency), judgeBandwidth),
	}, nil
}

// probeBucket fails, saying what to do, unless the bucket can be reached.
func probeBucket(ctx context.Context, client *minio.Client, endpoint, bucket string, secure bool) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	scheme := "https"
	if !secure {
		scheme = "http"
	}
	ok, err := client.BucketExists(ctx, bucket)
	if err == nil && !ok {
		return fmt.Errorf("bucket %q does not exist at %s://%s: create it first, or name another", bucket, scheme, endpoint)
	}
	if err == nil {
		return nil
	}
	if cerr := context.Cause(ctx); errors.Is(cerr, context.Canceled) {
		return cerr // interrupted
	}
	switch minio.ToErrorResponse(err).Code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return fmt.Errorf("S3 at %s://%s refused the credentials (%v): check TERN_STORAGE_ACCESS_KEY and TERN_STORAGE_SECRET_KEY, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", scheme, endpoint, err)
	}
	hint := "check that the server is running and that endpoint= is right"
	if secure {
		hint += "; for a server without TLS add &tls=false"
	}
	return fmt.Errorf("cannot reach S3 at %s://%s: %v: %s", scheme, endpoint, err, hint)
}

func judgeSync(r *loadgen.Result) (figure, verdict, threshold string) {
	figure = fmt.Sprintf("p50 %s  p99 %s", loadgen.Micros(r.Latency.P50), loadgen.Micros(r.Latency.P99))
	verdict = "ok"
	if r.Latency.P99 >= syncP99Max {
		verdict = "FAIL"
	}
	return figure, verdict, fmt.Sprintf("p99 < %s (etcd)", micros(syncP99Max))
}

func judgeIOPS(r *loadgen.Result) (figure, verdict, threshold string) {
	return fmt.Sprintf("%.0f/s", r.EntriesPerSec), atLeast(r.EntriesPerSec, iopsOK, iopsMin),
		fmt.Sprintf(">= %d/s ok, >= %d/s warn (etcd)", iopsOK, iopsMin)
}

func judgeBandwidth(r *loadgen.Result) (figure, verdict, threshold string) {
	return fmt.Sprintf("%.0f MB/s", r.MBPerSec), atLeast(r.MBPerSec, bandwidthOK, bandwidthMin),
		fmt.Sprintf(">= %d MB/s ok, >= %d MB/s warn (etcd)", bandwidthOK, bandwidthMin)
}

func judgeObjectLatency(r *loadgen.Result) (figure, verdict, threshold string) {
	figure = fmt.Sprintf("p50 %s  p99 %s", loadgen.Micros(r.Latency.P50), loadgen.Micros(r.Latency.P99))
	switch {
	case r.Latency.P99 >= objectP99Max:
		verdict = "FAIL"
	case r.Latency.P50 >= objectP50Max:
		verdict = "warn"
	default:
		verdict = "ok"
	}
	return figure, verdict, fmt.Sprintf("p50 < %s, p99 < %s (AWS)", micros(objectP50Max), micros(objectP99Max))
}

// micros formats a threshold in microseconds as a duration: "10ms", "2s".
func micros(us int64) string { return units.FormatDuration(time.Duration(us) * time.Microsecond) }

// atLeast judges a rate: ok at ok or above, warn at low or above, else FAIL.
func atLeast(v, ok, low float64) string {
	switch {
	case v >= ok:
		return "ok"
	case v >= low:
		return "warn"
	}
	return "FAIL"
}
