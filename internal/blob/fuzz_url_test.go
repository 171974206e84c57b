package blob

import (
	"bytes"
	"net/url"
	"path"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseURL parses arbitrary bucket URLs, with no defaults or with
// credentials and an SSE-C key to default from. parseURL must not panic;
// what it accepts must be a target OpenURL can use (s3: a bucket, an
// endpoint that is a host:port without a scheme, a prefix that is empty or
// ends in '/'; dir: an absolute path), and the URL written back from the
// target must parse to the same target.
func FuzzParseURL(f *testing.F) {
	for _, raw := range []string{
		"mem://",
		"dir:///var/lib/tern",
		"dir:///var/lib/a%20b",
		"s3://bkt?endpoint=localhost:9000",
		"s3://bkt/some/prefix?endpoint=h:1&region=us-east-2&tls=false&sse=s3",
		"s3://bkt/p/?endpoint=h:1&tls=true&ca=/my/ca.pem",
		"s3://bkt?endpoint=other:1&region=r&sse=c&tls=1",
		"s3://bkt/a//p?endpoint=h:1",
		"s3://user:pw@bkt?endpoint=h:1",
		"s3://bkt?endpoint=h:1&%zz",
		"dir:relative",
	} {
		f.Add(raw, false)
		f.Add(raw, true)
	}
	key := bytes.Repeat([]byte{1}, 32)
	f.Fuzz(func(t *testing.T, raw string, creds bool) {
		var o S3Options
		if creds {
			o = S3Options{AccessKey: "ak", SecretKey: "sk", SSECKey: key}
		}
		got, err := parseURL(raw, o)
		if err != nil {
			return
		}
		var back string
		switch got.scheme {
		case "s3":
			s := got.s3
			if s.Bucket == "" || s.Endpoint == "" || strings.Contains(s.Endpoint, "/") ||
				(s.Prefix != "" && !strings.HasSuffix(s.Prefix, "/")) {
				t.Fatalf("parseURL(%q) = %+v", raw, s)
			}
			q := url.Values{"endpoint": {s.Endpoint}}
			if s.Region != "" {
				q.Set("region", s.Region)
			}
			if !s.TLS {
				q.Set("tls", strconv.FormatBool(s.TLS)) // HTTPS is the default
			}
			if s.CAFile != "" {
				q.Set("ca", s.CAFile)
			}
			if s.SSE != "" {
				q.Set("sse", s.SSE)
			}
			back = (&url.URL{Scheme: "s3", Host: s.Bucket, Path: "/" + s.Prefix, RawQuery: q.Encode()}).String()
		case "dir":
			if !path.IsAbs(got.dir) {
				t.Fatalf("parseURL(%q) = dir %q, not absolute", raw, got.dir)
			}
			back = (&url.URL{Scheme: "dir", Path: got.dir}).String()
		case "mem":
			back = "mem://"
		default:
			t.Fatalf("parseURL(%q) = scheme %q", raw, got.scheme)
		}
		again, err := parseURL(back, o)
		if err != nil {
			t.Fatalf("parseURL(%q) = %+v, written back as %q, which fails: %v", raw, got, back, err)
		}
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("parseURL(%q) = %+v, written back as %q, which parses to %+v", raw, got, back, again)
		}
	})
}
