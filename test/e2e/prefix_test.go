package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/miniotest"
)

// Two servers with different data directories (two metadata stores) on one
// MinIO prefix: the second refuses to start, saying why and what to do,
// while the first goes on, and restarted reads all it wrote. Even with the
// claim deleted by hand, the second's log (with the same log ID) lives
// under keys of its own and the first's objects are untouched.
func TestTwoInstallationsOnOnePrefix(t *testing.T) {
	m := miniotest.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey)
	const prefix = "shared/"
	storage := "s3://" + m.Bucket + "/shared?endpoint=" + m.Endpoint + "&tls=false"
	dataA, dataB := t.TempDir(), t.TempDir()
	opts := tern.LogOptions{Mode: tern.ModeObject}

	a := startServer(t, dataA, "--storage", storage)
	ca := openClient(t, a.addr)
	ctx := deadline(t)
	la, err := ca.CreateLog(ctx, "orders", opts)
	if err != nil {
		t.Fatal(err)
	}
	wa, err := la.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, wa, "A0", "A1", "A2", "A3", "A4") // its segment stays open

	code, out := runTern(t, "serve", "--data", dataB, "--storage", storage, "--listen", freeAddr(t), "--http", freeAddr(t))
	if code == 0 || !strings.Contains(out, "another Tern installation") || !strings.Contains(out, "tern-installation") || !strings.Contains(out, "another prefix") {
		t.Fatalf("a second server on the prefix: exit %d, want a failure saying the prefix is another installation's and what to do\n%s", code, out)
	}
	t.Logf("the second server: exit %d\n%s", code, out)
	owner := claimOf(t, m, prefix+"tern-installation")

	appendAll(t, wa, "A5")
	all := []string{"A0", "A1", "A2", "A3", "A4", "A5"}
	wantRead(t, ca, "orders", all...)
	ca.Close()
	a.stop()
	a.restart()
	ca = openClient(t, a.addr)
	wantRead(t, ca, "orders", all...)
	ca.Close()
	a.stop()

	// An operator deletes the claim: the second server claims the prefix,
	// and keeps to keys of its own.
	before := objectsUnder(t, m, prefix+owner+"/")
	if len(before) == 0 {
		t.Fatalf("no objects under %s%s/, the first installation's keys", prefix, owner)
	}
	if err := m.Client.RemoveObject(ctx, m.Bucket, prefix+"tern-installation", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	b := startServer(t, dataB, "--storage", storage)
	cb := openClient(t, b.addr)
	lb, err := cb.CreateLog(ctx, "orders", opts)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := lb.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, wb, "B0", "B1", "B2")
	wb.Close()
	if wb, err = lb.OpenWriter(ctx); err != nil { // fences and seals B's segment
		t.Fatal(err)
	}
	appendAll(t, wb, "B3")
	wantRead(t, cb, "orders", "B0", "B1", "B2", "B3")
	ownerB := claimOf(t, m, prefix+"tern-installation")
	if ownerB == owner {
		t.Fatalf("both servers are installation %s", owner)
	}
	cb.Close()
	b.stop()

	after := objectsUnder(t, m, prefix+owner+"/")
	if !maps.EqualFunc(before, after, bytes.Equal) {
		t.Fatalf("the first installation's objects changed: %q before, %q after", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}

	// Given its claim back, the first reads all it wrote, and writes on.
	if err := m.Client.RemoveObject(ctx, m.Bucket, prefix+"tern-installation", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	a.restart()
	ca = openClient(t, a.addr)
	wantRead(t, ca, "orders", all...)
	la, err = ca.OpenLog(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if wa, err = la.OpenWriter(ctx); err != nil {
		t.Fatal(err)
	}
	appendAll(t, wa, "A6")
	wantRead(t, ca, "orders", append(all, "A6")...)
}

func appendAll(t *testing.T, w *tern.Writer, payloads ...string) {
	t.Helper()
	for _, p := range payloads {
		if _, err := w.Append(deadline(t), tern.Entry{Payload: []byte(p)}); err != nil {
			t.Fatalf("append %s: %v", p, err)
		}
	}
}

// wantRead reads the whole log and requires the payloads want.
func wantRead(t *testing.T, c *tern.Client, name string, want ...string) {
	t.Helper()
	ctx := deadline(t)
	l, err := c.OpenLog(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.OpenReader(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for tern.Offset(len(got)) < info.End {
		e, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("read %s at %d: %v", name, len(got), err)
		}
		got = append(got, string(e.Payload))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s reads %q, want %q", name, got, want)
	}
}

// claimOf returns the installation that the claim object at key names.
func claimOf(t *testing.T, m *miniotest.Server, key string) string {
	t.Helper()
	obj, err := m.Client.GetObject(t.Context(), m.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("read the claim %s: %v", key, err)
	}
	var c struct{ Installation string }
	if err := json.Unmarshal(data, &c); err != nil || c.Installation == "" {
		t.Fatalf("claim %s = %s: %v", key, data, err)
	}
	return c.Installation
}

// objectsUnder returns the objects whose keys start with prefix, key to
// content.
func objectsUnder(t *testing.T, m *miniotest.Server, prefix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for info := range m.Client.ListObjects(t.Context(), m.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if info.Err != nil {
			t.Fatal(info.Err)
		}
		obj, err := m.Client.GetObject(t.Context(), m.Bucket, info.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[info.Key] = data
	}
	return out
}
