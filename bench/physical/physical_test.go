package physical_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/bench/physical"
	"github.com/ternwal/tern/internal/miniotest"
)

// brief is how long each timed measurement runs: long enough for a few
// operations, short enough for a test. No figure is asserted, only that
// the result adds up.
const brief = 300 * time.Millisecond

// checkResult checks that r is a complete measurement of operations of
// size bytes, and logs its figures.
func checkResult(t *testing.T, r *loadgen.Result, system, variant string, size int) {
	t.Helper()
	if r.System != system || r.Variant != variant {
		t.Errorf("system, variant = %q, %q; want %q, %q", r.System, r.Variant, system, variant)
	}
	if r.Entries <= 0 || r.Bytes != r.Entries*int64(size) {
		t.Errorf("entries %d, bytes %d: want entries > 0 and bytes = entries × %d", r.Entries, r.Bytes, size)
	}
	l := r.Latency
	if l.Count != r.Entries || l.P50 <= 0 || l.P99 < l.P50 || l.Max < l.P99 {
		t.Errorf("latency %+v for %d entries", l, r.Entries)
	}
	if r.Seconds <= 0 || r.MBPerSec <= 0 || r.EntriesPerSec <= 0 || len(r.Percentiles) == 0 {
		t.Errorf("seconds %v, MB/s %v, entries/s %v, %d percentiles", r.Seconds, r.MBPerSec, r.EntriesPerSec, len(r.Percentiles))
	}
	if r.CPUSeconds <= 0 || r.PeakRSSBytes <= 0 {
		t.Errorf("cpu %v s, peak RSS %d", r.CPUSeconds, r.PeakRSSBytes)
	}
	// The host's share of the CPU, so that a baseline can be told quiet from
	// disturbed as Tern's runs are (/proc/stat counts in 10 ms ticks, so a
	// shorter run may have none).
	if s, ok := r.Extra["steal_share"]; (!ok && r.Seconds >= 0.05) || s < 0 || s > 1 {
		t.Errorf("steal_share %v (recorded: %v)", s, ok)
	}
	t.Logf("%s %s %dB: %d ops, %.1f ops/s, %.1f MB/s, p50 %.0fµs p99 %.0fµs max %.0fµs, notes %q",
		r.System, r.Variant, size, r.Entries, r.EntriesPerSec, r.MBPerSec, l.P50, l.P99, l.Max, r.Notes)
}

// ownNotes is r's notes without the one on the host's steal, which is
// there or not as the machine is busy.
func ownNotes(r *loadgen.Result) []string {
	return slices.DeleteFunc(slices.Clone(r.Notes), func(n string) bool { return strings.Contains(n, "(steal)") })
}

// checkEmpty checks that a measurement left no file behind.
func checkEmpty(t *testing.T, dir string) {
	t.Helper()
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("%d file(s) left in %s, e.g. %s", len(ents), dir, ents[0].Name())
	}
}

func TestDiskSync(t *testing.T) {
	for kind, variant := range map[physical.SyncFile]string{
		physical.Growing:      "write+fdatasync",
		physical.NewFiles:     "write+fdatasync (new files)",
		physical.Preallocated: "pwrite+fdatasync (preallocated)",
	} {
		dir := t.TempDir()
		r, err := physical.DiskSync(t.Context(), dir, 4096, kind, brief)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, r, "disk", variant, 4096)
		checkEmpty(t, dir)
	}
	// Sizes need no alignment here.
	r, err := physical.DiskSync(t.Context(), t.TempDir(), 100, physical.Growing, brief)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r, "disk", "write+fdatasync", 100)
}

// TestDiskSyncFull checks what each kind of file does once it holds the
// most a measurement writes: the growing file is written again from its
// start, NewFiles goes on in a new file; either says so in a note, and
// neither leaves a file behind.
func TestDiskSyncFull(t *testing.T) {
	defer physical.SetFileLimit(3 * 4096)()
	for kind, note := range map[physical.SyncFile]string{
		physical.Growing:  "the file reached 12288 bytes, and writes went on from its start",
		physical.NewFiles: "each file took 12288 bytes, then writes went on in a new one",
	} {
		dir := t.TempDir()
		r, err := physical.DiskSync(t.Context(), dir, 4096, kind, brief)
		if err != nil {
			t.Fatal(err)
		}
		if r.Entries <= 3 {
			t.Fatalf("%s: %d writes, too few to fill a file", r.Variant, r.Entries)
		}
		if ns := ownNotes(r); len(ns) != 1 || ns[0] != note {
			t.Errorf("%s: notes %q, want [%q]", r.Variant, ns, note)
		}
		checkEmpty(t, dir)
	}
}

