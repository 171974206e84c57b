package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/miniotest"
)

// readResults reads the JSON lines tern bench appended to path.
func readResults(t *testing.T, path string) []loadgen.Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rs []loadgen.Result
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var r loadgen.Result
		if err := json.Unmarshal(s.Bytes(), &r); err != nil {
			t.Fatalf("%v in %s", err, s.Text())
		}
		rs = append(rs, r)
	}
	return rs
}

func TestBench(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "r.jsonl")
	stdout := must(t, dir, "", "bench", "--workload", "conc-4k", "--producers", "8", "--duration", "300ms", "--warmup", "100ms", "--json", out)
	if !strings.Contains(stdout, "conc-4k") || !strings.Contains(stdout, "p99.9") {
		t.Fatalf("no table:\n%s", stdout)
	}
	// The first line says what is measured: the workload, and where.
	if first, _, _ := strings.Cut(stdout, "\n"); !regexp.MustCompile(`^Measuring conc-4k \(4KiB entries, 8 producers, closed loop, for 300ms, after 100ms of warm-up\) on Tern embedded in this process, local logs \(fsync always\) in ` + regexp.QuoteMeta(dir) + `/tern-bench-[0-9]+\.$`).MatchString(first) {
		t.Errorf("first line %q, want what is measured", first)
	}
	must(t, dir, "", "bench", "--entry-bytes", "100", "--in-flight", "64", "--duration", "200ms", "--fsync", "never", "--json", out)
	must(t, dir, "", "bench", "--workload", "conc-1k", "--producers", "4", "--duration", "200ms", "--payload", "json", "--compression", "lz4", "--json", out)
	// A WAL's normal life: small segments, truncated behind the writers.
	must(t, dir, "", "bench", "--workload", "conc-1k", "--producers", "4", "--duration", "300ms", "--segment-size", "64KiB", "--truncate-behind", "128KiB", "--json", out)
	rs := readResults(t, out)
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4", len(rs))
	}
	if r := rs[3]; r.Variant != "durable, segments of 64KiB, truncated to keep 128KiB" || r.Entries == 0 || r.Errors != 0 {
		t.Fatalf("truncated result: variant %q, %d entries, %d errors", r.Variant, r.Entries, r.Errors)
	}
	// Compressed JSON: the logs store fewer bytes than were appended.
	if r := rs[2]; r.Variant != "durable, lz4" || r.Spec.Payload != "json" || r.Extra["stored_per_logical"] <= 0 ||
		r.Extra["stored_per_logical"] > 0.6 || r.Extra["logical_bytes"] < float64(r.Bytes) {
		t.Fatalf("compressed result: variant %q, payload %q, extra %v, %d bytes", r.Variant, r.Spec.Payload, r.Extra, r.Bytes)
	}
	r := rs[0]
	if r.System != "tern" || r.Variant != "durable" || r.Workload != "conc-4k" || r.Spec.Producers != 8 || r.Spec.EntryBytes != 4096 {
		t.Fatalf("result %+v", r)
	}
	if r.Entries == 0 || r.Errors != 0 || r.Latency.P99 == 0 || r.Bytes != r.Entries*4096 || r.StorageBytes < r.Bytes {
		t.Fatalf("figures: %d entries, %d errors, p99 %v, %d bytes, %d stored", r.Entries, r.Errors, r.Latency.P99, r.Bytes, r.StorageBytes)
	}
	if r := rs[1]; r.Workload != "custom" || r.Variant != "fsync=never (unsafe)" || r.Spec.InFlight != 64 || r.Entries == 0 {
		t.Fatalf("custom result %+v", r)
	}
	// The directory measured in is removed afterwards.
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("bench left %v in --data", left)
	}
}

