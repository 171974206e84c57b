package tern

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/miniotest"
)

// forEachStore runs f on an empty dir:// store and on an empty prefix of a
// real MinIO.
func forEachStore(t *testing.T, f func(t *testing.T, st StorageOptions)) {
	t.Run("dir", func(t *testing.T) {
		f(t, StorageOptions{URL: "dir://" + t.TempDir()})
	})
	t.Run("minio", func(t *testing.T) {
		m := miniotest.Start(t)
		f(t, StorageOptions{
			URL:       "s3://" + m.Bucket + "/shared/prefix?endpoint=" + m.Endpoint + "&tls=false",
			AccessKey: m.AccessKey, SecretKey: m.SecretKey,
		})
	})
}

func openStorage(t *testing.T, dir string, st StorageOptions) (*Client, error) {
	t.Helper()
	c, err := Open(t.Context(), Options{Dir: dir, Storage: st})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func mustOpenStorage(t *testing.T, dir string, st StorageOptions) *Client {
	t.Helper()
	c, err := openStorage(t, dir, st)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// objects returns every object of the store, key to content.
func objects(t *testing.T, st StorageOptions) map[string][]byte {
	t.Helper()
	b, err := st.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	infos, err := b.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, in := range infos {
		if out[in.Key], err = b.Get(t.Context(), in.Key); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func appendAll(t *testing.T, w *Writer, payloads ...string) {
	t.Helper()
	for _, p := range payloads {
		if _, err := w.Append(t.Context(), Entry{Payload: []byte(p)}); err != nil {
			t.Fatalf("append %s: %v", p, err)
		}
	}
}

func payloads(t *testing.T, c *Client, name string) []string {
	t.Helper()
	l, err := c.OpenLog(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range readAll(t, l, 0) {
		out = append(out, string(e.Payload))
	}
	return out
}

func wantPayloads(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s reads %q, want %q", what, got, want)
	}
}

// A second installation (another metadata store) on a prefix that one
// owns refuses to open, saying why and what to do, and the first's log,
// with its segment open, goes on and is read back whole after a restart.
// With the claim deleted by hand the second opens, and its logs, with the
// same IDs, have keys of their own: the first's objects are untouched.
func TestInstallationOwnsPrefix(t *testing.T) {
	forEachStore(t, func(t *testing.T, st StorageOptions) {
		ctx := t.Context()
		dirA, dirB := t.TempDir(), t.TempDir()
		a := mustOpenStorage(t, dirA, st)
		l, err := a.CreateLog(ctx, "orders", LogOptions{Mode: ModeObject})
		if err != nil {
			t.Fatal(err)
		}
		w, err := l.OpenWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, w, "A0", "A1", "A2", "A3", "A4")

		_, err = openStorage(t, dirB, st)
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("open of a second installation on the prefix: %v, want ErrInvalid", err)
		}
		t.Logf("the refusal: %v", err)
		for _, want := range []string{"another Tern installation", claimKey, embeddedOf(a).install.ID, "another prefix", dirA} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal %q does not say %q", err, want)
			}
		}

		appendAll(t, w, "A5") // the first installation goes on
		w.Close()
		a.Close()
		a = mustOpenStorage(t, dirA, st)
		all := []string{"A0", "A1", "A2", "A3", "A4", "A5"}
		wantPayloads(t, "the first installation, restarted,", payloads(t, a, "orders"), all...)
		w = openWriter(t, a, "orders") // fences and seals the first writer's segment
		appendAll(t, w, "A6")
		all = append(all, "A6")
		w.Close()
		a.Close()

		// An operator deletes the claim: the second installation claims the
		// prefix, and works on keys of its own.
		before := objects(t, st)
		bucket, err := st.open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer bucket.Close()
		if err := bucket.Delete(ctx, claimKey); err != nil {
			t.Fatal(err)
		}
		delete(before, claimKey)
		b := mustOpenStorage(t, dirB, st)
		lb, err := b.CreateLog(ctx, "orders", LogOptions{Mode: ModeObject})
		if err != nil {
			t.Fatal(err)
		}
		if idA, idB := uint64(1), logOf(lb).id; idA != idB {
			t.Fatalf("the second installation's log has ID %d, want %d like the first's (the case the keys must tell apart)", idB, idA)
		}
		wb := openWriter(t, b, "orders")
		appendAll(t, wb, "B0", "B1", "B2")
		wb.Close()
		wb = openWriter(t, b, "orders") // fences and seals B's open segment
		appendAll(t, wb, "B3")
		wb.Close()
		wantPayloads(t, "the second installation", payloads(t, b, "orders"), "B0", "B1", "B2", "B3")
		if err := lb.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.DeleteLog(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
		b.Close()

		after := objects(t, st)
		for k, v := range before {
			if got, ok := after[k]; !ok || !bytes.Equal(got, v) {
				t.Errorf("object %s of the first installation changed or is gone (present: %v)", k, ok)
			}
		}
		delete(after, claimKey)
		if got, want := slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)); !slices.Equal(got, want) {
			t.Errorf("after the second installation deleted its log, the objects are %q, want the first's %q", got, want)
		}

		// With the claim given back to it, the first reads all it wrote.
		if err := bucket.Delete(ctx, claimKey); err != nil {
			t.Fatal(err)
		}
		a = mustOpenStorage(t, dirA, st)
		wantPayloads(t, "the first installation, after the second's run,", payloads(t, a, "orders"), all...)
	})
}

