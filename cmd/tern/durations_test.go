package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDurationsTakeDays: a duration is "3d" or "1w" wherever durations are
// given: the flags of the CLI, and tern serve's flags, variables and file.
func TestDurationsTakeDays(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x", "--retention-age", "3d", "--segment-age", "1d12h")
	var info struct {
		Options struct {
			RetentionAge string `json:"retention_age"`
			SegmentAge   string `json:"segment_age"`
		} `json:"options"`
	}
	if err := json.Unmarshal([]byte(must(t, dir, "", "log", "describe", "x", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Options.RetentionAge != "72h" || info.Options.SegmentAge != "36h" {
		t.Errorf("--retention-age 3d --segment-age 1d12h made %+v, want 72h and 36h", info.Options)
	}
	file := writeConfig(t, "log_idle_timeout: 1w\n")
	store := "dir://" + t.TempDir()
	cfg := printConfig(t, map[string]string{"TERN_IDLE_CONNECTION_TIMEOUT": "2d"}, "--config", file, "--node-id", "n1", "--storage", store, "--node-ttl", "1d")
	if cfg.LogIdleTimeout != "1w" || cfg.IdleConnectionTimeout != "2d" || cfg.NodeTTL != "1d" {
		t.Errorf("serve took %q, %q and %q", cfg.LogIdleTimeout, cfg.IdleConnectionTimeout, cfg.NodeTTL)
	}
	for _, args := range [][]string{{"--log-idle-timeout", "3x"}, {"--idle-connection-timeout", "1y"}, {"--node-id", "n1", "--storage", store, "--node-ttl", "2 days"}} {
		r := ternEnv(t, nil, append([]string{"serve", "--print-config"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, args[len(args)-1]) || !strings.Contains(r.stderr, "--"+strings.TrimPrefix(args[len(args)-2], "--")) {
			t.Errorf("serve %q: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
	}
}