// --pairs alternates embedded and gRPC runs and records the median pair,
// whose notes hold every pair's ratio.
func TestBenchPairs(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "r.jsonl")
	must(t, dir, "", "bench", "--workload", "conc-1k", "--producers", "8", "--duration", "300ms", "--warmup", "100ms", "--grpc", "--pairs", "3", "--json", out)
	rs := readResults(t, out)
	if len(rs) != 2 || rs[0].Variant != "durable" || rs[1].Variant != "gRPC" {
		t.Fatalf("results %+v, want the embedded and the gRPC run of one pair", rs)
	}
	ratio := rs[1].EntriesPerSec / rs[0].EntriesPerSec
	if got := rs[1].Extra["median_ratio"]; rs[0].Entries == 0 || rs[1].Entries == 0 || got != ratio {
		t.Fatalf("median_ratio %v, the pair's ratio %v (%d and %d entries)", got, ratio, rs[0].Entries, rs[1].Entries)
	}
	for _, r := range rs {
		note := ""
		for _, n := range r.Notes {
			if strings.Contains(n, "alternating pairs") {
				note = n
			}
		}
		pairs := regexp.MustCompile(`[0-9.]+ \(steal [0-9?]+%?, [0-9?]+%?\)`).FindAllString(note, -1)
		if r.Extra["pairs"] != 3 || len(pairs) != 3 || !strings.Contains(note, fmt.Sprintf("is %.2f, this pair", ratio)) {
			t.Fatalf("%s run: pairs %v, ratio %.2f, note %q", r.Variant, r.Extra["pairs"], ratio, note)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("bench left %v in --data", left)
	}
}

// --grpc --tls --auth measures through the server over TLS with a token,
// says so in its first line, and with --pairs alternates it with the same
// server in plaintext.
func TestBenchTLS(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "r.jsonl")
	stdout := must(t, dir, "", "bench", "--workload", "conc-1k", "--producers", "4", "--duration", "200ms", "--warmup", "50ms", "--grpc", "--tls", "--auth", "--json", out)
	first, _, _ := strings.Cut(stdout, "\n")
	if !regexp.MustCompile(`^Measuring conc-1k \(1KiB entries, 4 producers, closed loop, for 200ms, after 50ms of warm-up\) through a server in this process .*, over TLS 1\.[23] \(.*ECDSA P-256.*\) with a bearer token, local logs \(fsync always\) in .*\.$`).MatchString(first) {
		t.Fatalf("first line %q, want what is measured", first)
	}
	must(t, dir, "", "bench", "--workload", "sync-1k", "--duration", "200ms", "--warmup", "50ms", "--grpc", "--tls", "--pairs", "1", "--json", out)
	// A WAL's normal life: small segments, truncated behind the writers.
	must(t, dir, "", "bench", "--workload", "conc-1k", "--producers", "4", "--duration", "300ms", "--segment-size", "64KiB", "--truncate-behind", "128KiB", "--json", out)
	rs := readResults(t, out)
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4", len(rs))
	}
	if r := rs[3]; r.Variant != "durable, segments of 64KiB, truncated to keep 128KiB" || r.Entries == 0 || r.Errors != 0 {
		t.Fatalf("truncated result: variant %q, %d entries, %d errors", r.Variant, r.Entries, r.Errors)
	}
	for i, want := range []string{"gRPC, TLS, token", "gRPC", "gRPC, TLS"} {
		if r := rs[i]; r.Variant != want || r.Entries == 0 || r.Errors != 0 {
			t.Errorf("result %d: %s, %d entries, %d errors (%s); want %s", i, r.Variant, r.Entries, r.Errors, r.FirstError, want)
		}
	}
	if r := rs[2]; r.Extra["median_ratio"] != r.EntriesPerSec/rs[1].EntriesPerSec || !strings.Contains(strings.Join(r.Notes, ";"), "TLS/plaintext throughput over 1 alternating pairs") {
		t.Errorf("pair: median_ratio %v, notes %q", r.Extra["median_ratio"], r.Notes)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("bench left %v in --data", left)
	}
}

