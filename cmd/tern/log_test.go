package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCreateListDescribe(t *testing.T) {
	dir := t.TempDir()
	r := ternIn(t, dir, "", "log", "create", "tenant/a", "--segment-bytes", "64KiB", "--segment-age", "30m",
		"--retention-age", "72h", "--retention-bytes", "1GiB", "--retention-entries", "1000", "--max-entry-bytes", "1024")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("log create: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	must(t, dir, "", "log", "create", "tenant/b", "--fsync", "always")
	must(t, dir, "", "log", "create", "other")
	must(t, dir, "x\ny\n", "append", "tenant/a")

	out := must(t, dir, "", "log", "list", "--prefix", "tenant/")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME START END ENTRIES BYTES SEGMENTS FSYNC MODE FLUSH UPLOADS" {
		t.Fatalf("log list printed:\n%s", out)
	}
	// This process has not opened the logs: a local log closed cleanly is
	// described by its files, one never opened is empty.
	if f := strings.Fields(lines[1]); f[0] != "tenant/a" || f[1] != "0" || f[2] != "2" || f[3] != "2" || f[5] != "1" || f[6] != "always" || f[7] != "local" {
		t.Errorf("log list row %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "tenant/b" || f[2] != "0" || f[3] != "0" || f[4] != "0B" {
		t.Errorf("log list row %q", lines[2])
	}

	out = must(t, dir, "", "log", "list", "--json")
	var names []string
	for line := range strings.Lines(out) {
		var j logJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("log list --json line %q: %v", line, err)
		}
		names = append(names, j.Name)
	}
	if strings.Join(names, " ") != "other tenant/a tenant/b" {
		t.Errorf("log list --json listed %q", names)
	}

	out = must(t, dir, "", "log", "describe", "tenant/a")
	for _, want := range []string{"Name:               tenant/a", "Entries:            2", "Segment bytes:      64KiB",
		"Segment age:        30m", "Retention age:      72h", "Retention bytes:    1GiB", "Retention entries:  1000",
		"Max entry bytes:    1KiB", "Fsync:              always", "Writer epoch:       1", "Mode:               local"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("log describe lacks %q:\n%s", want, out)
		}
	}
	if out := must(t, dir, "", "log", "describe", "other"); !strings.Contains(out, "Retention age:      keep all\n") || !strings.Contains(out, "Segment age:        1h\n") {
		t.Errorf("log describe of defaults:\n%s", out)
	}

	var j logJSON
	if err := json.Unmarshal([]byte(must(t, dir, "", "log", "describe", "tenant/a", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if j.End != 2 || j.Entries != 2 || j.Epoch != 1 || j.Bytes == 0 || j.Segments == 0 || time.Since(j.Created) > time.Hour ||
		j.Options.SegmentBytes != 64<<10 || j.Options.SegmentAge != "30m" || j.Options.RetentionAge != "72h" ||
		j.Options.RetentionBytes != 1<<30 || j.Options.RetentionEntries != 1000 || j.Options.MaxEntryBytes != 1024 || j.Options.Fsync != "always" || j.Options.Mode != "local" || j.Options.FlushBytes != 0 {
		t.Errorf("log describe --json: %+v", j)
	}

	fails(t, 1, dir, "", []string{"log", "create", "other"}, `log already exists: "other"`, "tern log describe other")
	fails(t, 1, dir, "", []string{"log", "create", "bad//name"}, "invalid name: log")
	fails(t, 1, dir, "", []string{"log", "create", "small", "--segment-bytes", "100"}, "at least 4096 bytes")
}

func TestCreateWarnsOfUnsafeFsync(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ fsync, want string }{
		{"interval:10ms", "can lose up to 10ms of acknowledged entries"},
		{"never", "can lose any acknowledged entry"},
	} {
		r := ternIn(t, dir, "", "log", "create", "x-"+tc.fsync[:5], "--fsync", tc.fsync)
		if r.code != 0 || !strings.Contains(r.stderr, "tern: warning:") || !strings.Contains(r.stderr, "power failure") || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("log create --fsync %s: exit %d, stderr %q", tc.fsync, r.code, r.stderr)
		}
	}
	if out := must(t, dir, "", "log", "describe", "x-inter"); !strings.Contains(out, "interval:10ms") {
		t.Errorf("describe of an interval log:\n%s", out)
	}
}

