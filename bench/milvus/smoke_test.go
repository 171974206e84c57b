package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs Tern's embedded local logs through its Milvus backend and
// embedded Woodpecker with local storage through the harness, briefly: both
// must acknowledge appends without errors and read back, through a scanner,
// every byte they wrote.
func TestSmoke(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/zilliztech/woodpecker").Output()
	if err != nil {
		t.Fatalf("find Woodpecker's module (its shipped config): go list -m github.com/zilliztech/woodpecker: %v; run 'go mod download' in bench/milvus", err)
	}
	e := &env{wpConfig: filepath.Join(strings.TrimSpace(string(out)), "config", "woodpecker.yaml")}
	const total = 4 << 20
	for _, name := range []string{"tern-local", "woodpecker-local"} {
		rs, err := runSystem(context.Background(), e, name, filepath.Join(t.TempDir(), name),
			[]string{"milvus-conc-1k", "milvus-catchup-1g"}, time.Second, 0, 1, total)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rs) != 2 {
			t.Fatalf("%s: %d results, want 2", name, len(rs))
		}
		for _, r := range rs {
			if r.Errors > 0 {
				t.Errorf("%s %s: %d errors, the first: %s", name, r.Workload, r.Errors, r.FirstError)
			}
		}
		if w := rs[0]; w.Entries < 100 || w.Latency.P50 <= 0 {
			t.Errorf("%s %s: %d appends acknowledged, p50 %v µs: want at least 100 and a latency", name, w.Workload, w.Entries, w.Latency.P50)
		}
		if c := rs[1]; c.Bytes != total {
			t.Errorf("%s %s: read back %d bytes, want %d", name, c.Workload, c.Bytes, total)
		}
	}
}
