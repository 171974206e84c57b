package monitoring

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"
)

// startTimeout bounds the wait for a server to be ready.
const startTimeout = 90 * time.Second

// ternBin builds the tern binary once for the tests, from the repository
// root (the main module), into a temporary directory.
var ternBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "tern-monitoring-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "tern")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/tern")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tern: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := ternBin(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// server is a tern serve process the test started.
type server struct {
	t        *testing.T
	name     string
	addr     string // gRPC
	httpAddr string
	cmd      *exec.Cmd
	http     *http.Client
	scheme   string
	stderr   *lockedBuffer
	exited   chan struct{}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServer runs tern serve with args beyond --data, --listen and
// --http, and waits until /readyz answers 200; httpTLS, when not nil,
// reaches an HTTPS listener. The server is killed when the test ends.
func startServer(t *testing.T, name string, env []string, httpTLS *tls.Config, args ...string) *server {
	t.Helper()
	bin, err := ternBin()
	if err != nil {
		t.Fatal(err)
	}
	// A port freeAddr found free may be taken (by a connection of another
	// test's process) before the server binds it: start again on others.
	for attempt := 1; ; attempt++ {
		s, taken := tryStart(t, bin, name, env, httpTLS, args)
		if !taken || attempt == 3 {
			if taken {
				t.Fatalf("%s: its ports were taken before it bound them, 3 times:\n%s", name, s.stderr.tail(8<<10))
			}
			return s
		}
		t.Logf("%s: a port was taken before tern serve bound it; starting it again on others", name)
	}
}

// tryStart is one attempt of startServer: it reports taken, with the
// server exited, when a port it was given was in use.
func tryStart(t *testing.T, bin, name string, env []string, httpTLS *tls.Config, args []string) (_ *server, taken bool) {
	t.Helper()
	s := &server{t: t, name: name, addr: freeAddr(t), httpAddr: freeAddr(t), stderr: &lockedBuffer{}, exited: make(chan struct{}),
		http: &http.Client{Timeout: 10 * time.Second}, scheme: "http"}
	if httpTLS != nil {
		s.http.Transport = &http.Transport{TLSClientConfig: httpTLS}
		s.scheme = "https"
	}
	s.cmd = exec.Command(bin, append([]string{"serve", "--data", t.TempDir(), "--listen", s.addr, "--http", s.httpAddr, "--memory-limit", "256MiB"}, args...)...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.stderr, s.stderr
	s.cmd.SysProcAttr = dieWithParent()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("%s (tern serve) logged:\n%s", name, s.stderr.tail(16<<10))
		}
	})
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-s.exited:
			if strings.Contains(s.stderr.tail(8<<10), "address already in use") {
				return s, true
			}
			t.Fatalf("%s (tern serve %s) exited at start:\n%s", name, strings.Join(args, " "), s.stderr.tail(8<<10))
		default:
		}
		if resp, err := s.http.Get(s.url("/readyz")); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, false
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not ready within %v:\n%s", name, startTimeout, s.stderr.tail(8<<10))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *server) url(path string) string { return s.scheme + "://" + s.httpAddr + path }

// kill stops the server with SIGKILL, if it runs, and waits for it.
func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// scrape returns the metric families the server exports now.
func (s *server) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := s.http.Get(s.url("/metrics"))
	if err != nil {
		t.Fatalf("scrape %s: %v", s.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", s.name, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", s.name, err)
	}
	return mfs
}

// waitFor scrapes the server until ok holds of what it exports.
func (s *server) waitFor(t *testing.T, what string, ok func(map[string]*dto.MetricFamily) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(s.scrape(t)) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: waited 30s for %s", s.name, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lockedBuffer is a process's output, written and read concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	return len(p), nil
}

// tail is the last n bytes written.
func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b[max(0, len(b.b)-n):])
}

// exported reports whether the families hold the series a query names:
// a family of that name, or the _bucket, _sum or _count series of a
// histogram (or _sum, _count of a summary).
func exported(mfs map[string]*dto.MetricFamily, name string) bool {
	if _, ok := mfs[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		mf, ok := mfs[base]
		if !ok {
			continue
		}
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return true
		case dto.MetricType_SUMMARY:
			return suffix != "_bucket"
		}
	}
	return false
}

// merge adds the families of b to a (by name: the test asks for names).
func merge(a, b map[string]*dto.MetricFamily) {
	for k, v := range b {
		if _, ok := a[k]; !ok {
			a[k] = v
		}
	}
}

// ctxFor is a context for one step of a test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
