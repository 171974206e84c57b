package e2e

import (
	"context"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runTern runs the tern binary with args and returns its exit code and
// combined output; it fails the test if the command does not end in time.
func runTern(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ternBin, args...)
	cmd.Env = append(cmd.Environ(), "TERN_SERVER=")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("tern %s did not end within 30s:\n%s", strings.Join(args, " "), out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("tern %s: %v", strings.Join(args, " "), err)
	}
	return code, string(out)
}

// A served data directory is nobody else's: neither the CLI on the
// directory nor a second server may open it while the server runs (a second
// server fails at once instead of waiting on etcd's lock), and once it is
// stopped the CLI still refuses it, since its metadata is in etcd, not in a
// bbolt file it would start empty.
func TestServedDataDirectoryIsExclusive(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startServer(t, data)
	if code, out := runTern(t, "--server", s.addr, "log", "create", "hello"); code != 0 {
		t.Fatalf("log create through the server: exit %d\n%s", code, out)
	}

	code, out := runTern(t, "--dir", data, "log", "create", "other")
	if code != 1 || !strings.Contains(out, "in use by another process") {
		t.Fatalf("log create on the served directory: exit %d, want 1 saying it is in use\n%s", code, out)
	}
	code, out = runTern(t, "serve", "--data", data, "--listen", freeAddr(t), "--http", freeAddr(t))
	if code == 0 || !strings.Contains(out, "in use by another process") {
		t.Fatalf("a second server on the directory: exit %d, want a failure saying it is in use\n%s", code, out)
	}

	s.stop()
	code, out = runTern(t, "--dir", data, "log", "list")
	if code != 1 || !strings.Contains(out, "is in etcd") {
		t.Fatalf("log list on the stopped server's directory: exit %d, want 1 saying the metadata is in etcd\n%s", code, out)
	}
	s.restart()
	code, out = runTern(t, "--server", s.addr, "log", "list")
	if code != 0 || !strings.Contains(out, "hello") || strings.Contains(out, "other") {
		t.Fatalf("after all that, the server lists: exit %d\n%s", code, out)
	}
}

// A served data directory, the embedded etcd's included, is its owner's
// alone: no file or directory in it is open to the group or to others.
func TestServedDataDirectoryIsPrivate(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startServer(t, data)
	for _, args := range [][]string{{"log", "create", "private"}, {"sub", "create", "private", "s"}} {
		if code, out := runTern(t, append([]string{"--server", s.addr}, args...)...); code != 0 {
			t.Fatalf("tern %v: exit %d\n%s", args, code, out)
		}
	}
	cmd := exec.Command(ternBin, "--server", s.addr, "append", "private")
	cmd.Stdin = strings.NewReader("secret\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("append: %v\n%s", err, out)
	}
	s.stop()
	checkPrivate(t, data)
}

// checkPrivate fails for every file or directory under root that its group
// or others may use.
func checkPrivate(t *testing.T, root string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %v: want no access for group and others", path, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("walked %d paths under %s: the data directory is not what it should be", n, root)
	}
}
