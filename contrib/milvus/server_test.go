//go:build test

package milvus

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
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
// loopback, waits until /readyz answers 200, and returns its gRPC address.
// The test's cleanup stops it (SIGTERM to its PID, SIGKILL if it lingers).
func serve(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := ternBinary()
	if err != nil {
		t.Fatal(err)
	}
	addr, httpAddr := freeAddr(t), freeAddr(t)
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--data", t.TempDir(), "--listen", addr, "--http", httpAddr}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("tern serve logged:\n%s", b)
		}
	})
	hc := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := hc.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("tern serve exited before it was ready; it logged:\n%s", b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("tern serve was not ready within a minute (last: %v)", err)
		}
	}
}
