package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// manyLogsEnv sets how many logs TestManyLogs creates (default 100,000).
const manyLogsEnv = "TERN_E2E_MANY_LOGS"

// TestManyLogs creates 100,000 logs on one server, restarts it, and checks
// that idle logs cost no goroutine and little memory, that the server is
// ready again, that a paged listing returns every log without opening
// them, and that logs still take appends and read them back. It logs the
// figures for the closing note: RSS and goroutines per idle log, and the
// time to ready after the restart.
func TestManyLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 100,000 logs: minutes; run without -short")
	}
	n := 100_000
	if v := os.Getenv(manyLogsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			t.Fatalf("$%s=%q: want a number of logs, at least 100", manyLogsEnv, v)
		}
	}
	// 100 namespaces, so that no prefix reaches its default limit.
	data := t.TempDir()
	s := startServer(t, data, "--log-level", "warn")
	base := sample(t, s)
	name := func(i int) string { return fmt.Sprintf("ns%02d/log%06d", i%100, i) }

	c := openClient(t, s.addr)
	start := time.Now()
	createAll(t, c, n, name)
	t.Logf("created %d logs in %v", n, time.Since(start).Round(time.Millisecond))

	// A few logs take appends, then every log is idle.
	used := []int{0, n / 2, n - 1}
	for _, i := range used {
		appendAndCheck(t, c, name(i), 0, 3)
	}
	created := sample(t, s)
	t.Logf("after creating %d logs: %s (before: %s)", n, created, base)
	checkIdleCost(t, "after creating", n, base, created)

	s.stop()
	start = time.Now()
	s.restart()
	ready := time.Since(start)
	restarted := sample(t, s)
	t.Logf("after the restart: ready in %v; %s", ready.Round(time.Millisecond), restarted)
	checkIdleCost(t, "after the restart", n, base, restarted)

	c = openClient(t, s.addr)
	listed := listPaged(t, c, n)
	if len(listed) != n {
		t.Fatalf("the paged listing returned %d logs, want %d", len(listed), n)
	}
	for i := range n {
		if _, ok := listed[name(i)]; !ok {
			t.Fatalf("the paged listing left out %q", name(i))
		}
	}
	if g := sample(t, s).goroutines; g > restarted.goroutines+100 {
		t.Errorf("listing the logs took goroutines from %d to %d: it opened logs", restarted.goroutines, g)
	}
	for _, i := range used {
		appendAndCheck(t, c, name(i), 3, 5)
	}
	appendAndCheck(t, c, name(n/3), 0, 2)
}

// createAll creates logs 0 to n-1 with 8 workers.
func createAll(t *testing.T, c *tern.Client, n int, name func(int) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if _, err := c.CreateLog(ctx, name(i), tern.LogOptions{}); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("create %s: %w", name(i), err)
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// appendAndCheck appends count entries to a log that holds from entries,
// and reads the log back from its start.
func appendAndCheck(t *testing.T, c *tern.Client, name string, from, count int) {
	t.Helper()
	ctx := deadline(t)
	l, err := c.OpenLog(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < from+count; i++ {
		off, err := w.Append(ctx, tern.Entry{Payload: fmt.Appendf(nil, "%s #%d", name, i)})
		if err != nil {
			t.Fatalf("append to %s: %v", name, err)
		}
		if off != tern.Offset(i) {
			t.Fatalf("append to %s at offset %d, want %d", name, off, i)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	es := readAll(t, l, 0, tern.Offset(from+count))
	for i, e := range es {
		if want := fmt.Sprintf("%s #%d", name, i); string(e.Payload) != want {
			t.Fatalf("read %q at %d of %s, want %q", e.Payload, i, name, want)
		}
	}
}

// listPaged lists every log by pages of 10,000, checking the tokens.
func listPaged(t *testing.T, c *tern.Client, n int) map[string]tern.LogInfo {
	t.Helper()
	ctx := deadline(t)
	all := map[string]tern.LogInfo{}
	token := ""
	for pages := 0; ; pages++ {
		if pages > n/tern.MaxListPageSize+2 {
			t.Fatalf("the listing goes on past %d pages", pages)
		}
		page, err := c.ListLogsPage(ctx, "", token, tern.MaxListPageSize)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Logs) > tern.MaxListPageSize {
			t.Fatalf("a page of %d logs, more than asked for", len(page.Logs))
		}
		for _, info := range page.Logs {
			if _, dup := all[info.Name]; dup {
				t.Fatalf("%q listed twice", info.Name)
			}
			all[info.Name] = info
		}
		if page.NextPageToken == "" {
			return all
		}
		token = page.NextPageToken
	}
}

// usage is what a server process holds.
type usage struct {
	goroutines    int
	rssBytes      int64
	heapBytes     int64 // the Go heap in use, the embedded etcd's included
	etcdFileBytes int64 // the embedded etcd's database file
}

func (u usage) String() string {
	return fmt.Sprintf("%d goroutines, RSS %d MiB, Go heap in use %d MiB, etcd database %d MiB",
		u.goroutines, u.rssBytes>>20, u.heapBytes>>20, u.etcdFileBytes>>20)
}

// sample reads the server's goroutines from /metrics and its RSS from /proc.
func sample(t *testing.T, s *server) usage {
	t.Helper()
	resp, err := http.Get("http://" + s.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	u := usage{goroutines: -1}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("go_goroutines %q: %v", v, err)
			}
			u.goroutines = int(f)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			u.heapBytes = int64(f)
		}
	}
	if u.goroutines < 0 {
		t.Fatal("/metrics has no go_goroutines")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			u.rssBytes = kb << 10
		}
	}
	if u.rssBytes == 0 {
		t.Fatal(errors.New("no VmRSS in /proc/PID/status"))
	}
	if fi, err := os.Stat(filepath.Join(s.data, "etcd", "member", "snap", "db")); err == nil {
		u.etcdFileBytes = fi.Size()
	}
	return u
}

// checkIdleCost fails if n idle logs hold goroutines, or memory past a
// generous 4 KiB each, and 256 MiB for the rest, over the empty server's
// (the embedded etcd's copy of the metadata included).
func checkIdleCost(t *testing.T, when string, n int, base, now usage) {
	t.Helper()
	if now.goroutines > base.goroutines+200 {
		t.Errorf("%s: %d goroutines with %d idle logs, %d with none: idle logs hold goroutines", when, now.goroutines, n, base.goroutines)
	}
	if limit := base.rssBytes + 256<<20 + int64(n)*4<<10; now.rssBytes > limit {
		t.Errorf("%s: RSS %d MiB with %d idle logs, over %d MiB", when, now.rssBytes>>20, n, limit>>20)
	}
}
