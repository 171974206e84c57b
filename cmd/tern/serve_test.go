package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// syncBuffer is a bytes.Buffer safe for concurrent use: a running server's
// stderr.
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

// testServer is a tern serve running in the test's process.
type testServer struct {
	addr, http string // the bound gRPC and HTTP addresses
	stderr     *syncBuffer
	cancel     context.CancelFunc // interrupts it, as SIGTERM does
	code       chan int           // its exit code, once it returns
}

var startLine = regexp.MustCompile(`tern: serving on (\S+) \(metrics and health on http://(\S+)\); try: tern --server (\S+) log create hello\n`)

// startServer runs tern serve on the data directory data, with an embedded
// etcd unless args say otherwise, on ports of the system's choosing, which it learns from the start
// line.
func startServer(t *testing.T, data string, args ...string) *testServer {
	t.Helper()
	return startServerApp(t, &app{getenv: noEnv}, data, args...)
}

// noEnv is an empty environment, so that $TERN_* of the test's process
// change nothing.
func noEnv(string) string { return "" }

// startServerApp is startServer with the app a.
func startServerApp(t *testing.T, a *app, data string, args ...string) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &testServer{stderr: &syncBuffer{}, cancel: cancel, code: make(chan int, 1)}
	a.stdin, a.stdout, a.stderr = strings.NewReader(""), io.Discard, s.stderr
	args = append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, args...)
	go func() { s.code <- a.run(ctx, args) }()
	t.Cleanup(func() {
		cancel()
		<-s.code
	})
	deadline := time.After(60 * time.Second)
	for {
		if m := startLine.FindStringSubmatch(s.stderr.String()); m != nil {
			s.addr, s.http = m[1], m[2]
			if m[3] != m[1] {
				t.Errorf("start line suggests --server %s, serving on %s", m[3], m[1])
			}
			return s
		}
		select {
		case code := <-s.code:
			s.code <- code
			t.Fatalf("serve exited %d before serving:\n%s", code, s.stderr.String())
		case <-deadline:
			t.Fatalf("serve did not start within 60s:\n%s", s.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop interrupts the server and checks that it stops gracefully.
func (s *testServer) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case code := <-s.code:
		s.code <- code
		if code != 0 {
			t.Fatalf("interrupted serve: exit %d, stderr:\n%s", code, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop within 30s of the interrupt:\n%s", s.stderr.String())
	}
	for _, want := range []string{"shutting down", "msg=stopped"} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("serve did not log %q:\n%s", want, s.stderr.String())
		}
	}
}

// run runs a command line against the server.
func (s *testServer) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), append([]string{"--server", s.addr}, args...), strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

func (s *testServer) must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := s.run(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("tern --server %s %q: exit %d\nstderr: %s", s.addr, args, r.code, r.stderr)
	}
	return r.stdout
}