func openWriter(t *testing.T, c *Client, name string) *Writer {
	t.Helper()
	l, err := c.OpenLog(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Fresh installations that open an empty prefix at once: one claims it,
// the others are refused.
func TestInstallationClaimRace(t *testing.T) {
	forEachStore(t, func(t *testing.T, st StorageOptions) {
		const n = 4
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			dir := t.TempDir()
			wg.Go(func() { _, errs[i] = openStorage(t, dir, st) })
		}
		wg.Wait()
		opened := 0
		for i, err := range errs {
			switch {
			case err == nil:
				opened++
			case !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), claimKey):
				t.Errorf("installation %d: %v, want a refusal naming %s", i, err, claimKey)
			}
		}
		if opened != 1 {
			t.Fatalf("%d installations opened the prefix, want 1", opened)
		}
	})
}

// Logs written before installations had IDs (keys under <log ID>/, no
// claim) are the installation's that knows them: it claims the prefix,
// reads and writes them, and deletes their objects; another installation
// is refused, and never reads them.
func TestInstallationLegacyKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, st StorageOptions) {
		ctx := t.Context()
		dir, fresh := t.TempDir(), t.TempDir()
		c := mustOpenStorage(t, dir, st)
		legacyLog(t, c, "old", "L0", "L1", "L2")
		legacyLog(t, c, "gone", "G0")
		c.Close()
		before := objects(t, st)
		if _, ok := before["1/00000001/00000000"]; !ok {
			t.Fatalf("the legacy log's objects are not where old versions put them: %q", slices.Sorted(maps.Keys(before)))
		}
		bucket, err := st.open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer bucket.Close()
		if err := bucket.Delete(ctx, claimKey); err != nil { // as old versions left it
			t.Fatal(err)
		}

		_, err = openStorage(t, fresh, st)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "does not know") {
			t.Fatalf("open of a fresh installation on a prefix with older logs: %v, want ErrInvalid saying so", err)
		}

		c = mustOpenStorage(t, dir, st)
		wantPayloads(t, "the legacy log", payloads(t, c, "old"), "L0", "L1", "L2")
		w := openWriter(t, c, "old")
		appendAll(t, w, "L3")
		w.Close()
		l, err := c.OpenLog(ctx, "old")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		wantPayloads(t, "the legacy log, compacted,", payloads(t, c, "old"), "L0", "L1", "L2", "L3")
		if err := c.DeleteLog(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		for k := range objects(t, st) {
			if strings.HasPrefix(k, "2/") {
				t.Errorf("object %s of the deleted legacy log is left", k)
			}
		}
		n, err := c.CreateLog(ctx, "new", LogOptions{Mode: ModeObject})
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, openWriter(t, c, "new"), "N0")
		if got, want := objectPrefix(meta.Log{ID: logOf(n).id, Installation: logOf(n).c.install.ID}), fmt.Sprintf("%s/%d/", embeddedOf(c).install.ID, logOf(n).id); got != want {
			t.Fatalf("a new log's prefix is %q, want %q", got, want)
		}
		c.Close()
		_, err = openStorage(t, fresh, st)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), claimKey) {
			t.Fatalf("open of a fresh installation on a claimed prefix: %v, want ErrInvalid naming %s", err, claimKey)
		}
	})
}

// legacyLog creates an object log as versions before installation IDs did
// (no installation in its metadata) and writes payloads to it.
func legacyLog(t *testing.T, c *Client, name string, payloads ...string) {
	t.Helper()
	e := embeddedOf(c)
	in := e.install
	e.install = meta.Installation{}
	_, err := c.CreateLog(t.Context(), name, LogOptions{Mode: ModeObject})
	e.install = in
	if err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, c, name)
	appendAll(t, w, payloads...)
	w.Close()
}

// A deleted log's mark that names objects outside the log's prefixes (its
// metadata was replaced under the data directory) deletes nothing: the
// client opens, and the objects and the directory stay.
func TestInstallationForeignDeleteMark(t *testing.T) {
	store, data := t.TempDir(), t.TempDir()
	st := StorageOptions{URL: "dir://" + store}
	c := mustOpenStorage(t, data, st)
	c.Close()
	dir := filepath.Join(data, "logs", "9")
	if err := os.MkdirAll(filepath.Join(store, "OTHERINSTALLATION", "9", "00000001"), 0o755); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(store, "OTHERINSTALLATION", "9", "00000001", "00000000")
	os.WriteFile(obj, []byte("another installation's"), 0o644)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, objectsMark), []byte("OTHERINSTALLATION/9/"), 0o644)
	os.WriteFile(filepath.Join(dir, deletedMark), nil, 0o644)

	mustOpenStorage(t, data, st)
	for _, path := range []string{obj, dir} {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: %v, want it kept", path, err)
		}
	}
}
