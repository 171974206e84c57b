package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// docs/operations.md's backup, restore and move of a standalone server's
// data directory, as written there: stop the server, copy the directory
// (the embedded etcd's metadata is inside it), start it again; a copy
// started elsewhere (another path, as on another machine) serves the logs,
// entries, truncation points and subscription cursors of the moment of the
// copy, and the CLI works on it once its server is stopped.
func TestDataDirectoryBackupRestoreMove(t *testing.T) {
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")
	s := startServer(t, data)
	tern := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(ternBin, args...)
		cmd.Env = append(cmd.Environ(), "TERN_SERVER=")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tern %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	at := func(s *server) []string { return []string{"--server", s.addr} }
	tern("", append(at(s), "log", "create", "orders")...)
	tern("a\nb\nc\n", append(at(s), "append", "orders")...)
	tern("", append(at(s), "sub", "create", "orders", "indexer")...)
	tern("", append(at(s), "sub", "seek", "orders", "indexer", "2")...)
	tern("", append(at(s), "log", "truncate", "orders", "1")...)
	s.stop()

	backup := filepath.Join(tmp, "backup.tar")
	if out, err := exec.Command("tar", "-C", tmp, "-cf", backup, "data").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	s.restart()
	tern("d\n", append(at(s), "append", "orders")...) // after the backup: not in it
	s.stop()

	// Restore on "another machine": another path.
	moved := filepath.Join(tmp, "elsewhere")
	if out, err := exec.Command("mkdir", "-p", moved).CombinedOutput(); err != nil {
		t.Fatalf("mkdir: %v\n%s", err, out)
	}
	if out, err := exec.Command("tar", "-C", moved, "-xf", backup).CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	restored := startServer(t, filepath.Join(moved, "data"))
	if out := tern("", append(at(restored), "read", "orders", "--from", "1")...); out != "b\nc\n" {
		t.Fatalf("the restored copy reads %q, want b and c (truncated at 1, d came after the backup)", out)
	}
	if out := tern("", append(at(restored), "sub", "describe", "orders", "indexer")...); !strings.Contains(out, "2") {
		t.Fatalf("the restored subscription: %q, want its cursor 2", out)
	}
	if out := tern("e\n", append(at(restored), "append", "orders")...); strings.TrimSpace(out) != "3" {
		t.Fatalf("an append to the restored copy was acknowledged at %q, want 3", out)
	}
	restored.stop()
	if out := tern("", "--data", filepath.Join(moved, "data"), "read", "orders", "--from", "1"); out != "b\nc\ne\n" {
		t.Fatalf("the CLI on the stopped copy reads %q, want b c e", out)
	}
	// The original goes on with what it had.
	s.restart()
	if out := tern("", append(at(s), "read", "orders", "--from", "1")...); out != "b\nc\nd\n" {
		t.Fatalf("the original reads %q, want b c d", out)
	}
}