func (s *testServer) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.http + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// TestServe runs the commands against a server, checks its HTTP endpoints,
// and stops it.
func TestServe(t *testing.T) {
	s := startServer(t, t.TempDir())
	for _, want := range []string{"level=INFO msg=\"etcd embedded\"", "msg=\"grpc listening\" addr=" + s.addr, "msg=\"http listening\""} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("serve did not log %q:\n%s", want, s.stderr.String())
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := s.get(t, path); code != 200 || body != "ok\n" {
			t.Errorf("GET %s: %d %q", path, code, body)
		}
	}

	// The log commands.
	s.must(t, "", "log", "create", "tenant/a")
	if out := s.must(t, "alpha\nbeta\ngamma\n", "append", "tenant/a"); out != "0\n1\n2\n" {
		t.Errorf("append printed %q", out)
	}
	if out := s.must(t, "d\ne\n", "append", "tenant/a", "--batch", "2"); out != "3\n4\n" {
		t.Errorf("append --batch printed %q", out)
	}
	if out := s.must(t, "", "read", "tenant/a"); out != "alpha\nbeta\ngamma\nd\ne\n" {
		t.Errorf("read printed %q", out)
	}
	if out := s.must(t, "", "read", "tenant/a", "--from", "1", "--limit", "1", "--format", "json"); !strings.HasPrefix(out, `{"offset":1,"payload":"beta","time":"`) {
		t.Errorf("read --format json printed %q", out)
	}
	if out := s.must(t, "", "log", "describe", "tenant/a"); !strings.Contains(out, "Name:               tenant/a\n") || !strings.Contains(out, "Entries:            5\n") {
		t.Errorf("log describe printed:\n%s", out)
	}
	s.must(t, "", "log", "create", "other")
	out := s.must(t, "", "log", "list")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "other ") || !strings.HasPrefix(lines[2], "tenant/a ") {
		t.Errorf("log list printed:\n%s", out)
	}
	s.must(t, "", "log", "truncate", "tenant/a", "2")
	if out := s.must(t, "", "read", "tenant/a"); out != "gamma\nd\ne\n" {
		t.Errorf("read after truncate printed %q", out)
	}
	s.fails(t, 1, []string{"read", "tenant/a", "--from", "1"}, "now starts at offset 2", "--from 2")
	s.fails(t, 1, []string{"log", "describe", "nope"}, `log not found: "nope" on server `+s.addr, "tern log create nope")
	s.fails(t, 1, []string{"log", "create", "other"}, `log already exists: "other" on server `+s.addr)
	s.fails(t, 1, []string{"log", "create", "bad//name"}, "invalid name: log")
	s.must(t, "", "log", "delete", "other")
	s.fails(t, 1, []string{"log", "delete", "other"}, `log not found: "other" on server `+s.addr)

	// Subscriptions.
	subScenario(t, s.run)
	subFollow(t, s)

	code, body := s.get(t, "/metrics")
	if code != 200 {
		t.Errorf("GET /metrics: %d", code)
	}
	for _, want := range []string{"\ntern_server_requests_total{", "\ngo_goroutines ", "\nprocess_"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// pprof is off unless --pprof.
	if code, body := s.get(t, "/debug/pprof/"); code != 404 || !strings.Contains(body, "--pprof") {
		t.Errorf("GET /debug/pprof/ without --pprof: %d %q", code, body)
	}

	s.stop(t)
	if _, err := http.Get("http://" + s.http + "/healthz"); err == nil {
		t.Errorf("the HTTP listener is still open after serve returned")
	}
}

func (s *testServer) fails(t *testing.T, code int, args []string, wants ...string) {
	t.Helper()
	r := s.run(t, "", args...)
	if r.code != code || !strings.HasPrefix(r.stderr, "tern: ") {
		t.Fatalf("tern --server %q: exit %d, want %d\nstderr: %s", args, r.code, code, r.stderr)
	}
	for _, w := range wants {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("tern --server %q: stderr lacks %q:\n%s", args, w, r.stderr)
		}
	}
}

