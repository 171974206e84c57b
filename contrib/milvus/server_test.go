//go:build test

package milvus

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// ternBinary builds the tern binary of this repository once per test
// process, into a temporary directory removed by TestMain.
var ternBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "tern-milvus-test-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "tern")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/tern")
	cmd.Dir = "../.." // the repository's root module
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{err, out}
	}
	return bin, nil
})

var binDir string

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "go build ./cmd/tern: " + e.err.Error() + "\n" + string(e.out)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serve starts tern serve on a temporary data directory, listening on
// loopback, waits until it is ready, and returns its gRPC address. The
// test's cleanup stops it (harness_test.go).
func serve(t *testing.T, args ...string) string {
	t.Helper()
	return startTernServer(t, "tern serve", t.TempDir(), nil, args...).addr
}
