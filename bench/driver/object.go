package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/units"
)

// ObjectLogs are the object logs a measure runs on.
type ObjectLogs struct {
	// Storage is the object store: an s3:// or dir:// URL (see CheckStore)
	// and its credentials. The run keeps its objects under a new prefix of
	// the URL's, bench-PID-NANOS, and deletes them afterwards.
	Storage tern.StorageOptions
	// Log sets the logs' uploads (FlushBytes, FlushInterval,
	// UploadsInFlight); Mode is object whatever it says.
	Log tern.LogOptions
}

// Variant names the settings of the object logs measured, as the report
// shows them: "object 4MiB/20ms x4".
func (o ObjectLogs) Variant() string {
	return fmt.Sprintf("object %s/%s x%d",
		units.FormatBytes(int64(cmp.Or(o.Log.FlushBytes, tern.DefaultFlushBytes))),
		units.FormatDuration(cmp.Or(o.Log.FlushInterval, tern.DefaultFlushInterval)),
		cmp.Or(o.Log.UploadsInFlight, tern.DefaultUploadsInFlight)) + compressed(o.Log.Compression)
}

// Objects runs spec on object logs kept in the store o names, under a
// prefix of their own, with their metadata in env.Dir; then closes the
// client, reopens it, counts and compacts the logs' objects, and deletes
// the logs.
func Objects(ctx context.Context, env Env, spec loadgen.Spec, o ObjectLogs) (*loadgen.Result, error) {
	storage := o.Storage
	var err error
	if storage.URL, err = runStore(o.Storage.URL); err != nil {
		return nil, err
	}
	// No compaction in the background during the run: it would add GETs and
	// PUTs to the figures, and leave nothing to count before compaction.
	copts := tern.Options{Dir: env.Dir, Storage: storage, RetentionInterval: 24 * time.Hour}
	const prefix = "bench-"
	names := make([]string, spec.Logs)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	lopts := o.Log
	lopts.Mode = tern.ModeObject

	t, err := openTernTarget(ctx, copts, prefix, spec.Logs, lopts)
	var r *loadgen.Result
	if err == nil {
		r, err = loadgen.Run(ctx, spec, t, loadgen.RunOptions{Progress: env.Progress})
		if err == nil {
			err = t.sizes(ctx, r)
		}
		// Closing the client seals the open segments.
		if cerr := t.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		r = nil // the logs are deleted, not measured
	}
	if aerr := afterObjectRun(ctx, copts, names, r); err == nil {
		err = aerr
	}
	if u, _ := url.Parse(storage.URL); u != nil && u.Scheme == "dir" {
		os.Remove(u.Path) // the run's directory, empty now unless a deletion failed
	}
	if err != nil {
		return nil, err
	}
	r.System, r.Version, r.Variant = "tern", env.Version, o.Variant()
	if spec.Kind == loadgen.KindCatchUp && r.StorageBytes > 0 {
		mem := min(objlog.DefaultCacheBytes, r.StorageBytes)
		r.Notes = append(r.Notes, fmt.Sprintf("the read came from the object store but for the last %s (%.0f%%) at most, which the writer still held in memory",
			units.FormatBytes(mem), 100*float64(mem)/float64(r.StorageBytes)))
	}
	return r, nil
}

// CheckStore refuses a store URL a run cannot use. Only s3:// and dir://
// stores will do: a run keeps its objects under a prefix of its own, and
// reopens the store after closing it.
func CheckStore(raw string) error {
	_, err := withPrefix(raw, "bench")
	return err
}

// runStore is the store URL raw under a new prefix, bench-PID-NANOS, so
// that a run meets no objects but its own.
func runStore(raw string) (string, error) {
	return withPrefix(raw, fmt.Sprintf("bench-%d-%d", os.Getpid(), time.Now().UnixNano()))
}

// withPrefix returns the store URL raw with a path segment added to its
// prefix.
func withPrefix(raw, segment string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Scheme != "s3" && u.Scheme != "dir" {
		return "", fmt.Errorf("%q: want s3://BUCKET/PREFIX?endpoint=HOST:PORT or dir:///PATH", raw)
	}
	u.Path = path.Join("/", u.Path, segment)
	u.RawPath = ""
	return u.String(), nil
}

// afterObjectRun reopens the data directory of a finished run and deletes
// its logs and their objects. Before that, when r is not nil, it counts the
// objects holding the logs, compacts them and counts again, into r. It
// deletes the logs even when ctx has ended.
func afterObjectRun(ctx context.Context, copts tern.Options, names []string, r *loadgen.Result) (err error) {
	c, err := tern.Open(context.WithoutCancel(ctx), copts)
	if err != nil {
		return fmt.Errorf("reopen the run's data directory, to measure and delete its logs: %w (their objects are left in %s)", err, copts.Storage.URL)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		var errs []error
		for _, name := range names {
			if derr := c.DeleteLog(dctx, name); derr != nil && !errors.Is(derr, tern.ErrNotFound) {
				errs = append(errs, derr)
			}
		}
		errs = append(errs, c.Close())
		if len(errs) == 1 && errs[0] == nil {
			errs = append(errs, unclaim(dctx, copts.Storage))
		}
		if derr := errors.Join(errs...); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete the run's logs: %w (objects may be left in %s)", derr, copts.Storage.URL))
		}
	}()
	if r == nil {
		return nil
	}
	var objects, compacted int
	var stored int64
	var compacting time.Duration
	for _, name := range names {
		l, err := c.OpenLog(ctx, name)
		if err != nil {
			return err
		}
		before, err := l.Info(ctx)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := l.Compact(ctx); err != nil {
			return err
		}
		compacting += time.Since(t0)
		after, err := l.Info(ctx)
		if err != nil {
			return err
		}
		objects, compacted, stored = objects+before.Objects, compacted+after.Objects, stored+before.Bytes
	}
	gb := float64(stored) / 1e9
	r.StorageBytes = stored
	r.SetExtra("objects", float64(objects))
	r.SetExtra("objects_compacted", float64(compacted))
	r.SetExtra("compact_s", compacting.Seconds())
	if gb > 0 {
		r.SetExtra("objects_per_gb", float64(objects)/gb)
		r.SetExtra("objects_per_gb_compacted", float64(compacted)/gb)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d objects (one PUT each) held the %.3f GB written: %.1f per GB; after compaction (%.2f s) %d: %.1f per GB",
		objects, gb, r.Extra["objects_per_gb"], compacting.Seconds(), compacted, r.Extra["objects_per_gb_compacted"]))
	return nil
}

// unclaim deletes the claim the run's installation put on the run's
// prefix, the last object the run leaves there once its logs are deleted.
func unclaim(ctx context.Context, st tern.StorageOptions) error {
	b, err := blob.OpenURL(ctx, st.URL, blob.S3Options{
		AccessKey: st.AccessKey, SecretKey: st.SecretKey, SessionToken: st.SessionToken, SSECKey: st.SSECKey,
	})
	if err != nil {
		return err
	}
	return errors.Join(b.Delete(ctx, blob.ClaimKey), b.Close())
}
