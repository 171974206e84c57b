package blob

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	defaults := S3Options{
		Endpoint:  "default:9000",
		Region:    "eu-west-1",
		AccessKey: "ak",
		SecretKey: "sk",
		CAFile:    "/etc/ca.pem",
		TLS:       false, // not used: the URL alone says whether to use TLS
		SSE:       "c",
		SSECKey:   key,
		Bucket:    "ignored",
		Prefix:    "ignored/",
	}
	for _, tc := range []struct {
		raw  string
		o    S3Options
		want target
	}{
		{"mem://", S3Options{}, target{scheme: "mem"}},
		{"dir:///var/lib/tern", S3Options{}, target{scheme: "dir", dir: "/var/lib/tern"}},
		{"dir:///var/lib/a%20b", S3Options{}, target{scheme: "dir", dir: "/var/lib/a b"}},
		// HTTPS unless the URL says otherwise.
		{"s3://bkt?endpoint=localhost:9000", S3Options{},
			target{scheme: "s3", s3: S3Options{Endpoint: "localhost:9000", Bucket: "bkt", TLS: true}}},
		{"s3://bkt?endpoint=localhost:9000&tls=false", S3Options{},
			target{scheme: "s3", s3: S3Options{Endpoint: "localhost:9000", Bucket: "bkt"}}},
		{"s3://bkt/some/prefix?endpoint=h:1&region=us-east-2&tls=false&sse=s3", S3Options{},
			target{scheme: "s3", s3: S3Options{Endpoint: "h:1", Bucket: "bkt", Prefix: "some/prefix/", Region: "us-east-2", SSE: "s3"}}},
		{"s3://bkt/p/?endpoint=h:1&tls=true&ca=/my/ca.pem", S3Options{},
			target{scheme: "s3", s3: S3Options{Endpoint: "h:1", Bucket: "bkt", Prefix: "p/", TLS: true, CAFile: "/my/ca.pem"}}},
		// The options are defaults; the URL's bucket and prefix replace
		// theirs.
		{"s3://bkt/p", defaults, target{scheme: "s3", s3: S3Options{
			Endpoint: "default:9000", Bucket: "bkt", Prefix: "p/", Region: "eu-west-1",
			AccessKey: "ak", SecretKey: "sk", CAFile: "/etc/ca.pem", TLS: true, SSE: "c", SSECKey: key,
		}}},
		{"s3://bkt?endpoint=other:1&region=r&sse=c&tls=1", defaults, target{scheme: "s3", s3: S3Options{
			Endpoint: "other:1", Bucket: "bkt", Region: "r",
			AccessKey: "ak", SecretKey: "sk", CAFile: "/etc/ca.pem", TLS: true, SSE: "c", SSECKey: key,
		}}},
	} {
		got, err := parseURL(tc.raw, tc.o)
		if err != nil {
			t.Errorf("parseURL(%q): %v", tc.raw, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseURL(%q) = %+v, want %+v", tc.raw, got, tc.want)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		o    S3Options
		want string
	}{
		{"s3://bkt/p", S3Options{}, "add ?endpoint=HOST:PORT"},
		{"s3://bkt?endpoint=h:1&foo=1", S3Options{}, `unknown parameter "foo" (known: endpoint, region, tls, ca, sse)`},
		{"s3://bkt?endpoint=h:1&endpoint=h:2", S3Options{}, `"endpoint" is given 2 times`},
		{"s3://bkt?endpoint=h:1&tls=maybe", S3Options{}, `tls="maybe" is not true or false: HTTPS is the default; tls=false selects plain HTTP`},
		{"s3://bkt?endpoint=h:1&secure=false", S3Options{}, `unknown parameter "secure": use tls=false for plain HTTP (HTTPS is the default) (known: endpoint, region, tls, ca, sse)`},
		{"s3://bkt?endpoint=h:1&sse=kms", S3Options{}, `SSE "kms"`},
		{"s3://bkt?endpoint=h:1&sse=c&tls=true", S3Options{}, "32-byte SSECKey"},
		{"s3://bkt?endpoint=h:1&sse=c&tls=false", S3Options{SSECKey: make([]byte, 32)}, "needs TLS"},
		{"s3://bkt?endpoint=h:1&ca=/x.pem&tls=false", S3Options{}, "CAFile needs TLS"},
		{"s3://bkt?endpoint=http://h:1", S3Options{}, "not a host:port"},
		{"s3://bkt//p?endpoint=h:1", S3Options{}, "starts with a slash"},
		{"s3://bkt/a//p?endpoint=h:1", S3Options{}, "empty segment"},
		{"s3://bkt/../p?endpoint=h:1", S3Options{}, `".." segment`},
		{"s3:///p?endpoint=h:1", S3Options{}, "no bucket"},
		{"s3://ab?endpoint=h:1", S3Options{}, `Bucket "ab"`},
		{"s3://user:pw@bkt?endpoint=h:1", S3Options{}, "want s3://"},
		{"dir://relative/path", S3Options{}, "three slashes"},
		{"dir:relative", S3Options{}, "want s3://"},
		{"dir:///a?x=1", S3Options{}, "no parameters"},
		{"mem://x", S3Options{}, "nothing after it"},
		{"gs://bkt", S3Options{}, `unknown scheme "gs"`},
		{"/just/a/path", S3Options{}, `unknown scheme ""`},
		{"s3://bkt?endpoint=h:1&%zz", S3Options{}, "invalid URL escape"},
	} {
		_, err := parseURL(tc.raw, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseURL(%q): err = %v, want one that says %q", tc.raw, err, tc.want)
		}
	}
}

// ParseS3URL takes s3 URLs only, and gives their options.
func TestParseS3URL(t *testing.T) {
	o, err := ParseS3URL("s3://bkt/p?endpoint=h:1&region=r", S3Options{AccessKey: "ak", SecretKey: "sk"})
	want := S3Options{Endpoint: "h:1", Bucket: "bkt", Prefix: "p/", Region: "r", AccessKey: "ak", SecretKey: "sk", TLS: true}
	if err != nil || !reflect.DeepEqual(o, want) {
		t.Errorf("ParseS3URL = %+v, %v; want %+v", o, err, want)
	}
	for _, raw := range []string{"dir:///tmp/x", "mem://"} {
		if _, err := ParseS3URL(raw, S3Options{}); err == nil || !strings.Contains(err.Error(), "want s3://BUCKET/PREFIX?endpoint=HOST:PORT") {
			t.Errorf("ParseS3URL(%q): err = %v, want one that asks for s3://", raw, err)
		}
	}
}

// OpenURL checks an s3 URL before it touches the network.
func TestOpenURLNoEndpoint(t *testing.T) {
	_, err := OpenURL(t.Context(), "s3://bkt/p", S3Options{})
	if err == nil || !strings.Contains(err.Error(), "?endpoint=HOST:PORT") {
		t.Fatalf("OpenURL without an endpoint: err = %v", err)
	}
}

func TestOpenURL(t *testing.T) {
	b, err := OpenURL(t.Context(), "mem://", S3Options{})
	if _, ok := b.(*Mem); !ok || err != nil {
		t.Errorf("OpenURL(mem://) = %T, %v, want a *Mem", b, err)
	}
	dir := t.TempDir()
	b, err = OpenURL(t.Context(), "dir://"+dir+"/sub", S3Options{})
	if d, ok := b.(*Dir); !ok || err != nil || d.Path() != dir+"/sub" {
		t.Errorf("OpenURL(dir://%s/sub) = %#v, %v, want a *Dir there", dir, b, err)
	}
}