func TestUnknownLog(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	for _, args := range [][]string{
		{"log", "describe", "nope"},
		{"log", "truncate", "nope", "1"},
		{"append", "nope"},
		{"read", "nope"},
	} {
		fails(t, 1, dir, "", args, `log not found: "nope"`, `tern log create nope`)
	}
	fails(t, 1, dir, "", []string{"log", "delete", "nope"}, `log not found: "nope"`, "tern log list")
}

func TestTruncateAndDelete(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x", "--segment-bytes", "4KiB")
	must(t, dir, strings.Repeat(strings.Repeat("z", 100)+"\n", 100), "append", "x")
	must(t, dir, "", "log", "truncate", "x", "60")
	var j logJSON
	if err := json.Unmarshal([]byte(must(t, dir, "", "log", "describe", "x", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if j.Start != 60 || j.End != 100 {
		t.Fatalf("after truncate 60: start %d end %d", j.Start, j.End)
	}
	fails(t, 1, dir, "", []string{"read", "x", "--from", "10"}, "offset 10", "now starts at offset 60", "--from 60")
	if out := must(t, dir, "", "read", "x"); strings.Count(out, "\n") != 40 {
		t.Errorf("read after truncate printed %d lines, want 40", strings.Count(out, "\n"))
	}
	fails(t, 1, dir, "", []string{"log", "truncate", "x", "101"}, "ends at offset 100")

	must(t, dir, "", "log", "delete", "x")
	fails(t, 1, dir, "", []string{"read", "x"}, `log not found: "x"`)
	if out := must(t, dir, "", "log", "list"); strings.Count(out, "\n") != 1 {
		t.Errorf("log list after delete:\n%s", out)
	}
}

// TestObjectLogEmbedded creates, appends to and reads an object log of a
// data directory opened by the command itself, with --storage or
// $TERN_STORAGE.
func TestObjectLogEmbedded(t *testing.T) {
	dir, store := t.TempDir(), "dir://"+t.TempDir()
	must(t, dir, "", "--storage", store, "log", "create", "x", "--mode", "object", "--flush-bytes", "64KiB", "--uploads-in-flight", "2")
	if out := must(t, dir, "one\ntwo\n", "--storage", store, "append", "x"); out != "0\n1\n" {
		t.Errorf("append printed %q", out)
	}
	env := map[string]string{"TERN_STORAGE": store}
	if r := ternEnv(t, env, "--data", dir, "read", "x"); r.code != 0 || r.stdout != "one\ntwo\n" {
		t.Errorf("read with $TERN_STORAGE: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	out := must(t, dir, "", "--storage", store, "log", "describe", "x")
	for _, want := range []string{"Mode:               object\n", "Flush bytes:        64KiB\n", "Flush interval:     20ms\n", "Uploads in flight:  2\n", "Entries:            2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("log describe lacks %q:\n%s", want, out)
		}
	}
	must(t, dir, "", "--storage", store, "log", "create", "l")
	out = must(t, dir, "", "--storage", store, "log", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME START END ENTRIES BYTES SEGMENTS FSYNC MODE FLUSH UPLOADS" ||
		strings.Join(strings.Fields(lines[1])[6:], " ") != "always local - -" || strings.Join(strings.Fields(lines[2])[6:], " ") != "- object 64KiB/20ms 2" {
		t.Errorf("log list printed:\n%s", out)
	}
	out = must(t, dir, "", "--storage", store, "log", "list", "--json")
	if !strings.Contains(out, `"mode":"local"`) || !strings.Contains(out, `"mode":"object","flush_bytes":65536,"flush_interval":"20ms","uploads_in_flight":2}`) {
		t.Errorf("log list --json printed:\n%s", out)
	}

	// Without its store, the object log cannot be opened.
	for _, args := range [][]string{{"read", "x"}, {"append", "x"}, {"log", "describe", "x"}} {
		fails(t, 1, dir, "two\n", args, `log "x" is in object storage`, "--storage")
	}
	fails(t, 2, dir, "", []string{"log", "create", "y", "--mode", "object"}, "--mode object keeps the log in an object store", "--storage URL (or $TERN_STORAGE)")
	if out := must(t, dir, "", "--storage", store, "log", "list"); strings.Contains(out, "y ") {
		t.Errorf("log create --mode object without --storage created the log:\n%s", out)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	r := ternEnv(t, map[string]string{"TERN_STORAGE": store, "TERN_STORAGE_SSEC_KEY_FILE": missing}, "--data", dir, "read", "x")
	if r.code != 2 || !strings.Contains(r.stderr, "tern: SSE-C key file "+missing+" does not exist: check $TERN_STORAGE_SSEC_KEY_FILE") {
		t.Errorf("read with a missing $TERN_STORAGE_SSEC_KEY_FILE: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if out := must(t, dir, "", "log", "describe", "l"); !strings.Contains(out, "Mode:               local\n") {
		t.Errorf("log describe of a local log:\n%s", out)
	}
}

func TestCreateModeUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"--mode", "remote"}, []string{`--mode: remote is not valid: give local, object or quorum`}},
		{[]string{"--mode", "local", "--flush-bytes", "1MiB"}, []string{"--flush-bytes applies to object logs, not to --mode local"}},
		{[]string{"--mode", "local", "--flush-interval", "5ms"}, []string{"--flush-interval applies to object logs"}},
		{[]string{"--mode", "local", "--uploads-in-flight", "8"}, []string{"--uploads-in-flight applies to object logs"}},
		{[]string{"--uploads-in-flight", "8"}, []string{"--uploads-in-flight applies to object logs: add --mode object"}},
		{[]string{"--mode", "object", "--flush-bytes", "lots"}, []string{`--flush-bytes: lots is not a size: give a number of bytes`}},
		{[]string{"--mode", "object", "--flush-interval", "-"}, []string{`--flush-interval: - is not a duration`, "3d"}},
		{[]string{"--uploads-in-flight", "-1"}, []string{`--uploads-in-flight: -1 is too small: give a whole number, 0 or more`}},
		{[]string{"--ensemble", "x"}, []string{`--ensemble: x is not a number: give a whole number, 0 or more`}},
		{[]string{"--ack-quorum", "1.5"}, []string{`--ack-quorum: 1.5 is not a number`}},
		{[]string{"--segment-bytes", "-1"}, []string{`--segment-bytes: -1 is not a size`}},
		{[]string{"--retention-bytes", "1G"}, []string{`--retention-bytes: 1G is not a size`}},
		{[]string{"--max-entry-bytes", "big"}, []string{`--max-entry-bytes: big is not a size`}},
		{[]string{"--retention-entries", "-4"}, []string{`--retention-entries: -4 is too small`}},
		{[]string{"--retention-age", "3 days"}, []string{`--retention-age: "3 days" is not a duration: give a number with a unit`, "3d"}},
	} {
		stderr := fails(t, 2, dir, "", append([]string{"log", "create", "y"}, tc.args...), tc.wants...)
		if strings.Contains(stderr, "Usage:") || !strings.HasSuffix(stderr, "See \"tern log create --help\".\n") || strings.Count(stderr, "\n") != 2 {
			t.Errorf("tern log create %q: not one line and a pointer to --help:\n%s", tc.args, stderr)
		}
	}
	r := ternEnv(t, nil, "--storage", "dir://"+t.TempDir(), "--server", "127.0.0.1:7070", "log", "list")
	if r.code != 2 || !strings.Contains(r.stderr, "tern: --server and --storage cannot be used together") || strings.Contains(r.stderr, "Usage:") {
		t.Errorf("tern --storage --server log list: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	// $TERN_STORAGE is for a data directory, and a server ignores it.
	if r := ternEnv(t, map[string]string{"TERN_STORAGE": "dir:///x"}, "--server", freeAddr(t), "log", "list"); r.code != 1 || !strings.Contains(r.stderr, "cannot reach the tern server") {
		t.Errorf("tern --server log list with $TERN_STORAGE: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
