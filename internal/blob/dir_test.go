package blob_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/blob/blobtest"
)

func TestDir(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Bucket { return openDir(t, t.TempDir()) })
}

func openDir(t *testing.T, path string) *blob.Dir {
	t.Helper()
	d, err := blob.OpenDir(path)
	if err != nil {
		t.Fatalf("OpenDir: %v", err)
	}
	return d
}

// An object is the file of its key, and stays there for the next OpenDir.
func TestDirLayoutAndReopen(t *testing.T) {
	root := filepath.Join(t.TempDir(), "not", "yet")
	d := openDir(t, root)
	put(t, d, "12/00000003/00000041", "data")
	data, err := os.ReadFile(filepath.Join(root, "12", "00000003", "00000041"))
	if err != nil || string(data) != "data" {
		t.Fatalf("the object's file holds %q, %v, want %q", data, err, "data")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDir(t, root)
	if got, err := d.Get(t.Context(), "12/00000003/00000041"); err != nil || string(got) != "data" {
		t.Fatalf("Get after reopening = %q, %v", got, err)
	}
	if err := d.PutIfAbsent(t.Context(), "12/00000003/00000041", nil); !errors.Is(err, blob.ErrExist) {
		t.Fatalf("PutIfAbsent after reopening: err = %v, want ErrExist", err)
	}
}

func TestOpenDirOnFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{file, filepath.Join(file, "sub")} {
		if _, err := blob.OpenDir(path); err == nil {
			t.Errorf("OpenDir(%s) of a file succeeded", path)
		}
	}
}

// A PutIfAbsent's temporary files, including those a crash left, are not
// objects, and no key can name one.
func TestDirTempFiles(t *testing.T) {
	root := t.TempDir()
	d := openDir(t, root)
	put(t, d, "a/b", "x")
	for _, name := range []string{".tmp-123", "a/.tmp-456"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("torn"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, prefix := range []string{"", "a/", "a/.", "."} {
		infos, err := d.List(t.Context(), prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		for _, info := range infos {
			if info.Key != "a/b" {
				t.Errorf("List(%q) lists %q", prefix, info.Key)
			}
		}
	}
	for _, key := range []string{".tmp-123", "a/.tmp-456", ".tmp-x/b"} {
		if _, err := d.Get(t.Context(), key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Get(%q): err = %v, want ErrInvalidKey", key, err)
		}
		if err := d.PutIfAbsent(t.Context(), key, nil); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("PutIfAbsent(%q): err = %v, want ErrInvalidKey", key, err)
		}
	}
	// Puts leave no temporary files behind.
	put(t, d, "c/d", "y")
	if err := d.PutIfAbsent(t.Context(), "c/d", []byte("z")); !errors.Is(err, blob.ErrExist) {
		t.Fatalf("PutIfAbsent: err = %v, want ErrExist", err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "c"))
	if err != nil || len(entries) != 1 || entries[0].Name() != "d" {
		t.Fatalf("directory c holds %v, %v, want only d", entries, err)
	}
}

// A Dir cannot hold a key and a key under it; trying fails, and not with
// ErrExist, which would tell the caller that its object might be stored.
func TestDirKeyUnderKey(t *testing.T) {
	d := openDir(t, t.TempDir())
	ctx := t.Context()
	put(t, d, "a", "file")
	put(t, d, "b/c", "file")
	for key, want := range map[string]string{"a/x": "is an object", "b": "is a directory of other keys"} {
		err := d.PutIfAbsent(ctx, key, []byte("y"))
		if err == nil || errors.Is(err, blob.ErrExist) || !strings.Contains(err.Error(), want) {
			t.Errorf("PutIfAbsent(%q): err = %v, want an error saying it %s", key, err, want)
		}
	}
	if err := d.Delete(ctx, "b"); err != nil {
		t.Errorf("Delete of a directory of other keys: %v", err)
	}
	if got, err := d.Get(ctx, "b/c"); err != nil || string(got) != "file" {
		t.Errorf("Get(b/c) after Delete(b) = %q, %v", got, err)
	}
}

// Delete removes the directories it leaves empty, but not the root.
func TestDirDeleteRemovesEmptyDirs(t *testing.T) {
	root := t.TempDir()
	d := openDir(t, root)
	put(t, d, "a/b/c", "1")
	put(t, d, "a/d", "2")
	if err := d.Delete(t.Context(), "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "a", "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a/b after deleting its only object: %v, want it removed", err)
	}
	if err := d.Delete(t.Context(), "a/d"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) != 0 {
		t.Errorf("root after deleting every object holds %v, %v, want nothing", entries, err)
	}
	put(t, d, "a/b/c", "3") // and the directories are made again
}

// PutIfAbsents and Deletes in the same directories race on making and
// removing them; every PutIfAbsent still succeeds.
func TestDirConcurrentPutDelete(t *testing.T) {
	d := openDir(t, t.TempDir())
	ctx := t.Context()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := fmt.Sprintf("x/%d/y/%d-%d", i%3, g, i)
				if err := d.PutIfAbsent(ctx, key, []byte(key)); err != nil {
					t.Errorf("PutIfAbsent(%q): %v", key, err)
					return
				}
				if got, err := d.Get(ctx, key); err != nil || string(got) != key {
					t.Errorf("Get(%q) = %q, %v", key, got, err)
					return
				}
				if err := d.Delete(ctx, key); err != nil {
					t.Errorf("Delete(%q): %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if infos, err := d.List(ctx, ""); err != nil || len(infos) != 0 {
		t.Errorf("List after deleting everything = %v, %v", infos, err)
	}
}

func put(t *testing.T, b blob.Bucket, key, data string) {
	t.Helper()
	if err := b.PutIfAbsent(t.Context(), key, []byte(data)); err != nil {
		t.Fatalf("PutIfAbsent(%q): %v", key, err)
	}
}