// tern bench connect times new connections over TLS and in plaintext,
// alternating, and compares them.
func TestBenchConnect(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "r.jsonl")
	stdout := must(t, dir, "", "bench", "connect", "--connections", "5", "--auth", "--json", out)
	if first, _, _ := strings.Cut(stdout, "\n"); !strings.HasPrefix(first, "Timing 5 new connections (full handshakes) through a server in this process") ||
		!strings.Contains(first, "over TLS 1.") || !strings.Contains(stdout, "the TLS handshake adds") {
		t.Fatalf("output:\n%s", stdout)
	}
	rs := readResults(t, out)
	if len(rs) != 2 {
		t.Fatalf("%d results, want plaintext and TLS", len(rs))
	}
	for i, want := range []string{"gRPC, plaintext, token", "gRPC, TLS, token"} {
		if r := rs[i]; r.Workload != "connect" || r.Variant != want || r.Entries != 5 || r.Latency.Count != 5 || r.Latency.P50 <= 0 {
			t.Errorf("result %d: %+v; want %s, 5 connections timed", i, r, want)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("bench left %v in --data", left)
	}
	fails(t, 2, dir, "", []string{"bench", "connect", "--connections", "0"}, "--connections: 0 is too small: give a whole number, 1 or more")
}

// tern bench --storage measures object logs on the store, counts their
// objects before and after compaction, and leaves the store empty.
func TestBenchStorage(t *testing.T) {
	dir, store, out := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "r.jsonl")
	stdout := must(t, dir, "", "--storage", "dir://"+store, "bench", "--workload", "obj-put", "--in-flight", "64",
		"--flush-bytes", "1MiB", "--duration", "300ms", "--json", out)
	if !strings.Contains(stdout, "object 1MiB/20ms x4") || !strings.Contains(stdout, "per GB; after compaction") {
		t.Fatalf("no table, or no objects per GB:\n%s", stdout)
	}
	rs := readResults(t, out)
	if len(rs) != 1 {
		t.Fatalf("%d results, want 1", len(rs))
	}
	r := rs[0]
	if r.System != "tern" || r.Variant != "object 1MiB/20ms x4" || r.Workload != "obj-put" || r.Entries == 0 || r.Errors != 0 {
		t.Fatalf("result %+v", r)
	}
	// Fragments of 1 MiB (4 MiB at most, when a batch grows that big while
	// the uploads are busy): 240 to 950 a GB, and more when the 20 ms
	// interval cuts some short on a slow machine (1,005 in one CI run),
	// but nowhere near an object per append (15,000 a GB); after
	// compaction, objects of up to 128 MiB.
	before, after := r.Extra["objects_per_gb"], r.Extra["objects_per_gb_compacted"]
	if before < 200 || before > 2000 || r.Extra["objects_compacted"] < 1 || r.Extra["objects_compacted"] >= r.Extra["objects"] || after >= before || r.StorageBytes < r.Bytes {
		t.Fatalf("objects per GB %v before compaction, %v after; %d bytes stored of %d written: %v", before, after, r.StorageBytes, r.Bytes, r.Extra)
	}
	var left []string
	filepath.WalkDir(store, func(path string, d os.DirEntry, err error) error {
		if path != store {
			left = append(left, path)
		}
		return err
	})
	if len(left) != 0 {
		t.Fatalf("the store holds %q after the run", left)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("bench left %v in --data", left)
	}
}

func TestBenchDisk(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "r.jsonl")
	must(t, dir, "", "bench", "disk", "--workload", "conc-4k", "--producers", "4", "--duration", "100ms", "--json", out)
	must(t, dir, "", "bench", "disk", "--workload", "catchup-1g", "--total-bytes", "4194304", "--json", out)
	rs := readResults(t, out)
	var variants []string
	for _, r := range rs {
		if r.System != "disk" || r.Entries == 0 {
			t.Errorf("result %+v", r)
		}
		variants = append(variants, r.Workload+" "+r.Variant)
	}
	// conc-4k: buffered writes of 4 x 4 KiB to a growing file, a
	// preallocated one and new files, the 4 producers' group commit alone
	// and over gRPC, O_DIRECT writes of 4 x 4 KiB; then the read.
	if len(rs) != 7 || rs[0].Bytes%(16<<10) != 0 || rs[6].Bytes != 4<<20 ||
		rs[2].Variant != "write+fdatasync (new files)" || rs[2].Bytes%(16<<10) != 0 ||
		rs[3].Variant != "group commit of 4 producers" || rs[4].Variant != "group commit of 4 producers over loopback gRPC" ||
		rs[4].Spec.Producers != 4 || rs[4].Bytes%(4<<10) != 0 {
		t.Fatalf("results: %q", variants)
	}
}