func TestDiskDirect(t *testing.T) {
	for _, sync := range []bool{false, true} {
		dir := t.TempDir()
		r, err := physical.DiskDirect(t.Context(), dir, 1<<20, sync, brief)
		if err != nil {
			t.Fatal(err)
		}
		variant := "o_direct"
		if sync {
			variant = "o_direct+fdatasync"
		}
		checkResult(t, r, "disk", variant, 1<<20)
		checkEmpty(t, dir)
	}
}

func TestDiskRead(t *testing.T) {
	dir := t.TempDir()
	r, err := physical.DiskRead(t.Context(), dir, 256<<10, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r, "disk", "o_direct read", 256<<10)
	if r.Bytes != 10<<20 || r.Spec.TotalBytes != 10<<20 {
		t.Errorf("read %d of %d bytes, want %d", r.Bytes, r.Spec.TotalBytes, 10<<20)
	}
	if r.Extra["write_s"] <= 0 {
		t.Errorf("extra %v: no write_s", r.Extra)
	}
	checkEmpty(t, dir)

	// A total that is not whole writes is rounded up to them.
	r, err = physical.DiskRead(t.Context(), t.TempDir(), 4096, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 1<<20 {
		t.Errorf("read %d bytes, want 1MiB", r.Bytes)
	}
}

func TestDiskErrors(t *testing.T) {
	ctx := t.Context()
	missing := t.TempDir() + "/missing"
	unknown := physical.SyncFile(7)
	for name, f := range map[string]func() error{
		"unaligned direct": func() error { _, err := physical.DiskDirect(ctx, t.TempDir(), 1000, false, brief); return err },
		"unaligned read":   func() error { _, err := physical.DiskRead(ctx, t.TempDir(), 1000, 1<<20); return err },
		"no total":         func() error { _, err := physical.DiskRead(ctx, t.TempDir(), 4096, 0); return err },
		"zero size":        func() error { _, err := physical.DiskSync(ctx, t.TempDir(), 0, physical.Growing, brief); return err },
		"missing dir":      func() error { _, err := physical.DiskSync(ctx, missing, 4096, physical.Growing, brief); return err },
		"unknown file":     func() error { _, err := physical.DiskSync(ctx, t.TempDir(), 4096, unknown, brief); return err },
		"pipeline quorum":  func() error { _, err := physical.Pipeline(ctx, t.TempDir(), 4096, 3, 4, 1, brief); return err },
		"pipeline window":  func() error { _, err := physical.Pipeline(ctx, t.TempDir(), 4096, 3, 2, 0, brief); return err },
		"pipeline dir":     func() error { _, err := physical.Pipeline(ctx, missing, 4096, 3, 2, 1, brief); return err },
	} {
		err := f()
		if err == nil || !strings.HasPrefix(err.Error(), "physical: ") {
			t.Errorf("%s: err = %v, want a physical: error", name, err)
		}
	}
}

// TestPipeline runs the quorum data path as a quorum log's benchmarks use
// it (3 nodes, 2 to acknowledge, records pipelined; one node alone), and
// checks that it adds up and leaves no file.
func TestPipeline(t *testing.T) {
	for _, c := range []struct{ size, nodes, quorum, inFlight int }{
		{64 << 10, 3, 2, 8},
		{1 << 10, 3, 2, 1},
		{4096, 1, 1, 4},
	} {
		dir := t.TempDir()
		r, err := physical.Pipeline(t.Context(), dir, c.size, c.nodes, c.quorum, c.inFlight, brief)
		if err != nil {
			t.Fatal(err)
		}
		files := "files"
		if c.nodes == 1 {
			files = "file"
		}
		checkResult(t, r, "disk", fmt.Sprintf("loopback TCP to %d %s, ack %d", c.nodes, files, c.quorum), c.size)
		if r.Spec.InFlight != c.inFlight {
			t.Errorf("spec in flight %d, want %d", r.Spec.InFlight, c.inFlight)
		}
		checkEmpty(t, dir)
	}
}

// TestGroupCommit checks both variants, with files small enough that the
// writes go on in new ones. GroupCommit itself fails when the bytes synced
// are not those of the entries acknowledged.
func TestGroupCommit(t *testing.T) {
	defer physical.SetFileLimit(64 << 10)()
	for _, overGRPC := range []bool{false, true} {
		dir := t.TempDir()
		r, err := physical.GroupCommit(t.Context(), dir, 1024, 8, overGRPC, brief)
		if err != nil {
			t.Fatal(err)
		}
		variant := "group commit of 8 producers"
		if overGRPC {
			variant += " over loopback gRPC"
		}
		checkResult(t, r, "disk", variant, 1024)
		if r.Spec.Producers != 8 {
			t.Errorf("spec producers %d, want 8", r.Spec.Producers)
		}
		if r.Bytes <= 64<<10 {
			t.Fatalf("%s: %d bytes, too few to fill a file", r.Variant, r.Bytes)
		}
		if ns := ownNotes(r); len(ns) != 1 || ns[0] != "each file took 65536 bytes, then writes went on in a new one" {
			t.Errorf("%s: notes %q", r.Variant, ns)
		}
		checkEmpty(t, dir)
	}
	if _, err := physical.GroupCommit(t.Context(), t.TempDir(), 0, 8, true, brief); err == nil {
		t.Error("entries of 0 bytes: no error")
	}
	// Over gRPC a message carries every entry queued since the last: more
	// than gRPC's default 4 MiB for conc-64k's 64 producers of 64 KiB, and
	// always for an entry of 5 MiB. Tern's server takes messages of up to
	// 64 MiB, and so does this one.
	if _, err := physical.GroupCommit(t.Context(), t.TempDir(), 5<<20, 1, true, brief); err != nil {
		t.Errorf("entries of 5 MiB over gRPC: %v", err)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := physical.DiskSync(ctx, t.TempDir(), 4096, physical.Growing, time.Hour)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled DiskSync: err = %v", err)
	}
	if time.Since(start) > time.Minute {
		t.Errorf("cancelled DiskSync took %v", time.Since(start))
	}
	dir := t.TempDir()
	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := physical.Pipeline(ctx, dir, 4096, 3, 2, 4, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Pipeline: err = %v", err)
	}
	checkEmpty(t, dir)
	for _, overGRPC := range []bool{false, true} {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		if _, err := physical.GroupCommit(ctx, dir, 1024, 8, overGRPC, time.Hour); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled GroupCommit (gRPC %v): err = %v", overGRPC, err)
		}
		checkEmpty(t, dir)
	}
}