// subFollow consumes a subscription with --follow while entries are
// appended, interrupts it, and checks its cursor was committed.
func subFollow(t *testing.T, s *testServer) {
	s.must(t, "", "log", "create", "follow")
	s.must(t, "", "sub", "create", "follow", "f")
	s.must(t, "before\n", "append", "follow")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, outw := io.Pipe()
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		c := run(ctx, []string{"--server", s.addr, "sub", "consume", "follow", "f", "--follow"}, strings.NewReader(""), outw, &stderr)
		outw.Close()
		code <- c
	}()
	lines := bufio.NewScanner(out)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("sub consume --follow ended early: %v, stderr:\n%s", lines.Err(), stderr.String())
		}
		return lines.Text()
	}
	if got := next(); got != "before" {
		t.Fatalf("sub consume --follow printed %q, want before", got)
	}
	s.must(t, "after 1\nafter 2\n", "append", "follow")
	for _, want := range []string{"after 1", "after 2"} {
		if got := next(); got != want {
			t.Fatalf("sub consume --follow printed %q, want %q", got, want)
		}
	}
	cancel()
	for lines.Scan() {
		t.Errorf("sub consume --follow printed %q after the interrupt", lines.Text())
	}
	if c := <-code; c != 0 || stderr.String() != "" {
		t.Fatalf("interrupted sub consume --follow: exit %d, stderr:\n%s", c, stderr.String())
	}
	var j subJSON
	if err := json.Unmarshal([]byte(s.must(t, "", "sub", "describe", "follow", "f", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if j.Cursor != 3 || j.Lag != 0 {
		t.Errorf("after consume --follow of 3 entries: cursor %d lag %d", j.Cursor, j.Lag)
	}
}

// streamGrace is how long internal/server's shutdown lets unary calls
// finish before it ends the open streams.
const streamGrace = 2 * time.Second

// TestServeShutdownEndsStreams stops a server while a reader follows a log
// and a consumer follows a subscription: the shutdown ends their streams
// rather than waiting for them, and the consumer's cursor is committed.
func TestServeShutdownEndsStreams(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data)
	s.must(t, "", "log", "create", "x")
	s.must(t, "", "sub", "create", "x", "s")
	s.must(t, "one\ntwo\n", "append", "x")
	type follower struct {
		out    *io.PipeReader
		stderr *syncBuffer
		code   chan int
	}
	follow := func(args ...string) follower {
		out, outw := io.Pipe()
		f := follower{out, &syncBuffer{}, make(chan int, 1)}
		go func() {
			c := run(t.Context(), append([]string{"--server", s.addr}, args...), strings.NewReader(""), outw, f.stderr)
			outw.Close()
			f.code <- c
		}()
		return f
	}
	reader, consumer := follow("read", "x", "--follow"), follow("sub", "consume", "x", "s", "--follow")
	for _, f := range []follower{reader, consumer} {
		lines := bufio.NewScanner(f.out)
		for _, want := range []string{"one", "two"} {
			if !lines.Scan() || lines.Text() != want {
				t.Fatalf("follower printed %q, want %q; stderr:\n%s", lines.Text(), want, f.stderr.String())
			}
		}
		go io.Copy(io.Discard, f.out)
	}
	start := time.Now()
	s.stop(t)
	if d := time.Since(start); d > streamGrace+5*time.Second {
		t.Errorf("shutdown with open streams took %s", d)
	}
	for _, f := range []follower{reader, consumer} {
		if c := <-f.code; c != 1 || !strings.Contains(f.stderr.String(), "shutting down") {
			t.Errorf("follower of a server that stopped: exit %d, stderr:\n%s", c, f.stderr.String())
		}
	}

	// Restarted, the server has the data, and the consumer's cursor.
	s = startServer(t, data)
	if out := s.must(t, "", "sub", "list", "x"); !strings.HasPrefix(strings.Join(strings.Fields(out), " "), "NAME CURSOR LAG PIN CREATED s 2 0 no ") {
		t.Errorf("sub list after restart:\n%s", out)
	}
	if out := s.must(t, "three\n", "append", "x"); out != "2\n" {
		t.Errorf("append after restart printed %q", out)
	}
	if out := s.must(t, "", "sub", "consume", "x", "s"); out != "three\n" {
		t.Errorf("consume after restart printed %q", out)
	}
	s.stop(t)
}

// TestServeShutdownBounded stops a server whose external etcd is gone: the
// shutdown cannot release the writers' claims, but it ends in bounded time.
func TestServeShutdownBounded(t *testing.T) {
	t.Parallel()
	etcd, err := meta.StartEtcd(t.Context(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	s := startServerApp(t, &app{getenv: noEnv, shutdownTimeout: 3 * time.Second}, t.TempDir(), "--etcd", strings.Join(etcd.Endpoints(), ","))
	if !strings.Contains(s.stderr.String(), "msg=\"etcd external\" endpoints="+etcd.Endpoints()[0]) {
		t.Errorf("serve did not log its external etcd:\n%s", s.stderr.String())
	}
	s.must(t, "", "log", "create", "x")
	s.must(t, "one\n", "append", "x") // the server keeps the writer, whose claim is in etcd
	etcd.Close()
	start := time.Now()
	s.cancel()
	code := <-s.code
	s.code <- code
	if d := time.Since(start); d > 3*time.Second+streamGrace+5*time.Second {
		t.Errorf("shutdown without etcd took %s", d)
	}
	if code != 0 && !strings.Contains(s.stderr.String(), "tern: shutdown did not finish within 3s") {
		t.Errorf("shutdown without etcd: exit %d, stderr:\n%s", code, s.stderr.String())
	}
}

func TestServeNoServer(t *testing.T) {
	addr := freeAddr(t)
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"--server", addr, "log", "list"}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "tern: cannot reach the tern server at "+addr) || !strings.Contains(errb.String(), "--server") {
		t.Errorf("log list --server with no server: exit %d, stderr:\n%s", code, errb.String())
	}
	r := ternEnv(t, map[string]string{"TERN_SERVER": addr}, "read", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach the tern server at "+addr) || !strings.Contains(r.stderr, "$TERN_SERVER") {
		t.Errorf("read with $TERN_SERVER and no server: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestServerAndDir(t *testing.T) {
	dir := t.TempDir()
	stderr := fails(t, 2, dir, "", []string{"--server", "127.0.0.1:7070", "log", "list"}, "--server and --data cannot be used together")
	if !strings.Contains(stderr, `See "tern log list --help".`) || strings.Contains(stderr, "Usage:") {
		t.Errorf("usage printed, or no pointer to --help:\n%s", stderr)
	}
	// --dir and $TERN_DIR are the old names of --data and $TERN_DATA,
	// everywhere: they still work, and say so.
	for _, args := range [][]string{{"serve", "--dir", dir, "--print-config"}, {"--dir", dir, "serve", "--print-config"}} {
		r := ternEnv(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "data: "+dir) || !strings.Contains(r.stderr, "use --data") {
			t.Errorf("tern %q: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 0, data: %s, and a hint to use --data", args, r.code, r.stdout, r.stderr, dir)
		}
	}
	if r := ternEnv(t, map[string]string{"TERN_DIR": dir}, "serve", "--print-config"); r.code != 0 || !strings.Contains(r.stdout, "data: "+dir) {
		t.Errorf("tern serve --print-config with $TERN_DIR: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := ternEnv(t, map[string]string{"TERN_DIR": dir}, "log", "list"); r.code != 0 || !strings.Contains(r.stderr, "set TERN_DATA="+dir+" instead") {
		t.Errorf("tern log list with $TERN_DIR: exit %d, stderr:\n%s\nwant a hint to set $TERN_DATA", r.code, r.stderr)
	}
	if r := ternEnv(t, map[string]string{"TERN_DATA": dir}, "serve", "--print-config"); r.code != 0 || !strings.Contains(r.stdout, "data: "+dir) {
		t.Errorf("tern serve --print-config with $TERN_DATA: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	r := ternEnv(t, nil, "--server", "127.0.0.1:7070", "serve")
	if r.code != 2 || !strings.Contains(r.stderr, "tern serve takes no --server") {
		t.Errorf("tern --server ADDR serve: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	// An explicit --data beats $TERN_SERVER.
	must(t, dir, "", "log", "create", "x")
	r = ternEnv(t, map[string]string{"TERN_SERVER": freeAddr(t)}, "--data", dir, "log", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "x ") {
		t.Errorf("log list with --data and $TERN_SERVER: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// freeAddr is a loopback address nothing listens on.
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

func TestServePortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().String()
	for _, tc := range []struct{ flag, other string }{{"--listen", "--http"}, {"--http", "--listen"}} {
		r := ternEnv(t, nil, "serve", "--data", t.TempDir(), tc.flag, taken, tc.other, "127.0.0.1:0")
		want := fmt.Sprintf("tern: listen %s: address already in use: is another tern serve running? use %s\n", taken, tc.flag)
		if r.code != 1 || r.stderr != want {
			t.Errorf("serve %s %s: exit %d, stderr %q, want %q", tc.flag, taken, r.code, r.stderr, want)
		}
	}
}

func TestServeUnreachableEtcd(t *testing.T) {
	t.Parallel()
	etcd := freeAddr(t)
	start := time.Now()
	r := ternEnv(t, nil, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--etcd", etcd)
	if r.code != 1 || !strings.Contains(r.stderr, "tern: etcd at "+etcd+" did not answer within") || !strings.Contains(r.stderr, "--etcd") {
		t.Errorf("serve --etcd %s with no etcd: exit %d, stderr:\n%s", etcd, r.code, r.stderr)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("serve took %s to give up on an unreachable etcd", d)
	}
}

// TestServeObjectMode serves with a directory for an object store and
// object mode by default: a log created without --mode is an object log
// whose entries are objects there.
func TestServeObjectMode(t *testing.T) {
	store := t.TempDir()
	s := startServer(t, t.TempDir(), "--storage", "dir://"+store, "--mode", "object")
	if want := "msg=\"grpc listening\" addr=" + s.addr; !strings.Contains(s.stderr.String(), want) ||
		!strings.Contains(s.stderr.String(), "storage=dir://"+store+" default_mode=object") {
		t.Errorf("serve did not log its store and default mode:\n%s", s.stderr.String())
	}
	s.must(t, "", "log", "create", "obj", "--flush-interval", "5ms")
	s.must(t, "", "log", "create", "loc", "--mode", "local")
	if out := s.must(t, "alpha\nbeta\n", "append", "obj"); out != "0\n1\n" {
		t.Errorf("append printed %q", out)
	}
	if out := s.must(t, "", "read", "obj"); out != "alpha\nbeta\n" {
		t.Errorf("read printed %q", out)
	}
	out := s.must(t, "", "log", "describe", "obj")
	for _, want := range []string{"Mode:               object\n", "Flush bytes:        4MiB\n", "Flush interval:     5ms\n", "Uploads in flight:  4\n", "Entries:            2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("log describe lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Fsync:") {
		t.Errorf("log describe of an object log shows fsync:\n%s", out)
	}
	if out := s.must(t, "", "log", "describe", "loc"); !strings.Contains(out, "Mode:               local\n") || !strings.Contains(out, "Fsync:              always\n") {
		t.Errorf("log describe of a local log:\n%s", out)
	}
	var j logJSON
	if err := json.Unmarshal([]byte(s.must(t, "", "log", "describe", "obj", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if o := j.Options; o.Mode != "object" || o.FlushBytes != 4<<20 || o.FlushInterval != "5ms" || o.UploadsInFlight != 4 {
		t.Errorf("log describe --json options: %+v", o)
	}
	if objects := countFiles(t, store); objects == 0 {
		t.Errorf("no object in the store %s after an append", store)
	}
	s.stop(t)
}

// TestServeLocalDefaultFlushWarns creates a log with a flush flag on a
// server whose logs are local by default.
func TestServeLocalDefaultRefusesFlush(t *testing.T) {
	s := startServer(t, t.TempDir(), "--storage", "dir://"+t.TempDir())
	if !strings.Contains(s.stderr.String(), "default_mode=local") {
		t.Errorf("serve did not log its default mode:\n%s", s.stderr.String())
	}
	// The server's default mode is local, where the flush options mean
	// nothing: the log is not created.
	r := s.run(t, "", "log", "create", "x", "--flush-bytes", "1MiB")
	if r.code != 1 || !strings.Contains(r.stderr, "apply to object logs, and this log is local") {
		t.Errorf("log create --flush-bytes on a local server: exit %d, stderr %q", r.code, r.stderr)
	}
	s.must(t, "", "log", "create", "y", "--mode", "object", "--flush-bytes", "1MiB")
	out := s.must(t, "", "log", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// A log the server does not have open lists its extent as unknown
	// (docs/server.md); one it has open, as empty.
	row := strings.Join(strings.Fields(lines[len(lines)-1]), " ")
	if len(lines) != 2 || (row != "y 0 0 0 0B 0 - object 1MiB/20ms 4" && row != "y 0 - - - - - object 1MiB/20ms 4") {
		t.Errorf("log list printed:\n%s", out)
	}
	s.fails(t, 2, []string{"--storage", "dir:///x", "log", "list"}, "--server and --storage cannot be used together")
}

// countFiles counts the regular files under dir.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// --pprof serves the profiles (on loopback, without --auth, to anyone).
func TestServePprof(t *testing.T) {
	s := startServer(t, t.TempDir(), "--pprof")
	if code, body := s.get(t, "/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/: %d %q", code, body)
	}
	if code, _ := s.get(t, "/debug/pprof/heap?debug=1"); code != 200 {
		t.Errorf("GET /debug/pprof/heap: %d", code)
	}
	s.stop(t)
}

// --log-format json makes every line the server logs one JSON object, with
// its level and message, from the start to "stopped"; "ready" is among
// them once it serves.
func TestServeLogFormatJSON(t *testing.T) {
	s := startServer(t, t.TempDir(), "--log-format", "json")
	deadline := time.After(60 * time.Second)
	for !strings.Contains(s.stderr.String(), `"msg":"ready"`) {
		select {
		case <-deadline:
			t.Fatalf("serve did not log ready within 60s:\n%s", s.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.cancel()
	code := <-s.code
	s.code <- code // for the cleanup
	if code != 0 {
		t.Fatalf("interrupted serve: exit %d:\n%s", code, s.stderr.String())
	}
	n := 0
	for line := range strings.Lines(s.stderr.String()) {
		if strings.HasPrefix(line, "tern: serving on ") {
			continue // the line for the person at the terminal, not a log line
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] == nil || rec["msg"] == nil {
			t.Errorf("not a JSON log line with level and msg: %q (%v)", line, err)
		}
		n++
	}
	if n < 5 || !strings.Contains(s.stderr.String(), `"msg":"stopped"`) {
		t.Errorf("%d log lines, want the start-up, ready and stopped lines:\n%s", n, s.stderr.String())
	}
	if r := ternEnv(t, nil, "serve", "--log-format", "xml"); r.code != 2 || !strings.Contains(r.stderr, "use text or json") {
		t.Errorf("serve --log-format xml: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
