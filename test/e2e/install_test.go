package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's ways to get tern: scripts/tern builds this checkout into the
// user cache and runs it with the arguments given, and make install puts it
// in GOBIN and says where, and that the directory is not on PATH when it is
// not.
func TestInstallWays(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts/tern"), "version")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(lastLine(strings.Split(strings.TrimSpace(string(out)), "\n")), "tern ") {
		t.Fatalf("scripts/tern version: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cache, "tern/bin/tern-dev")); err != nil {
		t.Fatalf("scripts/tern left no binary in the cache: %v", err)
	}
	cmd = exec.Command(filepath.Join(root, "scripts/tern"), "read")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("scripts/tern read (a usage error): %v, want tern's exit code 2\n%s", err, out)
	}

	gobin := t.TempDir()
	cmd = exec.Command("make", "-s", "install")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "installed "+filepath.Join(gobin, "tern")) || !strings.Contains(string(out), gobin+" is not on your PATH") {
		t.Errorf("make install says:\n%s\nwant where it installed tern, and that %s is not on PATH", out, gobin)
	}
	if out, err := exec.Command(filepath.Join(gobin, "tern"), "version").CombinedOutput(); err != nil {
		t.Fatalf("the installed tern: %v\n%s", err, out)
	}
}