func TestBenchUsage(t *testing.T) {
	dir := t.TempDir()
	fails(t, 2, dir, "", []string{"bench", "--workload", "nope"}, "no workload \"nope\"", "sync-1k")
	fails(t, 2, dir, "", []string{"bench", "--fsync", "sometimes"}, "--fsync")
	fails(t, 2, dir, "", []string{"bench", "--kind", "e2e"}, "unknown flag")
	fails(t, 2, dir, "", []string{"bench", "--workload", "e2e-1k", "--rate", "0"}, "needs a rate")
	fails(t, 2, dir, "", []string{"bench", "disk"}, "--workload is required")
	fails(t, 2, dir, "", []string{"bench", "--pairs", "3"}, "--pairs compares the server with the embedded library: add --grpc")
	fails(t, 2, dir, "", []string{"bench", "--workload", "e2e-10k", "--grpc", "--pairs", "3"}, "closed-loop append workload")
	fails(t, 2, dir, "", []string{"bench", "--grpc", "--pairs", "-1"}, "--pairs: -1 is too small: give a whole number, 0 or more")
	fails(t, 2, dir, "", []string{"bench", "--tls"}, "--tls applies to the server tern bench starts: add --grpc")
	fails(t, 2, dir, "", []string{"bench", "--auth", "--pairs", "2"}, "--auth applies to the server tern bench starts: add --grpc")
	fails(t, 2, dir, "", []string{"bench", "--flush-bytes", "1MiB"}, "--flush-bytes applies to logs in object storage: add --storage")
	fails(t, 2, dir, "", []string{"bench", "--grpc", "--truncate-behind", "1MiB"}, "--truncate-behind applies to local logs embedded in this process")
	fails(t, 2, dir, "", []string{"bench", "--reuse-segments", "-2"}, "--reuse-segments")
	fails(t, 2, dir, "", []string{"bench", "--zero-ahead", "1GiB"}, "--zero-ahead 1GiB: use a size up to 64MiB")
	fails(t, 2, dir, "", []string{"bench", "--grpc", "--zero-ahead", "0"}, "--zero-ahead applies to local logs embedded in this process")
	fails(t, 2, dir, "", []string{"--storage", "dir://" + dir, "bench", "--grpc"}, "does not combine with --grpc or --server")
	fails(t, 2, dir, "", []string{"--storage", "dir://" + dir, "bench", "--fsync", "never"}, "--fsync applies to local logs")
	fails(t, 2, dir, "", []string{"--storage", "http://x", "bench"}, "--storage", "dir:///PATH")
	fails(t, 1, filepath.Join(dir, "missing"), "", []string{"bench", "--duration", "10ms"}, "--data")
}

