package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// Generous bounds, only so that a broken build fails instead of hanging.
const (
	readyTimeout = 30 * time.Second
	exitTimeout  = 30 * time.Second
	waitTimeout  = 60 * time.Second
)

// server is a `tern serve` process on a data directory. Restarts keep the
// directory and the addresses.
type server struct {
	t        *testing.T
	data     string
	addr     string // gRPC
	httpAddr string
	stderr   *syncBuffer // of every run
	args     []string    // more flags of tern serve
	env      []string    // more environment variables of tern serve
	tls      *tls.Config // of a client of the HTTP listener when it serves TLS; nil: plain HTTP

	cmd  *exec.Cmd // the current run
	done chan struct{}
	err  error // of Wait, once done is closed
}

// startServer starts `tern serve` on data with free ports and waits until it
// is ready. The test's cleanup kills it if it still runs, and prints what it
// logged if the test failed.
func startServer(t *testing.T, data string, args ...string) *server {
	t.Helper()
	return startServerEnv(t, data, nil, args...)
}

// startServerEnv is startServer with more environment variables.
func startServerEnv(t *testing.T, data string, env []string, args ...string) *server {
	t.Helper()
	return startServerAt(t, data, "", env, args...)
}

// startServerAt is startServerEnv with the gRPC address given (a proxy in
// front of the server needs it first); "" picks a free one.
func startServerAt(t *testing.T, data, addr string, env []string, args ...string) *server {
	t.Helper()
	return startServerTLS(t, data, addr, nil, env, args...)
}

// startServerTLS is startServerAt for a server whose HTTP listener serves
// TLS (tern serve --tls-cert): its readiness is checked over HTTPS with
// clientTLS, which s.tls keeps for the test's own requests.
func startServerTLS(t *testing.T, data, addr string, clientTLS *tls.Config, env []string, args ...string) *server {
	t.Helper()
	picked := addr == ""
	if picked {
		addr = freeAddr(t)
	}
	s := &server{t: t, data: data, addr: addr, httpAddr: freeAddr(t), stderr: new(syncBuffer), args: args, env: env, tls: clientTLS}
	t.Cleanup(func() {
		s.kill()
		checkRaces(t, "tern serve", s.stderr)
		if t.Failed() {
			t.Logf("tern serve --data %s logged:\n%s", data, s.stderr.tail(64<<10))
		}
	})
	// A port freeAddr found free may be taken (as the source port of a
	// connection of another package's tests) before the server binds it:
	// start again on other ports.
	for attempt := 1; !s.startOrPortTaken(attempt < 3); attempt++ {
		t.Logf("a port of tern serve was taken before it bound it; starting it again on other ports")
		s.httpAddr = freeAddr(t)
		if picked {
			s.addr = freeAddr(t)
		}
	}
	return s
}

// checkRaces fails the test if a process built with the race detector (the
// children, and the server with TERN_E2E_RACE=1) reported a data race on
// stderr: a process that is killed does not exit with the race detector's
// code.
func checkRaces(t *testing.T, who string, stderr *syncBuffer) {
	if out := stderr.String(); strings.Contains(out, "WARNING: DATA RACE") {
		i := strings.Index(out, "WARNING: DATA RACE")
		t.Errorf("%s reported a data race:\n%s", who, out[max(i-100, 0):min(i+8<<10, len(out))])
	}
}

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// start runs the server and waits until /readyz answers 200.
func (s *server) start() {
	s.t.Helper()
	s.startOrPortTaken(false)
}

