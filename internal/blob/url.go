package blob

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
)

// OpenURL opens the bucket that raw names:
//
//	s3://BUCKET/PREFIX?endpoint=HOST:PORT&region=R&tls=false&ca=FILE&sse=s3
//	dir:///absolute/path
//	mem://
//
// An s3 URL speaks HTTPS unless it says tls=false; see ParseS3URL for its
// parameters. mem:// is a new empty Mem, for tests.
func OpenURL(ctx context.Context, raw string, o S3Options) (Bucket, error) {
	t, err := parseURL(raw, o)
	if err != nil {
		return nil, err
	}
	switch t.scheme {
	case "s3":
		return OpenS3(ctx, t.s3)
	case "dir":
		return OpenDir(t.dir)
	default:
		return NewMem(), nil
	}
}

// target is what a bucket URL names.
type target struct {
	scheme string
	s3     S3Options // for s3
	dir    string    // for dir
}

// ParseS3URL returns the options of the s3 URL raw, the one form every
// command takes:
//
//	s3://BUCKET[/PREFIX]?endpoint=HOST:PORT[&region=R][&tls=false][&ca=FILE][&sse=s3|c]
//
// endpoint is the store's host:port (for AWS, s3.amazonaws.com); region the
// bucket's (empty asks the store); tls=false selects plain HTTP, HTTPS being
// the default; ca a PEM file of the roots to trust; sse the server-side
// encryption of new objects. o supplies the credentials and the SSE-C key,
// and defaults for endpoint, region, ca and sse, which the URL overrides;
// o.TLS is not used: the URL alone says whether to use TLS. The bucket and
// prefix are the URL's. Any other parameter is an error that names these.
func ParseS3URL(raw string, o S3Options) (S3Options, error) {
	t, err := parseURL(raw, o)
	if err != nil {
		return S3Options{}, err
	}
	if t.scheme != "s3" {
		return S3Options{}, fmt.Errorf("blob: bucket URL %q: want s3://BUCKET/PREFIX?endpoint=HOST:PORT", raw)
	}
	return t.s3, nil
}

// s3Params are the query parameters of an s3 URL.
var s3Params = []string{"endpoint", "region", "tls", "ca", "sse"}

// s3Renamed are parameters that other tools (and Tern's commands before
// they shared this parser) spell differently, with what to write instead.
var s3Renamed = map[string]string{
	"secure": "tls=false for plain HTTP (HTTPS is the default)",
}

func parseURL(raw string, o S3Options) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("blob: bucket URL: %w", err)
	}
	bad := func(format string, args ...any) (target, error) {
		return target{}, fmt.Errorf("blob: bucket URL %q: "+format, append([]any{raw}, args...)...)
	}
	if u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return bad("want s3://BUCKET/PREFIX?endpoint=HOST:PORT, dir:///ABSOLUTE/PATH or mem://")
	}
	switch u.Scheme {
	case "s3":
		o.Bucket = u.Host
		o.Prefix = strings.TrimPrefix(u.Path, "/")
		if o.Bucket == "" {
			return bad("no bucket: want s3://BUCKET/PREFIX")
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return bad("%v", err)
		}
		for name, values := range q {
			if use, ok := s3Renamed[name]; ok {
				return bad("unknown parameter %q: use %s (known: %s)", name, use, strings.Join(s3Params, ", "))
			}
			if !slices.Contains(s3Params, name) {
				return bad("unknown parameter %q (known: %s)", name, strings.Join(s3Params, ", "))
			}
			if len(values) > 1 {
				return bad("parameter %q is given %d times", name, len(values))
			}
		}
		if q.Has("endpoint") {
			o.Endpoint = q.Get("endpoint")
		}
		if q.Has("region") {
			o.Region = q.Get("region")
		}
		o.TLS = true // HTTPS unless the URL says otherwise
		if q.Has("tls") {
			if o.TLS, err = strconv.ParseBool(q.Get("tls")); err != nil {
				return bad("tls=%q is not true or false: HTTPS is the default; tls=false selects plain HTTP", q.Get("tls"))
			}
		}
		if q.Has("ca") {
			o.CAFile = q.Get("ca")
		}
		if q.Has("sse") {
			o.SSE = q.Get("sse")
		}
		if o.Endpoint == "" {
			return bad("no endpoint: add ?endpoint=HOST:PORT")
		}
		if err := o.normalize(); err != nil {
			return bad("%s", strings.TrimPrefix(err.Error(), "blob: "))
		}
		return target{scheme: "s3", s3: o}, nil
	case "dir":
		if u.Host != "" || !path.IsAbs(u.Path) {
			return bad("want dir:///ABSOLUTE/PATH, with three slashes")
		}
		if u.RawQuery != "" {
			return bad("a dir URL takes no parameters")
		}
		return target{scheme: "dir", dir: u.Path}, nil
	case "mem":
		if u.Host != "" || u.Path != "" || u.RawQuery != "" {
			return bad("want mem://, with nothing after it")
		}
		return target{scheme: "mem"}, nil
	}
	return bad("unknown scheme %q: want s3, dir or mem", u.Scheme)
}
