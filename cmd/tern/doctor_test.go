package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/ternwal/tern/internal/miniotest"
)

// doctorReport is the JSON that tern doctor --json prints.
type doctorReport struct {
	Target string `json:"target"`
	Checks []struct {
		Name, Figure, Verdict, Threshold string
		Result                           struct {
			System  string `json:"system"`
			Entries int64  `json:"entries"`
		}
	} `json:"checks"`
	Failed bool `json:"failed"`
}

// doctor runs tern doctor, which may pass or fail on the machine's figures
// but on nothing else, and returns its stdout.
func doctor(t *testing.T, args ...string) string {
	t.Helper()
	r := ternIn(t, t.TempDir(), "", append([]string{"doctor", "--duration", "200ms"}, args...)...)
	switch {
	case r.code == 0 && r.stderr == "":
	case r.code == 1 && strings.Contains(r.stderr, "checks failed") && strings.Contains(r.stderr, "docs/doctor.md"):
		t.Logf("the machine failed checks: %s", r.stderr)
	default:
		t.Fatalf("tern doctor %q: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "{") {
		t.Logf("tern doctor %q:\n%s", args, r.stdout)
	}
	return r.stdout
}

// checkReport checks the JSON report of a doctor run against system.
func checkReport(t *testing.T, out, system string, names ...string) {
	t.Helper()
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json printed no report: %v\n%s", err, out)
	}
	if len(rep.Checks) != len(names) {
		t.Fatalf("%d checks, want %d: %+v", len(rep.Checks), len(names), rep.Checks)
	}
	failed := false
	for i, c := range rep.Checks {
		if c.Name != names[i] || c.Figure == "" || c.Threshold == "" || c.Result.System != system || c.Result.Entries <= 0 {
			t.Errorf("check %d: %+v, want %q measured on %s", i, c, names[i], system)
		}
		switch c.Verdict {
		case "ok", "warn":
		case "FAIL":
			failed = true
		default:
			t.Errorf("check %s: verdict %q", c.Name, c.Verdict)
		}
	}
	if rep.Failed != failed {
		t.Errorf("failed = %v, but the checks say %v", rep.Failed, failed)
	}
}

func TestDoctorDisk(t *testing.T) {
	dir := t.TempDir()
	out := doctor(t, dir)
	for _, want := range []string{"CHECK", "fdatasync 1KiB append", "p99", "durable 4KiB writes/s", "sequential read 1MiB", "MB/s", "(etcd)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	checkReport(t, doctor(t, "--json", dir), "disk",
		"fdatasync 1KiB append", "fdatasync 4KiB append", "durable 4KiB writes/s", "sequential write 1MiB", "sequential read 1MiB")
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("doctor left %v in the directory it checked", left)
	}
}

func TestDoctorS3(t *testing.T) {
	s := miniotest.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	target := "s3://" + s.Bucket + "/doctor?endpoint=" + s.Endpoint + "&tls=false"
	out := doctor(t, target)
	for _, want := range []string{"PUT 4KiB", "GET 4MiB x8", "p50", "(AWS)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	checkReport(t, doctor(t, "--json", target), "s3", "PUT 4KiB", "GET 4KiB", "PUT 4MiB x8", "GET 4MiB x8")
	for obj := range s.Client.ListObjects(t.Context(), s.Bucket, listAll) {
		t.Errorf("doctor left s3://%s/%s behind (err %v)", s.Bucket, obj.Key, obj.Err)
	}

	// Credentials the server refuses, and a bucket it does not have.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	fails(t, 1, t.TempDir(), "", []string{"doctor", target}, "refused the credentials", "AWS_SECRET_ACCESS_KEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	fails(t, 1, t.TempDir(), "", []string{"doctor", "s3://nope?endpoint=" + s.Endpoint + "&tls=false"}, `bucket "nope" does not exist`, "create it first")

	// The credentials tern serve reads come first, as they do for it.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("TERN_STORAGE_ACCESS_KEY", s.AccessKey)
	t.Setenv("TERN_STORAGE_SECRET_KEY", s.SecretKey)
	checkReport(t, doctor(t, "--json", target), "s3", "PUT 4KiB", "GET 4KiB", "PUT 4MiB x8", "GET 4MiB x8")
}

func TestDoctorErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A port that was free a moment ago: nothing listens on it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")

	for _, tc := range []struct {
		code  int
		args  []string
		wants []string
	}{
		{1, []string{filepath.Join(dir, "missing")}, []string{"missing does not exist", "give a directory on the disk to check"}},
		{1, []string{file}, []string{"is not a directory"}},
		{2, []string{"http://example.com/x"}, []string{`scheme "http"`, "s3://BUCKET"}},
		{2, []string{"s3://bucket"}, []string{"no endpoint", "?endpoint=HOST:PORT"}},
		{2, []string{"s3://b?endpoint=" + dead}, []string{`Bucket "b"`, "shorter than 3"}},
		{2, []string{"s3://?endpoint=" + dead}, []string{"no bucket"}},
		{2, []string{"s3://bucket?endpoint=" + dead + "&tls=maybe"}, []string{`tls="maybe"`, "tls=false"}},
		{2, []string{"s3://bucket?endpoint=" + dead + "&secure=false"}, []string{`unknown parameter "secure": use tls=false`, "endpoint, region, tls, ca, sse"}},
		{2, []string{"s3://bucket?endpoint=" + dead + "&nope=x"}, []string{`unknown parameter "nope"`, "endpoint, region, tls, ca, sse"}},
		{2, []string{"s3://b\x7f?endpoint=x"}, []string{"is not a URL"}},
		{2, []string{dir, "--duration", "0s"}, []string{"--duration 0s"}},
		{2, []string{}, []string{"needs PATH|s3://BUCKET"}},
		{1, []string{"s3://bucket?endpoint=" + dead + "&tls=false"}, []string{"cannot reach S3 at http://" + dead, "check that the server is running"}},
		{1, []string{"s3://bucket?endpoint=" + dead}, []string{"cannot reach S3 at https://" + dead, "&tls=false"}},
	} {
		fails(t, tc.code, dir, "", append([]string{"doctor"}, tc.args...), tc.wants...)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "")
	fails(t, 1, dir, "", []string{"doctor", "s3://bucket?endpoint=" + dead}, "set TERN_STORAGE_ACCESS_KEY and TERN_STORAGE_SECRET_KEY, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	t.Setenv("TERN_STORAGE_ACCESS_KEY", "id")
	fails(t, 2, dir, "", []string{"doctor", "s3://bucket?endpoint=" + dead}, "TERN_STORAGE_ACCESS_KEY and TERN_STORAGE_SECRET_KEY go together")
}

var listAll = minio.ListObjectsOptions{Recursive: true}