// startOrPortTaken is start, except that with retry a server that exited
// because one of its ports was taken returns false.
func (s *server) startOrPortTaken(retry bool) bool {
	t := s.t
	t.Helper()
	args := append([]string{"serve", "--data", s.data, "--listen", s.addr, "--http", s.httpAddr}, s.args...)
	fmt.Fprintf(s.stderr, "--- tern %s\n", strings.Join(args, " "))
	cmd := exec.Command(ternBin, args...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = s.stderr, s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.done, s.err = cmd, make(chan struct{}), nil
	go func(done chan struct{}) {
		err := cmd.Wait()
		s.err = err
		close(done)
	}(s.done)

	hc := &http.Client{Timeout: 2 * time.Second}
	scheme := "http://"
	if s.tls != nil {
		hc.Transport = &http.Transport{TLSClientConfig: s.tls}
		scheme = "https://"
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := hc.Get(scheme + s.httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-s.done:
			if retry && strings.Contains(s.stderr.tail(4<<10), "address already in use") {
				return false
			}
			t.Fatalf("tern serve exited before it was ready (%v); it logged:\n%s", s.err, s.stderr.tail(64<<10))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("tern serve was not ready within %v (last: %v); it logged:\n%s", readyTimeout, err, s.stderr.tail(64<<10))
		}
	}
}

// restart starts the server again on the same directory and addresses. The
// last run must have exited.
func (s *server) restart() {
	s.t.Helper()
	select {
	case <-s.done:
	default:
		s.t.Fatal("restart of a server that still runs")
	}
	s.start()
}

func (s *server) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// kill9 kills the server with SIGKILL and waits for it to exit.
func (s *server) kill9() {
	s.t.Helper()
	if !s.running() {
		s.t.Fatal("kill -9 of a server that does not run")
	}
	s.kill()
}

func (s *server) kill() {
	if s.running() {
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
}

// down stops the server with SIGTERM (how "sigterm", requiring a clean
// exit) or kills it with SIGKILL (any other how).
func (s *server) down(how string) {
	s.t.Helper()
	if how == "sigterm" {
		s.stop()
	} else {
		s.kill9()
	}
}

// startWithLog starts a server on a fresh directory and creates the log name
// with opts through a client that the test's cleanup closes.
func startWithLog(t *testing.T, name string, opts tern.LogOptions) (*server, *tern.Log) {
	t.Helper()
	srv := startServer(t, t.TempDir())
	l, err := openClient(t, srv.addr).CreateLog(deadline(t), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv, l
}

// stop stops the server with SIGTERM and requires a clean exit (code 0).
func (s *server) stop() {
	t := s.t
	t.Helper()
	if !s.running() {
		t.Fatal("stop of a server that does not run")
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(exitTimeout):
		s.kill()
		t.Fatalf("tern serve did not exit within %v of SIGTERM", exitTimeout)
	}
	if s.err != nil {
		t.Fatalf("tern serve exited with %v after SIGTERM, want exit code 0", s.err)
	}
}

// openClient opens a remote client of the server at addr, closed by the
// test's cleanup.
func openClient(t *testing.T, addr string) *tern.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	c, err := tern.Open(ctx, tern.Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// child is the test binary running a child role (see runChild).
type child struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *lineBuffer
	errs *syncBuffer
	done chan struct{}
	err  error // of Wait, once done is closed; stdout is complete then
}

// startChild runs role with args. The test's cleanup kills the child if it
// still runs, and prints its output if the test failed.
func startChild(t *testing.T, name, role string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"="+role)
	return startCmd(t, name, cmd, true)
}

// startCmd starts cmd as a child whose stdout lines and stderr the test
// reads. The test's cleanup kills it if it still runs, checks its stderr
// for data races if races, and prints its output if the test failed.
func startCmd(t *testing.T, name string, cmd *exec.Cmd, races bool) *child {
	t.Helper()
	c := &child{t: t, name: name, cmd: cmd, out: newLineBuffer(), errs: new(syncBuffer), done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.errs
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.kill()
		if races {
			checkRaces(t, name, c.errs)
		}
		if t.Failed() {
			lines, _ := c.out.snapshot()
			t.Logf("%s: %d lines on stdout, the last ones:\n%s\nstderr:\n%s", name, len(lines), strings.Join(lines[max(len(lines)-20, 0):], "\n"), c.errs.tail(16<<10))
		}
	})
	return c
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *child) kill() {
	if !c.exited() {
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
	}
}

// kill9 kills the child with SIGKILL and waits until it has exited and its
// output is read.
func (c *child) kill9() {
	c.t.Helper()
	if c.exited() {
		c.t.Fatalf("%s exited before it was killed (%v)", c.name, c.err)
	}
	c.kill()
}

// waitFor waits until the child's stdout lines satisfy ok, and returns them.
func (c *child) waitFor(what string, ok func(lines []string) bool) []string {
	c.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		lines, changed := c.out.snapshot()
		if ok(lines) {
			return lines
		}
		select {
		case <-changed:
		case <-c.done:
			if lines, _ := c.out.snapshot(); ok(lines) {
				return lines
			}
			c.t.Fatalf("%s exited (%v) before %s", c.name, c.err, what)
		case <-deadline:
			c.t.Fatalf("%s: no %s within %v", c.name, what, waitTimeout)
		}
	}
}

