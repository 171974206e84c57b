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

// A served data directory is its server's alone while it runs: the CLI on
// the directory says which server has it and how to reach it, and a second
// server fails at once instead of waiting on etcd's lock. Once the server is
// stopped the CLI opens the directory, metadata in its embedded etcd and
// all, and what it does there the server finds when it starts again.
func TestServedDataDirectoryIsExclusive(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startServer(t, data)
	if code, out := runTern(t, "--server", s.addr, "log", "create", "hello"); code != 0 {
		t.Fatalf("log create through the server: exit %d\n%s", code, out)
	}

	code, out := runTern(t, "--data", data, "log", "create", "other")
	if code != 1 || !strings.Contains(out, "in use by tern serve") || !strings.Contains(out, "--server "+s.addr) {
		t.Fatalf("log create on the served directory: exit %d, want 1 saying that the server at %s has it and to use --server\n%s", code, s.addr, out)
	}
	code, out = runTern(t, "serve", "--data", data, "--listen", freeAddr(t), "--http", freeAddr(t))
	if code == 0 || !strings.Contains(out, "in use by another process") {
		t.Fatalf("a second server on the directory: exit %d, want a failure saying it is in use\n%s", code, out)
	}

	s.stop()
	code, out = runTern(t, "--data", data, "log", "list")
	if code != 0 || !strings.Contains(out, "hello") {
		t.Fatalf("log list on the stopped server's directory: exit %d, want 0 listing hello\n%s", code, out)
	}
	if code, out := runTern(t, "--data", data, "log", "create", "other"); code != 0 {
		t.Fatalf("log create on the stopped server's directory: exit %d\n%s", code, out)
	}
	s.restart()
	code, out = runTern(t, "--server", s.addr, "log", "list")
	if code != 0 || !strings.Contains(out, "hello") || !strings.Contains(out, "other") {
		t.Fatalf("after all that, the server lists: exit %d, want hello and other\n%s", code, out)
	}
}

// A directory the CLI made is served as it is: tern serve moves its
// metadata from the bbolt file into its etcd on its first start and says
// so, with every entry at its offset, the subscription's cursor and the
// truncation point kept; the CLI then works on it again once the server is
// stopped, and the server sees what the CLI did.
func TestCLIDirectoryIsServed(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	cli := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(ternBin, args...)
		cmd.Env = append(cmd.Environ(), "TERN_SERVER=", "TERN_DATA="+data)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tern %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cli("", "log", "create", "hello")
	cli("a\nb\nc\nd\n", "append", "hello")
	cli("", "sub", "create", "hello", "s")
	cli("", "sub", "seek", "hello", "s", "2")
	cli("", "log", "truncate", "hello", "1")

	s := startServer(t, data)
	if !strings.Contains(s.stderr.String(), "moved the metadata of the data directory from its bbolt file into etcd") {
		t.Fatalf("tern serve on the CLI's directory did not say that it moved the metadata:\n%s", s.stderr.tail(4<<10))
	}
	if out := cli("", "--server", s.addr, "read", "hello", "--from", "1"); out != "b\nc\nd\n" {
		t.Fatalf("read through the server: %q, want b c d", out)
	}
	if out := cli("", "--server", s.addr, "sub", "describe", "hello", "s"); !strings.Contains(out, "2") {
		t.Fatalf("the subscription through the server: %q, want its cursor 2", out)
	}
	if out := cli("e\n", "--server", s.addr, "append", "hello"); strings.TrimSpace(out) != "4" {
		t.Fatalf("append through the server acknowledged %q, want offset 4", out)
	}
	s.stop()

	if out := cli("", "read", "hello", "--from", "1"); out != "b\nc\nd\ne\n" {
		t.Fatalf("read by the CLI after the server stopped: %q, want b c d e", out)
	}
	if out := cli("f\n", "append", "hello"); strings.TrimSpace(out) != "5" {
		t.Fatalf("append by the CLI after the server stopped acknowledged %q, want offset 5", out)
	}
	s.restart()
	if out := cli("", "--server", s.addr, "read", "hello", "--from", "1"); out != "b\nc\nd\ne\nf\n" {
		t.Fatalf("read through the restarted server: %q, want b c d e f", out)
	}
	if strings.Count(s.stderr.String(), "moved the metadata") != 1 {
		t.Fatalf("the metadata was moved more than once:\n%s", s.stderr.tail(8<<10))
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

// The CLI finds a stopped server's metadata under the etcd root the server
// used (--etcd-root), which the directory's mark names.
func TestCLIOnStoppedServerWithEtcdRoot(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startServer(t, data, "--etcd-root", "/custom/root/")
	if code, out := runTern(t, "--server", s.addr, "log", "create", "rooted"); code != 0 {
		t.Fatalf("log create through the server: exit %d\n%s", code, out)
	}
	s.stop()
	if code, out := runTern(t, "--data", data, "log", "list"); code != 0 || !strings.Contains(out, "rooted") {
		t.Fatalf("log list on the stopped server's directory: exit %d, want rooted listed\n%s", code, out)
	}
}
