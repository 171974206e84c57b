package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern"
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
	must(t, dir, "", "bench", "--entry-bytes", "100", "--in-flight", "64", "--duration", "200ms", "--fsync", "never", "--json", out)
	rs := readResults(t, out)
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2", len(rs))
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
		t.Fatalf("bench left %v in --dir", left)
	}
}

// The target delivers what it acknowledged, to a tail reader and from the
// start: every entry, in order, none missing (Errors counts the missing).
func TestBenchTargetReads(t *testing.T) {
	for _, spec := range []loadgen.Spec{
		{Name: "e2e", Kind: loadgen.KindEndToEnd, EntryBytes: 100, Rate: 2000, Producers: 2, Logs: 2, Duration: 300 * time.Millisecond},
		{Name: "e2e async", Kind: loadgen.KindEndToEnd, EntryBytes: 100, Rate: 2000, InFlight: 10, Duration: 300 * time.Millisecond},
		{Name: "catchup", Kind: loadgen.KindCatchUp, EntryBytes: 4000, TotalBytes: 8 << 20},
		{Name: "pubsub", Kind: loadgen.KindPubSub, EntryBytes: 1000, Count: 3000, InFlight: 64},
	} {
		for _, via := range []string{"embedded", "grpc"} {
			t.Run(spec.Name+"/"+via, func(t *testing.T) {
				spec, err := spec.Normalize()
				if err != nil {
					t.Fatal(err)
				}
				opts := tern.Options{Dir: t.TempDir()}
				if via == "grpc" {
					s, err := startLoopbackServer(t.Context(), t.TempDir())
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					opts = tern.Options{Server: s.addr}
				}
				tt, err := openTernTarget(t.Context(), opts, "bench-", spec.Logs, tern.LogOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer tt.Close()
				r, err := loadgen.Run(t.Context(), spec, tt, loadgen.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if r.Errors != 0 || r.Entries == 0 {
					t.Fatalf("%d entries, %d errors: %s", r.Entries, r.Errors, r.FirstError)
				}
			})
		}
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
	// conc-4k: buffered, preallocated and O_DIRECT writes of 4 x 4 KiB; then the read.
	if len(rs) != 4 || rs[0].Bytes%(16<<10) != 0 || rs[3].Bytes != 4<<20 {
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
	fails(t, 1, filepath.Join(dir, "missing"), "", []string{"bench", "--duration", "10ms"}, "--dir")
}

func TestBenchS3(t *testing.T) {
	s := miniotest.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	out := filepath.Join(t.TempDir(), "r.jsonl")
	target := "s3://bench-new/p?endpoint=" + s.Endpoint + "&secure=false"
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
	fails(t, 2, t.TempDir(), "", []string{"bench", "s3", target, "--size", "0"}, "--size")
	fails(t, 2, t.TempDir(), "", []string{"bench", "s3", "http://x"}, "s3://")
}