func TestObjects(t *testing.T) {
	s := miniotest.Start(t)
	ctx := t.Context()
	for _, tc := range []struct {
		size, concurrency int
	}{{4 << 10, 1}, {1 << 20, 4}} {
		put, err := physical.ObjectPut(ctx, s.Client, s.Bucket+"/some/prefix", tc.size, tc.concurrency, brief)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, put, "s3", "put", tc.size)
		get, err := physical.ObjectGet(ctx, s.Client, s.Bucket, tc.size, tc.concurrency, brief)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, get, "s3", "get", tc.size)
		if put.Spec.Producers != tc.concurrency {
			t.Errorf("spec %+v, want %d producers", put.Spec, tc.concurrency)
		}
	}
	// At a rate, in order: one PUT each 1/rate s, so about rate × the
	// duration of them, each at least a PUT's time after it was due.
	at, err := physical.ObjectPutAt(ctx, s.Client, s.Bucket+"/rated", 1024, 200, 4, brief)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, at, "s3", "put 200/s x4, in order", 1024)
	if want := int64(200 * brief / time.Second); at.Entries > want || at.Entries < want/2 {
		t.Errorf("%d PUTs at 200/s for %v, want at most %d and at least half of that", at.Entries, brief, want)
	}
	if at.Spec.Rate != 200 || at.Spec.InFlight != 4 {
		t.Errorf("spec %+v, want rate 200 and 4 in flight", at.Spec)
	}
	if _, err := physical.ObjectPutAt(ctx, s.Client, "no-such-bucket", 1024, 100, 4, brief); err == nil || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Errorf("rated put to a missing bucket: err = %v", err)
	}
	// All cleaned up after themselves.
	for obj := range s.Client.ListObjects(ctx, s.Bucket, minioListAll) {
		t.Errorf("object left behind: %s (err %v)", obj.Key, obj.Err)
	}

	if _, err := physical.ObjectPut(ctx, s.Client, "no-such-bucket", 4096, 1, brief); err == nil || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Errorf("put to a missing bucket: err = %v", err)
	}
}

var minioListAll = minio.ListObjectsOptions{Recursive: true}
