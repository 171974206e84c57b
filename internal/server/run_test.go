package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/ternwal/tern"
)

// Start assembles a whole server (embedded etcd, data directory, gRPC,
// HTTP) on ports of the system's choosing; a remote client creates a log,
// appends and reads through it; Close stops it all.
func TestStart(t *testing.T) {
	ctx := t.Context()
	s, err := Start(ctx, Config{Data: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", EtcdRoot: "/tern/"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, a := range []net.Addr{s.Addr(), s.HTTPAddr()} {
		if ta, ok := a.(*net.TCPAddr); !ok || !ta.IP.IsLoopback() || ta.Port == 0 {
			t.Fatalf("listening on %v, want a loopback port", a)
		}
	}

	c, err := tern.Open(ctx, tern.Options{Server: DialAddr(s.Addr())})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.CreateLog(ctx, "x", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("entry %d", i))
		if _, err := w.Append(ctx, tern.Entry{Payload: []byte(want[i])}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := l.OpenReader(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < len(want) {
		es, err := r.NextBatch(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			got = append(got, string(e.Payload))
		}
	}
	r.Close()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %q, want %q", got, want)
	}

	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ok\n", "/metrics": "tern_"} {
		code, body := get(t, "http://"+s.HTTPAddr().String()+path)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, want 200 and %q in:\n%.300s", path, code, want, body)
		}
	}

	c.Close()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Errorf("the gRPC port still takes connections after Close")
	}
}

// Wait returns nil once its context ends: the caller then closes.
func TestStartWait(t *testing.T) {
	s, err := Start(t.Context(), Config{Data: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", EtcdRoot: "/tern/"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Wait(ctx); err != nil {
		t.Errorf("wait: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// A port in use fails the start at once, naming the setting, before the
// data directory is touched.
func TestStartPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := t.TempDir()
	_, err = Start(t.Context(), Config{Data: data, Listen: "127.0.0.1:0", HTTP: l.Addr().String(), EtcdRoot: "/tern/"})
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "--http") {
		t.Fatalf("start on a port in use: %v", err)
	}
	if left, _ := os.ReadDir(data); len(left) != 0 {
		t.Errorf("a failed start left %v in the data directory", left)
	}
}

// get returns a GET's status and body; status 0 when nothing answered.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestReadiness(t *testing.T) {
	ok := func(context.Context) (string, []string) { return "", nil }
	down := func(context.Context) (string, []string) { return "metadata store does not answer: context deadline exceeded", nil }
	noted := func(context.Context) (string, []string) { return "", []string{"degraded: log a"} }
	for _, tc := range []struct {
		reason string
		checks []check
		code   int
		body   string
	}{
		{"starting", nil, 503, "starting\n"},
		{"", []check{ok}, 200, "ok\n"},
		{"", []check{ok, noted}, 200, "ok\ndegraded: log a\n"},
		{"", []check{down, noted}, 503, "metadata store does not answer: context deadline exceeded\ndegraded: log a\n"},
		{"shutting down", []check{noted}, 503, "shutting down\n"},
	} {
		r := &readiness{}
		r.set(tc.reason, tc.checks...)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != tc.code || rec.Body.String() != tc.body {
			t.Errorf("readyz (%q): %d %q, want %d %q", tc.reason, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
}
