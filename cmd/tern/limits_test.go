package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// log list --limit lists a page, and prints the token of the next one on
// stderr; --page-token goes on from there, in the same format.
func TestLogListPages(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		must(t, dir, "", "log", "create", fmt.Sprintf("p/%d", i))
	}
	var names []string
	token := ""
	next := regexp.MustCompile(`--page-token (\S+)`)
	for pages := 1; ; pages++ {
		args := []string{"log", "list", "--limit", "2"}
		if token != "" {
			args = append(args, "--page-token", token)
		}
		r := ternIn(t, dir, "", args...)
		if r.code != 0 {
			t.Fatalf("log list %q: exit %d, stderr %q", args, r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if !strings.HasPrefix(lines[0], "NAME") || len(lines) > 3 || pages > 4 {
			t.Fatalf("page %d printed:\n%s", pages, r.stdout)
		}
		for _, line := range lines[1:] {
			names = append(names, strings.Fields(line)[0])
		}
		m := next.FindStringSubmatch(r.stderr)
		if m == nil {
			if r.stderr != "" {
				t.Fatalf("the last page printed on stderr: %q", r.stderr)
			}
			break
		}
		token = m[1]
	}
	if got := strings.Join(names, " "); got != "p/0 p/1 p/2 p/3 p/4" {
		t.Fatalf("the pages listed %q", got)
	}
	if r := ternIn(t, dir, "", "log", "list", "--limit", "-1"); r.code != 2 {
		t.Fatalf("--limit -1: exit %d, want 2", r.code)
	}
}

// The limits come from the file, the environment and the flags, as the
// other settings do, and bad values are refused naming the setting.
func TestServeLimitsConfig(t *testing.T) {
	path := writeConfig(t, "max_logs: 10\nmax_logs_per_prefix: 5\nidle_connection_timeout: 1m\nreuse_segments: 0\nzero_ahead: 0\n")
	env := map[string]string{"TERN_MAX_LOGS_PER_PREFIX": "6", "TERN_MAX_REQUEST_BYTES": "32MiB", "TERN_MAX_STREAMS": "300", "TERN_LOG_IDLE_TIMEOUT": "5m"}
	got := printConfig(t, env, "--config", path, "--max-subscriptions-per-log", "7", "--max-streams-per-connection", "0")
	want := serveLimits{MaxLogs: 10, MaxLogsPerPrefix: 6, MaxSubscriptionsPerLog: 7, MaxStreamsPerConnection: 0, MaxStreams: "300",
		IdleConnectionTimeout: "1m", LogIdleTimeout: "5m", MaxRequestBytes: "32MiB", ReuseSegments: 0, ZeroAhead: "0"}
	if got.serveLimits != want {
		t.Fatalf("limits\n got %+v\nwant %+v", got.serveLimits, want)
	}
	lim, err := got.serveLimits.server()
	if err != nil || lim.MaxStreamsPerConnection != -1 || lim.MaxStreams != 300 || lim.MaxRequestBytes != 32<<20 || lim.LogIdleTimeout != 5*time.Minute || lim.ReuseSegments != -1 || lim.ZeroAheadBytes != -1 {
		t.Fatalf("server limits %+v, %v: want no stream limit per connection, 300 streams, 32 MiB requests, no segment files reused and no zeros ahead", lim, err)
	}
	if lim, err := defaultLimits().server(); err != nil || lim.MaxStreams != 0 || lim.ReuseSegments != tern.DefaultReuseSegments || lim.ZeroAheadBytes != tern.DefaultZeroAheadBytes {
		t.Fatalf("default limits %+v, %v: want max streams 0, from the memory limit, %d segment files reused and %d bytes of zeros ahead", lim, err, tern.DefaultReuseSegments, tern.DefaultZeroAheadBytes)
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"TERN_MAX_LOGS": "many"}, nil, "TERN_MAX_LOGS"},
		{map[string]string{"TERN_REUSE_SEGMENTS": "two"}, nil, "TERN_REUSE_SEGMENTS"},
		{nil, []string{"--max-request-bytes", "1KiB"}, "--max-request-bytes"},
		{nil, []string{"--zero-ahead", "1GiB"}, "--zero-ahead"},
		{map[string]string{"TERN_ZERO_AHEAD": "-1"}, nil, "TERN_ZERO_AHEAD"},
		{nil, []string{"--idle-connection-timeout", "soon"}, "--idle-connection-timeout"},
		{nil, []string{"--max-streams", "lots"}, "--max-streams"},
		{nil, []string{"--log-idle-timeout", "0s"}, "--log-idle-timeout"},
	} {
		r := ternEnv(t, tc.env, append([]string{"serve", "--print-config"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want 2 and a message naming %s", tc.env, tc.args, r.code, r.stderr, tc.want)
		}
	}
}
