package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/miniotest"
)

// s3Faults is an HTTP proxy in front of MinIO that answers a share of the
// requests with an S3 error instead of MinIO's answer: either before
// forwarding them (the request never reached the store) or after (it took
// effect, and its answer is lost, so a retried conditional PUT finds its
// own object). With no share set it forwards everything.
type s3Faults struct {
	Endpoint string // host:port to give clients instead of MinIO's

	perMille atomic.Int32 // requests in a thousand that fail
	after    atomic.Bool  // fail them after MinIO has served them
	failed   atomic.Int64
}

func startS3Faults(t *testing.T, endpoint string) *s3Faults {
	t.Helper()
	f := &s3Faults{}
	// The client signs the Host header it sends, the proxy's, and the
	// proxy passes it on unchanged, so MinIO checks the same signature.
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: endpoint})
	// MinIO stopped: the client's connection is dropped, as a refused
	// one would be, rather than answered by the proxy.
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rand.Int32N(1000) >= f.perMille.Load() {
			proxy.ServeHTTP(w, r)
			return
		}
		f.failed.Add(1)
		code, status := "SlowDown", http.StatusServiceUnavailable
		if f.after.Load() {
			proxy.ServeHTTP(httptest.NewRecorder(), r)
			code, status = "InternalError", http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
			`<Error><Code>%s</Code><Message>injected by the test</Message><Resource>%s</Resource><RequestId>test</RequestId></Error>`,
			code, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	f.Endpoint = srv.Listener.Addr().String()
	return f
}

// fail makes perMille requests in a thousand fail, after MinIO has served
// them if after is set, until heal.
func (f *s3Faults) fail(perMille int32, after bool) {
	f.after.Store(after)
	f.perMille.Store(perMille)
}

// heal stops the errors and returns how many requests failed since the
// last heal.
func (f *s3Faults) heal() int64 {
	f.perMille.Store(0)
	return f.failed.Swap(0)
}

// TestObjectStoreErrors appends to an object log of a tern serve whose
// MinIO answers half the requests with errors, before they reach it and
// then after they took effect (so that a retried conditional PUT finds
// the object its lost attempt stored): every append is acknowledged, at
// dense offsets, and reads back as written once the errors stop.
func TestObjectStoreErrors(t *testing.T) {
	m := miniotest.Start(t)
	s3 := startS3Faults(t, m.Endpoint)
	env := []string{"AWS_ACCESS_KEY_ID=" + m.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.SecretKey}
	srv := startServerEnv(t, t.TempDir(), env, "--storage", "s3://"+m.Bucket+"/errors?endpoint="+s3.Endpoint+"&tls=false")
	c := openClient(t, srv.addr)
	ctx := deadline(t)
	l, err := c.CreateLog(ctx, "obj", tern.LogOptions{Mode: tern.ModeObject, SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, after := range []bool{false, true} {
		s3.fail(500, after)
		for range 30 {
			p := fmt.Sprintf("entry %d", len(want))
			off, err := w.Append(ctx, tern.Entry{Payload: []byte(p)})
			if err != nil || off != tern.Offset(len(want)) {
				t.Fatalf("append %q (errors after the request: %v): offset %d, %v", p, after, off, err)
			}
			want = append(want, p)
		}
		if n := s3.heal(); n == 0 {
			t.Fatalf("no request failed (errors after the request: %v); the test injected nothing", after)
		}
	}
	got := readAll(t, l, 0, tern.Offset(len(want)))
	for i, e := range got {
		if string(e.Payload) != want[i] {
			t.Fatalf("offset %d holds %q, want %q", i, e.Payload, want[i])
		}
	}
}
