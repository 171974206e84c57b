//go:build test

package milvus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Generous bounds, only so that a broken build fails instead of hanging.
const (
	serveReadyTimeout = 30 * time.Second
	serveExitTimeout  = 30 * time.Second
)

// logDirEnv names a directory where the servers write their logs too, besides
// the test's memory, which a panic in Milvus's framework (a scanner that
// ends early makes it dereference nil) loses with the test binary.
const logDirEnv = "TERN_MILVUS_LOG_DIR"

// ternServer is a `tern serve` process on a data directory. A restart keeps
// the directory, the addresses and the flags.
type ternServer struct {
	t        *testing.T
	name     string // in the test's log
	data     string
	addr     string // gRPC, what clients are given
	httpAddr string // /readyz
	args     []string
	env      []string
	out      *syncBuffer // stdout and stderr of every run

	mu   sync.Mutex // guards cmd, done and err, which a restart replaces
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // of cmd.Wait, once done is closed
}

// startTernServer starts `tern serve --data data` with args and env on free
// loopback ports and waits until it is ready. The test's cleanup kills it
// if it still runs, and prints the tail of its log if the test failed.
func startTernServer(t *testing.T, name, data string, env []string, args ...string) *ternServer {
	t.Helper()
	s := &ternServer{t: t, name: name, data: data, addr: stableAddr(t), httpAddr: stableAddr(t), args: args, env: env, out: new(syncBuffer)}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("%s (tern serve --data %s) logged:\n%s", s.name, s.data, s.out.tail(32<<10))
		}
	})
	// A port stableAddr found free may be taken before the server binds it
	// (by another test's connection): try other ports.
	for attempt := 1; ; attempt++ {
		err := s.run()
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%s: a port was taken before tern serve bound it; starting it on other ports", s.name)
		s.addr, s.httpAddr = stableAddr(t), stableAddr(t)
	}
}

// run starts the process and waits until /readyz answers 200. A server that
// exited because one of its ports was taken returns errPortTaken.
func (s *ternServer) run() error {
	args := append([]string{"serve", "--data", s.data, "--listen", s.addr, "--http", s.httpAddr}, s.args...)
	fmt.Fprintf(s.out, "--- tern %s\n", strings.Join(args, " "))
	bin, err := ternBinary() // server_test.go
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), s.env...)
	var w io.Writer = s.out
	var logFile *os.File
	if dir := os.Getenv(logDirEnv); dir != "" {
		if logFile, err = os.OpenFile(filepath.Join(dir, s.name+"-"+strings.ReplaceAll(s.addr, ":", "_")+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return fmt.Errorf("$%s: %w", logDirEnv, err)
		}
		w = io.MultiWriter(s.out, logFile)
	}
	cmd.Stdout, cmd.Stderr = w, w
	// No server outlives the test binary, even one that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return err
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done, s.err = cmd, done, nil
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(done)
	}()

	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(serveReadyTimeout)
	for {
		resp, err := hc.Get("http://" + s.httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			if strings.Contains(s.out.tail(4<<10), "address already in use") {
				return errPortTaken
			}
			return fmt.Errorf("%s exited before it was ready (%v)", s.name, s.exitErr())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("%s was not ready within %v (last: %v)", s.name, serveReadyTimeout, err)
		}
	}
}

var errPortTaken = errors.New("a port was taken")

func (s *ternServer) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// current returns the last run's process and its done channel.
func (s *ternServer) current() (*exec.Cmd, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd, s.done
}

// running reports whether the last run has not exited.
func (s *ternServer) running() bool {
	cmd, done := s.current()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// The methods below return errors rather than failing the test, so that a
// goroutine that disturbs a run can call them; they are safe for concurrent
// use with each other's reads, not with each other.

// restart starts the server again on the same directory, addresses and
// flags, and waits until it is ready. The last run must have exited.
func (s *ternServer) restart() error {
	if s.running() {
		return fmt.Errorf("%s: restart of a server that still runs", s.name)
	}
	// Its port may be held a little longer by what it left.
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := s.run()
		if !errors.Is(err, errPortTaken) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM, waits for the exit and requires exit code 0.
func (s *ternServer) stop() error {
	cmd, done := s.current()
	if !s.running() {
		return fmt.Errorf("%s: stop of a server that does not run", s.name)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(serveExitTimeout):
		s.kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", s.name, serveExitTimeout)
	}
	if err := s.exitErr(); err != nil {
		return fmt.Errorf("%s exited with %v after SIGTERM, want exit code 0", s.name, err)
	}
	return nil
}

// kill9 kills the server with SIGKILL and waits until it has exited.
func (s *ternServer) kill9() error {
	if !s.running() {
		return fmt.Errorf("%s: kill -9 of a server that does not run", s.name)
	}
	s.kill()
	return nil
}

func (s *ternServer) kill() {
	cmd, done := s.current()
	if s.running() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// stableAddr is a loopback address with a port that was free a moment ago,
// below the kernel's range of ephemeral ports: while a server is down
// between a kill and its restart, no connection this machine opens can
// take its port as a source port, which would keep it from starting again
// on its address.
func stableAddr(t *testing.T) string {
	t.Helper()
	low := 32768 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	if low <= 11000 {
		return freeAddr(t)
	}
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(10000+rand.IntN(low-10000)))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatalf("no free port found below %d", low)
	return ""
}

// watchdog ends the test binary, with the servers' logs and every
// goroutine's stack, if the test has not ended within d: Milvus's framework
// waits without a deadline, and a run that hangs would otherwise reach go
// test's timeout with no word from the servers.
func watchdog(t *testing.T, d time.Duration, servers ...*ternServer) {
	timer := time.AfterFunc(d, func() {
		for _, s := range servers {
			fmt.Fprintf(os.Stderr, "%s (tern serve --data %s) logged:\n%s\n", s.name, s.data, s.out.tail(32<<10))
		}
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		panic(fmt.Sprintf("%s did not end within %v", t.Name(), d))
	})
	t.Cleanup(func() { timer.Stop() })
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// tail is the last n bytes written.
func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.b.String()
	if len(s) > n {
		return "[...]\n" + s[len(s)-n:]
	}
	return s
}