func TestBenchS3(t *testing.T) {
	s := miniotest.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	out := filepath.Join(t.TempDir(), "r.jsonl")
	target := "s3://bench-new/p?endpoint=" + s.Endpoint + "&tls=false"
	fails(t, 1, t.TempDir(), "", []string{"bench", "s3", target, "--duration", "100ms"}, `bucket "bench-new" does not exist`)
	must(t, t.TempDir(), "", "bench", "s3", target, "--create-bucket", "--size", "4KiB", "--concurrency", "2", "--duration", "200ms", "--json", out)
	rs := readResults(t, out)
	if len(rs) != 2 {
		t.Fatalf("%d results, want PUT and GET", len(rs))
	}
	for _, r := range rs {
		if r.System != "s3" || r.Workload != "s3-4KiB-x2" || r.Entries == 0 || r.Bytes != r.Entries*4096 || r.Latency.P50 == 0 {
			t.Errorf("result %+v", r)
		}
	}
	// The limits of workloads on object logs, under their names.
	must(t, t.TempDir(), "", "bench", "s3", target, "--workload", "obj-1k", "--duration", "200ms", "--json", out)
	must(t, t.TempDir(), "", "bench", "s3", target, "--workload", "catchup-1g", "--size", "64KiB", "--total-bytes", "1048576", "--json", out)
	rs = readResults(t, out)[2:]
	if len(rs) != 3 {
		t.Fatalf("%d results, want two PUT rows and a GET: %+v", len(rs), rs)
	}
	if r := rs[0]; r.Workload != "obj-1k" || r.Variant != "put" || r.Spec.EntryBytes != 1<<10 || r.Spec.Producers != 1 || r.Entries == 0 {
		t.Errorf("obj-1k limit %+v", r)
	}
	// obj-1k's PUTs also at its rate, as many at once as a log uploads,
	// completed in order.
	if r := rs[1]; r.Workload != "obj-1k" || r.Variant != "put 1000/s x4, in order" || r.Spec.EntryBytes != 1<<10 ||
		r.Spec.Rate != 1000 || r.Spec.InFlight != 4 || r.Entries == 0 || r.Entries > 200 {
		t.Errorf("obj-1k limit at its rate %+v", r)
	}
	// A catch-up's limit reads distinct objects once, cold: 1 MiB of 64 KiB.
	if r := rs[2]; r.Workload != "catchup-1g" || r.Variant != "get, cold" || r.Spec.EntryBytes != 64<<10 || r.Spec.Producers != 4 || r.Entries != 16 || r.Bytes != 1<<20 {
		t.Errorf("catchup-1g limit %+v", r)
	}
	fails(t, 2, t.TempDir(), "", []string{"bench", "s3", target, "--workload", "nope"}, "--workload", "obj-put")
	fails(t, 2, t.TempDir(), "", []string{"bench", "s3", target, "--size", "0"}, "--size")
	fails(t, 2, t.TempDir(), "", []string{"bench", "s3", "http://x"}, "s3://")
}