// readyOrPortTaken is waitFor(ok), except that a child that exited because
// its port was taken returns false.
func (c *child) readyOrPortTaken(ok func(lines []string) bool) bool {
	c.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		lines, changed := c.out.snapshot()
		if ok(lines) {
			return true
		}
		select {
		case <-changed:
		case <-c.done:
			lines, _ := c.out.snapshot()
			if ok(lines) {
				return true
			}
			if strings.Contains(strings.Join(lines, "\n")+c.errs.String(), "address already in use") {
				return false
			}
			c.t.Fatalf("%s exited (%v) before it was ready", c.name, c.err)
		case <-deadline:
			c.t.Fatalf("%s: not ready within %v", c.name, waitTimeout)
		}
	}
}

// wait waits for the child to exit by itself, requires exit code 0, and
// returns its stdout lines.
func (c *child) wait() []string {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(waitTimeout):
		c.t.Fatalf("%s did not exit within %v", c.name, waitTimeout)
	}
	if c.err != nil {
		c.t.Fatalf("%s exited with %v, want exit code 0", c.name, c.err)
	}
	lines, _ := c.out.snapshot()
	return lines
}

func (c *child) lines() []string {
	lines, _ := c.out.snapshot()
	return lines
}

// lineBuffer collects a process's output as lines. A last line without a
// newline (cut by a kill) is dropped.
type lineBuffer struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	changed chan struct{} // closed and replaced when lines grow
}

func newLineBuffer() *lineBuffer { return &lineBuffer{changed: make(chan struct{})} }

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	n := len(b.lines)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		b.lines = append(b.lines, string(b.partial[:i]))
		b.partial = b.partial[i+1:]
	}
	if len(b.lines) > n {
		close(b.changed)
		b.changed = make(chan struct{})
	}
	return len(p), nil
}

// snapshot returns the lines so far and a channel closed when more come.
func (b *lineBuffer) snapshot() ([]string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lines[:len(b.lines):len(b.lines)], b.changed
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

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
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

// event is one "verb offset payload" line of a child.
type event struct {
	off     tern.Offset
	payload string
}

// events parses the lines that start with verb ("ack", "got"), in order.
func events(t *testing.T, lines []string, verb string) []event {
	t.Helper()
	var es []event
	for _, line := range lines {
		rest, ok := strings.CutPrefix(line, verb+" ")
		if !ok {
			continue
		}
		off, payload, _ := strings.Cut(rest, " ")
		n, err := strconv.ParseUint(off, 10, 64)
		if err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		es = append(es, event{tern.Offset(n), payload})
	}
	return es
}

// lastLine is the last of lines, or "" if there are none.
func lastLine(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// readAll reads the entries [from, end) of l and requires their offsets to
// be dense.
func readAll(t *testing.T, l *tern.Log, from, end tern.Offset) []tern.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	r, err := l.OpenReader(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []tern.Entry
	for next := from; next < end; {
		es, err := r.NextBatch(ctx, 1024)
		if err != nil {
			t.Fatalf("read at %d of [%d, %d): %v", next, from, end, err)
		}
		for _, e := range es {
			if e.IsTick {
				t.Fatalf("read a tick at %d from a reader that did not ask for ticks", e.Offset)
			}
			if e.Offset != next {
				t.Fatalf("read offset %d, want %d: the offsets are not dense", e.Offset, next)
			}
			next++
			if e.Offset < end {
				out = append(out, e)
			}
		}
	}
	return out
}

// deadline is a context for one step of a test.
func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}
