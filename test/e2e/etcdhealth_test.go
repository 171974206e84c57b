package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/meta"
)

// httpGet returns the status and body of a GET of the server's HTTP path.
func (s *server) httpGet(path string) (int, string) {
	s.t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + s.httpAddr + path)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// embeddedEtcd is a client of the etcd embedded in the server on data, at
// its socket in data/etcd (or the port it keeps there).
func embeddedEtcd(t *testing.T, data string) *clientv3.Client {
	t.Helper()
	eps, err := meta.EmbeddedEndpoints(filepath.Join(data, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// At the embedded etcd's quota (NOSPACE raised on purpose, with a small
// --etcd-quota filled through etcd's own client): creating a log or a
// subscription and opening a writer fail with RESOURCE_EXHAUSTED (ErrNoSpace), /readyz is
// 503 naming the alarm and tern_etcd_alarm says it, while the process
// stays up, the open writer goes on appending and the logs can be read. A
// restart with a larger quota takes writes again at once, with every
// acknowledged entry there.
func TestEtcdNoSpaceAlarm(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startServer(t, data, "--etcd-quota", "16MiB")
	c := openClient(t, s.addr)
	ctx := deadline(t)
	l, err := c.CreateLog(ctx, "kept", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var acked []string
	appendSome := func(n int) {
		t.Helper()
		for range n {
			p := fmt.Sprintf("entry %d", len(acked))
			if _, err := w.Append(ctx, tern.Entry{Payload: []byte(p)}); err != nil {
				t.Fatalf("append %q: %v", p, err)
			}
			acked = append(acked, p)
		}
	}
	appendSome(10)

	cli := embeddedEtcd(t, data)
	filler := strings.Repeat("x", 1<<20)
	for i := 0; ; i++ {
		_, err := cli.Put(ctx, fmt.Sprint("/filler/", i), filler)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		if err != nil || i > 64 {
			t.Fatalf("filling etcd: put %d: %v", i, err)
		}
	}

	_, err = c.CreateLog(ctx, "new", tern.LogOptions{})
	t.Logf("CreateLog at etcd's quota: %v", err)
	if !errors.Is(err, tern.ErrNoSpace) {
		t.Errorf("CreateLog at etcd's quota: err = %v, want ErrNoSpace", err)
	} else if !strings.Contains(err.Error(), "--etcd-quota") {
		t.Errorf("CreateLog at etcd's quota: %q does not name --etcd-quota", err)
	}
	if _, err := l.OpenWriter(ctx); !errors.Is(err, tern.ErrNoSpace) {
		t.Errorf("OpenWriter at etcd's quota: err = %v, want ErrNoSpace", err)
	}
	if _, err := l.CreateSubscription(ctx, "sub", tern.SubOptions{}); !errors.Is(err, tern.ErrNoSpace) {
		t.Errorf("CreateSubscription at etcd's quota: err = %v, want ErrNoSpace", err)
	}
	code, body := s.httpGet("/readyz")
	t.Logf("/readyz at etcd's quota: %d %s", code, body)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "NOSPACE") {
		t.Errorf("/readyz at etcd's quota: %d\n%s\nwant 503 naming NOSPACE", code, body)
	}
	if _, metrics := s.httpGet("/metrics"); !strings.Contains(metrics, `tern_etcd_alarm{type="NOSPACE"} 1`) || !strings.Contains(metrics, "tern_etcd_up 1") {
		t.Errorf("/metrics at etcd's quota has no NOSPACE alarm:\n%s", grepLines(metrics, "tern_etcd_"))
	}
	appendSome(10) // the open writer needs no metadata
	if got := readAll(t, l, 0, tern.Offset(len(acked))); !samePayloads(got, acked) {
		t.Errorf("read at etcd's quota: %d entries, want %q", len(got), acked)
	}
	if !s.running() {
		t.Fatal("tern serve exited at etcd's quota")
	}

	// What docs/server.md says to do: a larger quota.
	s.kill9()
	s.args = []string{"--etcd-quota", "256MiB"}
	s.restart()
	c = openClient(t, s.addr)
	ctx = deadline(t)
	if code, body := s.httpGet("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the restart with a larger quota: %d\n%s", code, body)
	}
	if _, err := c.CreateLog(ctx, "new", tern.LogOptions{}); err != nil {
		t.Errorf("CreateLog after the restart with a larger quota: %v", err)
	}
	if l, err = c.OpenLog(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l, 0, tern.Offset(len(acked))); !samePayloads(got, acked) {
		t.Errorf("read after the restart: %d entries, want %q", len(got), acked)
	}
}

func samePayloads(es []tern.Entry, want []string) bool {
	if len(es) != len(want) {
		return false
	}
	for i, e := range es {
		if string(e.Payload) != want[i] {
			return false
		}
	}
	return true
}

func grepLines(text, substr string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// A corrupt etcd database stops tern serve at start with exit code 1 and
// an error that names the file and says what to do; no panic.
func TestEtcdCorruptAtStart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startServer(t, data)
	c := openClient(t, s.addr)
	if _, err := c.CreateLog(deadline(t), "a", tern.LogOptions{}); err != nil {
		t.Fatal(err)
	}
	s.stop()
	db := filepath.Join(data, "etcd", "member", "snap", "db")
	f, err := os.OpenFile(db, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("junk", 4096)), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, out := runTern(t, "serve", "--data", data, "--listen", freeAddr(t), "--http", freeAddr(t))
	t.Logf("tern serve on a corrupt etcd database: exit %d\n%s", code, out)
	if code != 1 || strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
		t.Fatalf("tern serve on a corrupt etcd database: exit %d, want 1 and no panic\n%s", code, out)
	}
	for _, want := range []string{db, "damaged", "restore " + filepath.Join(data, "etcd")} {
		if !strings.Contains(out, want) {
			t.Errorf("tern serve on a corrupt etcd database says nothing of %q:\n%s", want, out)
		}
	}
}

// An external etcd that stops answering: calls that need metadata fail
// with UNAVAILABLE (ErrUnavailable, which the client retries until its
// RetryTimeout), never
// INTERNAL and never hanging; /readyz says the metadata store does not
// answer and tern_etcd_up is 0; the server stays up, and once etcd is back
// it is ready again and nothing acknowledged is lost.
func TestEtcdUnreachable(t *testing.T) {
	ec := startEtcdCluster(t, 1)
	data := filepath.Join(t.TempDir(), "data")
	s := startServer(t, data, "--etcd", strings.Join(ec.Endpoints(), ","))
	ctx := deadline(t)
	// A client retries UNAVAILABLE for RetryTimeout, then returns it.
	c, err := tern.Open(ctx, tern.Options{Server: s.addr, RetryTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.CreateLog(ctx, "kept", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, tern.Entry{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}

	ec.kill9(0)
	_, err = c.CreateLog(ctx, "new", tern.LogOptions{})
	t.Logf("CreateLog with etcd down: %v", err)
	if !errors.Is(err, tern.ErrUnavailable) {
		t.Errorf("CreateLog with etcd down: err = %v, want ErrUnavailable", err)
	}
	if _, err := c.ListLogs(ctx, ""); !errors.Is(err, tern.ErrUnavailable) {
		t.Errorf("ListLogs with etcd down: err = %v, want ErrUnavailable", err)
	}
	if code, body := s.httpGet("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "metadata store does not answer") {
		t.Errorf("/readyz with etcd down: %d\n%s", code, body)
	}
	if _, metrics := s.httpGet("/metrics"); !strings.Contains(metrics, "tern_etcd_up 0") {
		t.Errorf("/metrics with etcd down:\n%s", grepLines(metrics, "tern_etcd_"))
	}
	if !s.running() {
		t.Fatal("tern serve exited with etcd down")
	}

	ec.start(0)
	waitReady := time.Now().Add(waitTimeout)
	for {
		code, body := s.httpGet("/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(waitReady) {
			t.Fatalf("/readyz once etcd is back: %d\n%s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The store's client dials etcd again within about a second; until
	// then a call fails UNAVAILABLE, which a client retries.
	for {
		_, err := c.CreateLog(ctx, "new", tern.LogOptions{})
		if err == nil {
			break
		}
		if !errors.Is(err, tern.ErrUnavailable) || time.Now().After(waitReady) {
			t.Fatalf("CreateLog once etcd is back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := readAll(t, l, 0, 1); string(got[0].Payload) != "before" {
		t.Errorf("read once etcd is back: %q", got[0].Payload)
	}
}