// Quorum logs on a cluster of tern serve processes: this test binary runs
// as tern for them (TestMain).
func TestBenchCluster(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "r.jsonl")
	must(t, dir, "", "bench", "--data", dir, "--workload", "quorum-1k", "--cluster", "3", "--duration", "300ms", "--warmup", "100ms", "--json", out)
	must(t, dir, "", "bench", "--data", dir, "--cluster", "3", "--ensemble", "3", "--ack-quorum", "3", "--entry-bytes", "4096", "--in-flight", "16",
		"--duration", "300ms", "--json", out)
	rs := readResults(t, out)
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2", len(rs))
	}
	for i, want := range []string{"quorum 3/2, 3 nodes", "quorum 3/3, 3 nodes"} {
		r := rs[i]
		if r.System != "tern" || r.Variant != want || r.Entries == 0 || r.Errors != 0 || r.Extra["replicas_per_disk"] != 3 || r.CPUSeconds <= 0 {
			t.Errorf("result %d: %+v; want %s, entries acknowledged, no errors, 3 replicas on the disk, the nodes' CPU", i, r, want)
		}
	}
	if rs[0].Workload != "quorum-1k" || rs[1].Spec.InFlight != 16 {
		t.Errorf("workloads: %s %+v", rs[0].Workload, rs[1].Spec)
	}
	// The run's directory, nodes and all, is gone.
	if left, _ := filepath.Glob(filepath.Join(dir, "tern-bench-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestBenchFailover kills the node serving a quorum log twice. Its nodes'
// lease is 3 s rather than the shortest, 1 s: on a loaded CI machine a node
// starved for a second loses a 1 s lease and exits, which the bench reports
// as errors the test counts.
func TestBenchFailover(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "r.jsonl")
	stderr := ternIn(t, dir, "", "bench", "failover", "--data", dir, "--kills", "2", "--node-ttl", "3s", "--json", out)
	if stderr.code != 0 {
		t.Fatalf("exit %d: %s", stderr.code, stderr.stderr)
	}
	rs := readResults(t, out)
	if len(rs) != 1 {
		t.Fatalf("%d results, want 1", len(rs))
	}
	r := rs[0]
	// The writer rides through each kill: its appends wait for the log's
	// new node rather than fail.
	if r.Workload != "failover" || r.Spec.Kind != loadgen.KindFailover || r.Latency.Count != 2 || r.Latency.P50 <= 0 || r.Errors != 0 {
		t.Errorf("result %+v", r)
	}
	// The errors the application saw are told by class, and add up.
	var classes float64
	for k, v := range r.Extra {
		if strings.HasPrefix(k, "errors_") {
			classes += v
		}
	}
	if classes != float64(r.Errors) || r.Extra["takeover_p50_s"] <= 0 {
		t.Errorf("errors %d, by class %v; extra %v", r.Errors, classes, r.Extra)
	}
	if n := strings.Count(stderr.stderr, "the next append was acknowledged"); n != 2 {
		t.Errorf("%d kills reported, want 2:\n%s", n, stderr.stderr)
	}
}

func TestBenchClusterUsage(t *testing.T) {
	dir := t.TempDir()
	fails(t, 2, dir, "", []string{"bench", "--workload", "quorum-1k"}, "quorum logs need a cluster: add --cluster N")
	fails(t, 2, dir, "", []string{"bench", "--cluster", "2"}, "--cluster 2", "at least 3")
	fails(t, 2, dir, "", []string{"bench", "--ensemble", "5"}, "--ensemble applies to quorum logs: add --cluster N")
	fails(t, 2, dir, "", []string{"bench", "--cluster", "3", "--grpc"}, "--grpc does not apply to quorum logs")
	fails(t, 2, dir, "", []string{"bench", "--cluster", "3", "--grpc", "--tls"}, "does not apply to quorum logs")
	fails(t, 2, dir, "", []string{"bench", "--cluster", "3", "--ensemble", "5"}, "--ensemble 5 needs as many nodes")
	fails(t, 2, dir, "", []string{"bench", "--cluster", "3", "--ack-quorum", "4"}, "--ack-quorum 4")
	fails(t, 2, dir, "", []string{"bench", "failover", "--cluster", "3"}, "at least 4")
	fails(t, 2, dir, "", []string{"bench", "failover", "--kills", "0"}, "--kills: 0 is too small: give a whole number, 1 or more")
	fails(t, 2, dir, "", []string{"bench", "--producers", "-1"}, "--producers: -1 is too small")
	fails(t, 2, dir, "", []string{"bench", "--rate", "-5"}, "--rate: -5 is too small")
	fails(t, 2, dir, "", []string{"bench", "--duration", "soon"}, "--duration: soon is not a duration", "3d")
	fails(t, 2, dir, "", []string{"bench", "--total-bytes", "lots"}, "--total-bytes: lots is not a size", "64MiB")
	fails(t, 2, dir, "", []string{"bench", "s3", "s3://b?endpoint=127.0.0.1:1", "--concurrency", "0"}, "--concurrency: 0 is too small")
	fails(t, 2, dir, "", []string{"bench", "connect", "--connections", "x"}, "--connections: x is not a number")
	fails(t, 2, dir, "", []string{"bench", "--cluster", "3", "--node-ttl", "1"}, "--node-ttl: 1 is not a duration")
}

// TestBenchSaysWhatItMeasures: with $TERN_SERVER set, as the quick start
// has it, tern bench measures through that server, and its first line says
// so before anything else; --help shows the real default of --duration.
func TestBenchSaysWhatItMeasures(t *testing.T) {
	addr := freeAddr(t) // nothing listens there
	r := ternEnv(t, map[string]string{"TERN_SERVER": addr}, "bench", "--duration", "100ms")
	first, _, _ := strings.Cut(r.stdout, "\n")
	want := "Measuring custom (1KiB entries, 1 producer, closed loop, for 100ms) through the server at " + addr + " ($TERN_SERVER), on logs created for the run and deleted after it; unset TERN_SERVER or give --data to measure Tern embedded."
	if r.code != 1 || first != want || !strings.Contains(r.stderr, "cannot reach the tern server at "+addr) {
		t.Errorf("bench with $TERN_SERVER: exit %d, first line %q, want %q; stderr:\n%s", r.code, first, want, r.stderr)
	}
	help := must(t, t.TempDir(), "", "bench", "--help")
	for _, want := range []string{"measured time of append and e2e workloads (default 10s)", "--producers int", "(default: the --workload's, else 1)"} {
		if !strings.Contains(help, want) {
			t.Errorf("bench --help lacks %q", want)
		}
	}
	if strings.Contains(help, "default 0s") {
		t.Errorf("bench --help still says a default of 0s:\n%s", help)
	}
}
