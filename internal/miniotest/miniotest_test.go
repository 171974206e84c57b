package miniotest_test

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/ternwal/tern/internal/miniotest"
)

func TestStart(t *testing.T) {
	s := miniotest.Start(t)
	ctx := t.Context()
	body := []byte("hello, tern")
	if _, err := s.Client.PutObject(ctx, s.Bucket, "a/b", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	obj, err := s.Client.GetObject(ctx, s.Bucket, "a/b", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read back %q, %v; want %q", got, err, body)
	}
	if s.PID == 0 || s.Endpoint == "" {
		t.Errorf("server = %+v", s)
	}
}

// TestTwoServers checks that servers started by one test do not collide.
func TestTwoServers(t *testing.T) {
	a, b := miniotest.Start(t), miniotest.Start(t)
	if a.Endpoint == b.Endpoint {
		t.Fatalf("both servers on %s", a.Endpoint)
	}
	for _, s := range []*miniotest.Server{a, b} {
		if ok, err := s.Client.BucketExists(t.Context(), s.Bucket); err != nil || !ok {
			t.Errorf("%s: bucket %s exists = %v, %v", s.Endpoint, s.Bucket, ok, err)
		}
	}
}

// fatalTB records the first Fatal and ends the goroutine, as testing does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		miniotest.Start(tb)
	}()
	<-done
	if !strings.Contains(tb.msg, "scripts/install-minio") || !strings.Contains(tb.msg, "not installed") {
		t.Fatalf("Start without the binary failed with %q, want the install command", tb.msg)
	}
}
