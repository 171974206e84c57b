package blob_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/blob/blobtest"
	"github.com/ternwal/tern/internal/miniotest"
)

// s3Options returns options for the bucket of s, under prefix.
func s3Options(s *miniotest.Server, prefix string) blob.S3Options {
	return blob.S3Options{
		Endpoint:  s.Endpoint,
		Bucket:    s.Bucket,
		Prefix:    prefix,
		AccessKey: s.AccessKey,
		SecretKey: s.SecretKey,
	}
}

func openS3(t *testing.T, o blob.S3Options) *blob.S3 {
	t.Helper()
	b, err := blob.OpenS3(t.Context(), o)
	if err != nil {
		t.Fatalf("OpenS3: %v", err)
	}
	return b
}

// TestS3 runs the suite on one MinIO, each subtest under its own prefix.
func TestS3(t *testing.T) {
	s := miniotest.Start(t)
	blobtest.Run(t, func(t *testing.T) blob.Bucket {
		return openS3(t, s3Options(s, t.Name()))
	})
}

func TestS3Setup(t *testing.T) {
	s := miniotest.Start(t)
	ctx := t.Context()

	t.Run("CheckConditional", func(t *testing.T) {
		checkConditional(t, openS3(t, s3Options(s, "check")))
	})

	// Keys are relative to the prefix, and objects outside it are not
	// listed.
	t.Run("Prefix", func(t *testing.T) {
		b := openS3(t, s3Options(s, "tenant/a")) // the slash is added
		put(t, b, "x/1", "in")
		for _, name := range []string{"tenant/ab/x/1", "tenant/x/1", "x/1", "tenant/a/x/"} {
			if _, err := s.Client.PutObject(ctx, s.Bucket, name, strings.NewReader("out"), 3, minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Client.StatObject(ctx, s.Bucket, "tenant/a/x/1", minio.StatObjectOptions{}); err != nil {
			t.Errorf("the object of key x/1 under prefix tenant/a is not tenant/a/x/1: %v", err)
		}
		infos, err := b.List(ctx, "")
		if err != nil || len(infos) != 1 || infos[0] != (blob.Info{Key: "x/1", Size: 2}) {
			t.Errorf("List = %v, %v, want only x/1 (and not the folder marker x/)", infos, err)
		}
	})

	t.Run("MissingBucket", func(t *testing.T) {
		o := s3Options(s, "")
		o.Bucket = "no-such-bucket"
		_, err := blob.OpenS3(ctx, o)
		if err == nil || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) {
			t.Fatalf("OpenS3 of a missing bucket: err = %v", err)
		}
	})

	t.Run("WrongCredentials", func(t *testing.T) {
		for _, o := range []blob.S3Options{
			{AccessKey: s.AccessKey, SecretKey: "wrong-secret"},
			{AccessKey: "nobody", SecretKey: "nobody-secret"},
		} {
			o.Endpoint, o.Bucket = s.Endpoint, s.Bucket
			_, err := blob.OpenS3(ctx, o)
			if err == nil || !strings.Contains(err.Error(), "refused the credentials from the options (AccessKey "+o.AccessKey+")") {
				t.Errorf("OpenS3 with access key %s and a wrong secret: err = %v", o.AccessKey, err)
			}
		}
	})

	t.Run("EnvironmentCredentials", func(t *testing.T) {
		o := s3Options(s, "env")
		o.AccessKey, o.SecretKey = "", ""
		t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
		t.Setenv("AWS_SESSION_TOKEN", "")
		put(t, openS3(t, o), "k", "v")

		t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
		_, err := blob.OpenS3(ctx, o)
		if err == nil || !strings.Contains(err.Error(), "refused the credentials from the environment (AWS_ACCESS_KEY_ID") {
			t.Errorf("OpenS3 with wrong credentials in the environment: err = %v", err)
		}
	})

	// MinIO refuses SSE-C over plain HTTP, and so does OpenS3, before the
	// key is sent in the clear.
	t.Run("SSECNeedsTLS", func(t *testing.T) {
		o := s3Options(s, "ssec")
		o.SSE, o.SSECKey = "c", bytes.Repeat([]byte{7}, 32)
		_, err := blob.OpenS3(ctx, o)
		if err == nil || !strings.Contains(err.Error(), `SSE "c" needs TLS`) {
			t.Fatalf("OpenS3 with SSE-C over http: err = %v", err)
		}
	})

	// SSE-S3 needs a KMS, which the test server lacks: the error of the
	// first put says so.
	t.Run("SSES3WithoutKMS", func(t *testing.T) {
		o := s3Options(s, "sses3")
		o.SSE = "s3"
		err := openS3(t, o).PutIfAbsent(ctx, "k", []byte("v"))
		if err == nil || !strings.Contains(err.Error(), "KMS") {
			t.Fatalf("PutIfAbsent with SSE-S3 on a MinIO without a KMS: err = %v", err)
		}
	})
}

func TestS3InvalidOptions(t *testing.T) {
	ok := blob.S3Options{Endpoint: "127.0.0.1:1", Bucket: "bkt", AccessKey: "a", SecretKey: "s"}
	for _, tc := range []struct {
		change func(*blob.S3Options)
		want   string
	}{
		{func(o *blob.S3Options) { o.Endpoint = "" }, "Endpoint is empty"},
		{func(o *blob.S3Options) { o.Endpoint = "https://h:1" }, `Endpoint "https://h:1" is not a host:port`},
		{func(o *blob.S3Options) { o.Bucket = "" }, "Bucket is empty"},
		{func(o *blob.S3Options) { o.Bucket = "a" }, `Bucket "a"`},
		{func(o *blob.S3Options) { o.Prefix = "/abs" }, `Prefix "/abs/" starts with a slash`},
		{func(o *blob.S3Options) { o.Prefix = "a/../b/" }, `Prefix "a/../b/" has a ".." segment`},
		{func(o *blob.S3Options) { o.SecretKey = "" }, "AccessKey and SecretKey together"},
		{func(o *blob.S3Options) { o.AccessKey, o.SecretKey, o.SessionToken = "", "", "t" }, "SessionToken needs"},
		{func(o *blob.S3Options) { o.CAFile = "ca.pem" }, "CAFile needs TLS"},
		{func(o *blob.S3Options) { o.TLS, o.CAFile = true, "/does/not/exist.pem" }, "CAFile"},
		{func(o *blob.S3Options) { o.SSE = "kms" }, `SSE "kms" is not`},
		{func(o *blob.S3Options) { o.SSECKey = make([]byte, 32) }, `SSECKey is set but SSE is ""`},
		{func(o *blob.S3Options) { o.SSE, o.TLS = "c", true }, "32-byte SSECKey, not 0 bytes"},
		{func(o *blob.S3Options) { o.SSE, o.SSECKey = "c", make([]byte, 32) }, `SSE "c" needs TLS`},
	} {
		o := ok
		tc.change(&o)
		_, err := blob.OpenS3(t.Context(), o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenS3(%+v): err = %v, want one that says %q", o, err, tc.want)
		}
	}
}

// fakeS3 answers a HEAD of its bucket, PUTs with the status codes in puts
// (then 200; 0 closes the connection without an answer), and GETs with the
// whole of object, ignoring any Range.
type fakeS3 struct {
	puts   []int
	object []byte
	nput   atomic.Int32
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodHead:
		w.WriteHeader(http.StatusOK)
	case http.MethodPut:
		io.Copy(io.Discard, r.Body)
		n := int(f.nput.Add(1))
		if n > len(f.puts) {
			w.Header().Set("ETag", `"etag"`)
			w.WriteHeader(http.StatusOK)
			return
		}
		if f.puts[n-1] == 0 {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		code := map[int]string{403: "AccessDenied", 409: "ConditionalRequestConflict", 412: "PreconditionFailed", 429: "SlowDown", 503: "ServiceUnavailable"}[f.puts[n-1]]
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(f.puts[n-1])
		fmt.Fprintf(w, "<Error><Code>%s</Code><Message>fake</Message></Error>", code)
	case http.MethodGet:
		w.Header().Set("Content-Length", fmt.Sprint(len(f.object)))
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("ETag", `"etag"`)
		w.Write(f.object)
	}
}

func openFake(t *testing.T, f *fakeS3) *blob.S3 {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return openS3(t, blob.S3Options{
		Endpoint: strings.TrimPrefix(srv.URL, "http://"),
		Bucket:   "bkt", Region: "us-east-1", AccessKey: "a", SecretKey: "s",
	})
}

// A 409 ConditionalRequestConflict (AWS: another conditional PUT of the
// key is in flight) is retried until the store decides: it says nothing
// about whether an object is stored, so it is never ErrExist by itself.
// PutIfAbsent retries a busy or broken store (5xx, 429) itself, since
// minio-go does not retry its PUTs; it does not retry a refusal.
func TestS3ConditionalConflict(t *testing.T) {
	for _, tc := range []struct {
		puts     []int
		wantErr  error
		wantPuts int32
	}{
		{[]int{409, 409}, nil, 3},
		{[]int{409, 412}, blob.ErrExist, 2},
		{[]int{412}, blob.ErrExist, 1},
		{[]int{503, 429, 500}, nil, 4},
		{[]int{503, 412}, blob.ErrExist, 2},
		{[]int{403}, errAny, 1},
		{[]int{0, 0}, nil, 3},
	} {
		f := &fakeS3{puts: tc.puts}
		err := openFake(t, f).PutIfAbsent(t.Context(), "k", []byte("v"))
		if tc.wantErr == errAny && err != nil && !errors.Is(err, blob.ErrExist) {
			err = errAny
		}
		if !errors.Is(err, tc.wantErr) || (err != nil && tc.wantErr == nil) || f.nput.Load() != tc.wantPuts {
			t.Errorf("PUT answered %v: err = %v after %d PUTs, want %v after %d", tc.puts, err, f.nput.Load(), tc.wantErr, tc.wantPuts)
		}
	}
	f := &fakeS3{puts: []int{409, 409, 409, 409, 409, 409, 409, 409, 409, 409, 409}}
	err := openFake(t, f).PutIfAbsent(t.Context(), "k", []byte("v"))
	if err == nil || errors.Is(err, blob.ErrExist) {
		t.Errorf("PUT answered 409 every time: err = %v, want an error that is not ErrExist", err)
	}
}

// errAny stands for any error but ErrExist in TestS3ConditionalConflict.
var errAny = errors.New("an error that is not ErrExist")

// A store that ignores Range and sends the whole object still gives
// GetRange the bytes it asked for.
func TestS3RangeIgnored(t *testing.T) {
	b := openFake(t, &fakeS3{object: []byte("0123456789")})
	for _, tc := range []struct {
		off     int64
		len     int
		want    string
		wantErr error
	}{
		{0, 4, "0123", nil},
		{3, 4, "3456", nil},
		{8, 4, "89", io.EOF},
		{10, 4, "", io.EOF},
		{12, 4, "", io.EOF},
	} {
		p := make([]byte, tc.len)
		n, err := b.GetRange(t.Context(), "k", tc.off, p)
		if string(p[:n]) != tc.want || err != tc.wantErr {
			t.Errorf("GetRange(%d, %d bytes) = %q, %v, want %q, %v", tc.off, tc.len, p[:n], err, tc.want, tc.wantErr)
		}
	}
}

// TestS3TLS reaches a MinIO over HTTPS, trusting its certificate through
// CAFile, and stores objects with SSE-C there: the acceptance suite passes,
// an untrusted certificate and a missing SSE-C key are refused.
func TestS3TLS(t *testing.T) {
	s := miniotest.StartTLS(t)
	tlsOptions := func(prefix string) blob.S3Options {
		o := s3Options(s, prefix)
		o.TLS, o.CAFile = true, s.CAFile
		return o
	}
	n := 0
	blobtest.Run(t, func(t *testing.T) blob.Bucket {
		n++
		b := openS3(t, tlsOptions(fmt.Sprintf("tls-%d", n)))
		t.Cleanup(func() { b.Close() })
		return b
	})

	o := tlsOptions("untrusted")
	o.CAFile = ""
	if b, err := blob.OpenS3(t.Context(), o); err == nil {
		b.Close()
		t.Fatal("OpenS3 trusted a self-signed certificate it was not given")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("OpenS3 with an untrusted certificate: %v, want an error about the certificate", err)
	}

	key := bytes.Repeat([]byte{7}, 32)
	o = tlsOptions("ssec")
	o.SSE, o.SSECKey = "c", key
	b := openS3(t, o)
	defer b.Close()
	if err := b.PutIfAbsent(t.Context(), "k", []byte("secret")); err != nil {
		t.Fatalf("SSE-C put: %v", err)
	}
	if got, err := b.Get(t.Context(), "k"); err != nil || string(got) != "secret" {
		t.Fatalf("SSE-C get: %q, %v", got, err)
	}
	plain := openS3(t, tlsOptions("ssec"))
	defer plain.Close()
	if got, err := plain.Get(t.Context(), "k"); err == nil {
		t.Fatalf("read an SSE-C object without its key: %q", got)
	}
}
