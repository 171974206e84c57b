// Package blobtest is the acceptance suite for blob.Bucket: every
// implementation runs it from its own tests and must pass it unchanged.
package blobtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/ternwal/tern/internal/blob"
)

// Run runs the suite against buckets made by open, one per subtest. open
// must return a bucket with no objects; Run closes it when the subtest
// ends, before any cleanup open registered on t runs.
func Run(t *testing.T, open func(t *testing.T) blob.Bucket) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, b blob.Bucket)
	}{
		{"PutGet", testPutGet},
		{"Empty", testEmpty},
		{"Large", testLarge},
		{"Parts", testParts},
		{"Exist", testExist},
		{"ConcurrentPut", testConcurrentPut},
		{"GetRange", testGetRange},
		{"NotFound", testNotFound},
		{"Stat", testStat},
		{"List", testList},
		{"ListEmpty", testListEmpty},
		{"Delete", testDelete},
		{"NotAliased", testNotAliased},
		{"InvalidKeys", testInvalidKeys},
		{"CanceledContext", testCanceledContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, b)
		})
	}
}

// testPutGet round-trips objects of any bytes at keys of one to many
// segments.
func testPutGet(t *testing.T, b blob.Bucket) {
	objects := map[string][]byte{
		"a":                       []byte("a"),
		"12/00000003/00000041":    []byte("segment 3, object 41"),
		"x/y/z/1/2/3/4/5/6/7":     []byte("deep"),
		"bin":                     {0, 1, 2, 0x7f, 0x80, 0xfe, 0xff, 0, '\n', '\r'},
		"spaces and-dots/a.b~c_d": []byte("names are bytes"),
		"ünïcode/キー":              []byte("utf-8"),
	}
	for key, data := range objects {
		put(t, b, key, data)
	}
	for key, want := range objects {
		if got := get(t, b, key); !bytes.Equal(got, want) {
			t.Errorf("Get(%q) = %q, want %q", key, got, want)
		}
	}
}

// An object of no bytes is an object: it exists, has size 0 and is listed.
func testEmpty(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	put(t, b, "nil", nil)
	put(t, b, "empty", []byte{})
	for _, key := range []string{"nil", "empty"} {
		if got := get(t, b, key); len(got) != 0 {
			t.Errorf("Get(%q) = %q, want no bytes", key, got)
		}
		if info := stat(t, b, key); info.Size != 0 {
			t.Errorf("Stat(%q).Size = %d, want 0", key, info.Size)
		}
		if err := b.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, blob.ErrExist) {
			t.Errorf("PutIfAbsent over the empty object %q: err = %v, want ErrExist", key, err)
		}
		p := make([]byte, 4)
		if n, err := b.GetRange(ctx, key, 0, p); n != 0 || err != io.EOF {
			t.Errorf("GetRange(%q, 0, 4 bytes) = %d, %v, want 0, io.EOF", key, n, err)
		}
	}
	checkList(t, b, "", []blob.Info{{Key: "empty", Size: 0}, {Key: "nil", Size: 0}})
}

func testLarge(t *testing.T, b blob.Bucket) {
	const size = 8 << 20
	data := pattern(size)
	put(t, b, "big/object", data)
	got := get(t, b, "big/object")
	if !bytes.Equal(got, data) {
		t.Fatalf("Get of an 8 MiB object returned %d bytes that differ from those put", len(got))
	}
	if info := stat(t, b, "big/object"); info.Size != size {
		t.Errorf("Stat.Size = %d, want %d", info.Size, size)
	}
	p := make([]byte, 1<<20)
	off := int64(size - 1<<19)
	n, err := b.GetRange(t.Context(), "big/object", off, p)
	if n != 1<<19 || err != io.EOF || !bytes.Equal(p[:n], data[off:]) {
		t.Errorf("GetRange of the last 512 KiB with a 1 MiB buffer = %d, %v (bytes equal: %v), want %d, io.EOF",
			n, err, bytes.Equal(p[:n], data[off:]), 1<<19)
	}
}

// An object put in parts is the parts one after the other, whatever their
// sizes, none included; and the bucket keeps no reference to them.
func testParts(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	big := pattern(3<<20 + 5)
	parts := [][]byte{[]byte("head"), nil, big[:1<<20], {}, big[1<<20:], []byte("tail")}
	want := slices.Concat(parts...)
	if err := b.PutIfAbsent(ctx, "parts/many", parts...); err != nil {
		t.Fatalf("PutIfAbsent in %d parts: %v", len(parts), err)
	}
	parts[0][0] = 'H'
	if got := get(t, b, "parts/many"); !bytes.Equal(got, want) {
		t.Fatalf("Get of an object put in %d parts returned %d bytes that differ from the %d put", len(parts), len(got), len(want))
	}
	p := make([]byte, 10)
	off := int64(4 + 1<<20 - 5) // across the boundary of two parts
	if n, err := b.GetRange(ctx, "parts/many", off, p); n != len(p) || err != nil || !bytes.Equal(p, want[off:off+10]) {
		t.Errorf("GetRange across parts = %d, %v, %q; want %q", n, err, p[:n], want[off:off+10])
	}
	if err := b.PutIfAbsent(ctx, "parts/none"); err != nil {
		t.Fatalf("PutIfAbsent of no parts: %v", err)
	}
	if info := stat(t, b, "parts/none"); info.Size != 0 {
		t.Errorf("an object put with no parts has %d bytes, want 0", info.Size)
	}
	if err := b.PutIfAbsent(ctx, "parts/many", []byte("x"), []byte("y")); !errors.Is(err, blob.ErrExist) {
		t.Errorf("PutIfAbsent in parts over an object: err = %v, want ErrExist", err)
	}
}

// PutIfAbsent of a key that exists fails with ErrExist and keeps the first
// object.
func testExist(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	put(t, b, "a/b", []byte("first"))
	for _, data := range [][]byte{[]byte("second, longer"), []byte("first"), nil} {
		if err := b.PutIfAbsent(ctx, "a/b", data); !errors.Is(err, blob.ErrExist) {
			t.Errorf("PutIfAbsent(%q) of an existing key: err = %v, want ErrExist", data, err)
		}
	}
	if got := get(t, b, "a/b"); string(got) != "first" {
		t.Errorf("Get after failed PutIfAbsents = %q, want %q", got, "first")
	}
	if info := stat(t, b, "a/b"); info.Size != 5 {
		t.Errorf("Stat.Size after failed PutIfAbsents = %d, want 5", info.Size)
	}
}

// Of concurrent PutIfAbsents of one key exactly one succeeds, and its
// content is the object's.
func testConcurrentPut(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	const n = 8
	for round := range 3 {
		key := fmt.Sprintf("race/%d", round)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			won  []int
			errs []error
		)
		content := func(i int) []byte {
			// Different sizes, so that a mix of two contents shows.
			return bytes.Repeat([]byte{byte('a' + i)}, 1000+i*10000)
		}
		for i := range n {
			wg.Go(func() {
				err := b.PutIfAbsent(ctx, key, content(i))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, i)
				case !errors.Is(err, blob.ErrExist):
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("PutIfAbsent errors other than ErrExist: %v", errs)
		}
		if len(won) != 1 {
			t.Fatalf("%d of %d concurrent PutIfAbsents of %s succeeded (%v), want 1", len(won), n, key, won)
		}
		if got, want := get(t, b, key), content(won[0]); !bytes.Equal(got, want) {
			t.Fatalf("Get(%s) returned %d bytes, not the %d bytes of the PutIfAbsent that succeeded", key, len(got), len(want))
		}
	}
}

func testGetRange(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	data := pattern(100)
	put(t, b, "obj", data)
	for _, tc := range []struct {
		off     int64
		len     int
		want    int
		wantEOF bool
	}{
		{off: 0, len: 100, want: 100},
		{off: 0, len: 1, want: 1},
		{off: 10, len: 20, want: 20},                // the middle
		{off: 80, len: 20, want: 20},                // to the end exactly
		{off: 99, len: 1, want: 1},                  // the last byte
		{off: 90, len: 20, want: 10, wantEOF: true}, // past the end
		{off: 0, len: 150, want: 100, wantEOF: true},
		{off: 100, len: 5, want: 0, wantEOF: true}, // at the end
		{off: 150, len: 5, want: 0, wantEOF: true}, // beyond it
		{off: 10, len: 0, want: 0},
	} {
		p := bytes.Repeat([]byte{0xee}, tc.len)
		n, err := b.GetRange(ctx, "obj", tc.off, p)
		wantErr := error(nil)
		if tc.wantEOF {
			wantErr = io.EOF
		}
		if n != tc.want || err != wantErr {
			t.Errorf("GetRange(off %d, %d bytes) = %d, %v, want %d, %v", tc.off, tc.len, n, err, tc.want, wantErr)
			continue
		}
		if n > 0 && !bytes.Equal(p[:n], data[tc.off:tc.off+int64(n)]) {
			t.Errorf("GetRange(off %d, %d bytes) read %x, want %x", tc.off, tc.len, p[:n], data[tc.off:tc.off+int64(n)])
		}
	}
}

// Get, GetRange and Stat of a key with no object fail with ErrNotFound,
// also when the key is a prefix of another key, or has one as its prefix.
func testNotFound(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	put(t, b, "a/b", []byte("x"))
	put(t, b, "gone", []byte("x"))
	if err := b.Delete(ctx, "gone"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, key := range []string{"missing", "gone", "a", "a/b/c", "a/bb", "b"} {
		if _, err := b.Get(ctx, key); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want ErrNotFound", key, err)
		}
		if _, err := b.GetRange(ctx, key, 0, make([]byte, 1)); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("GetRange(%q): err = %v, want ErrNotFound", key, err)
		}
		if _, err := b.GetRange(ctx, key, 0, nil); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("GetRange(%q) into no bytes: err = %v, want ErrNotFound", key, err)
		}
		if _, err := b.Stat(ctx, key); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat(%q): err = %v, want ErrNotFound", key, err)
		}
	}
	// None of that created anything.
	checkList(t, b, "", []blob.Info{{Key: "a/b", Size: 1}})
}

func testStat(t *testing.T, b blob.Bucket) {
	for key, size := range map[string]int{"s/1": 1, "s/1000": 1000, "s/123457": 123457} {
		put(t, b, key, pattern(size))
		if info := stat(t, b, key); info != (blob.Info{Key: key, Size: int64(size)}) {
			t.Errorf("Stat(%q) = %+v, want size %d", key, info, size)
		}
	}
}

func testList(t *testing.T, b blob.Bucket) {
	// Put out of order; List returns them by key, '/' sorting as a byte.
	keys := []string{
		"12/00000010/00000001",
		"12/00000003/00000042",
		"12/00000003/00000041",
		"12/00000004/00000001",
		"120/a",
		"1/a",
		"a/b/c",
		"a.b",
		"a0",
		"ab",
		"a/c",
	}
	for i, key := range keys {
		put(t, b, key, pattern(i))
	}
	all := slices.Clone(keys)
	slices.Sort(all)
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"1", []string{"1/a", "12/00000003/00000041", "12/00000003/00000042", "12/00000004/00000001", "12/00000010/00000001", "120/a"}},
		{"12", []string{"12/00000003/00000041", "12/00000003/00000042", "12/00000004/00000001", "12/00000010/00000001", "120/a"}},
		{"12/", []string{"12/00000003/00000041", "12/00000003/00000042", "12/00000004/00000001", "12/00000010/00000001"}},
		{"12/0000000", []string{"12/00000003/00000041", "12/00000003/00000042", "12/00000004/00000001"}},
		{"12/00000003", []string{"12/00000003/00000041", "12/00000003/00000042"}},
		{"12/00000003/", []string{"12/00000003/00000041", "12/00000003/00000042"}},
		{"12/00000003/0000004", []string{"12/00000003/00000041", "12/00000003/00000042"}},
		{"12/00000003/00000041", []string{"12/00000003/00000041"}},
		{"12/00000003/000000411", nil},
		{"12/00000005/", nil},
		{"12/00000005/0", nil},
		{"a", []string{"a.b", "a/b/c", "a/c", "a0", "ab"}},
		{"a/", []string{"a/b/c", "a/c"}},
		{"a/b", []string{"a/b/c"}},
		{"a/b/c/", nil},
		{"a/b/c/d/", nil},
		{"a.", []string{"a.b"}},
		{"b", nil},
		{"~", nil},
	} {
		infos, err := b.List(t.Context(), tc.prefix)
		if err != nil {
			t.Errorf("List(%q): %v", tc.prefix, err)
			continue
		}
		if got := keysOf(infos); !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
			continue
		}
		for _, info := range infos {
			if want := int64(slices.Index(keys, info.Key)); info.Size != want {
				t.Errorf("List(%q): %s has size %d, want %d", tc.prefix, info.Key, info.Size, want)
			}
		}
	}
}

// Listing finds nothing, without an error, in an empty bucket and after
// every object is deleted.
func testListEmpty(t *testing.T, b blob.Bucket) {
	checkList(t, b, "", nil)
	checkList(t, b, "a/", nil)
	put(t, b, "a/b/c", []byte("x"))
	put(t, b, "a/d", []byte("y"))
	checkList(t, b, "a/", []blob.Info{{Key: "a/b/c", Size: 1}, {Key: "a/d", Size: 1}})
	for _, key := range []string{"a/b/c", "a/d"} {
		if err := b.Delete(t.Context(), key); err != nil {
			t.Fatalf("Delete(%q): %v", key, err)
		}
	}
	checkList(t, b, "", nil)
	checkList(t, b, "a/", nil)
	checkList(t, b, "a/b/", nil)
}

// Delete removes an object, is idempotent, and frees its key for a new
// PutIfAbsent.
func testDelete(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	put(t, b, "d/1", []byte("one"))
	put(t, b, "d/2", []byte("two"))
	for range 2 {
		if err := b.Delete(ctx, "d/1"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := b.Get(ctx, "d/1"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	for _, key := range []string{"never", "d/never", "d/1/x", "d"} {
		if err := b.Delete(ctx, key); err != nil {
			t.Errorf("Delete(%q) of no object: %v", key, err)
		}
	}
	checkList(t, b, "", []blob.Info{{Key: "d/2", Size: 3}})
	if got := get(t, b, "d/2"); string(got) != "two" {
		t.Errorf("Get(d/2) after deleting others = %q", got)
	}
	put(t, b, "d/1", []byte("again"))
	if got := get(t, b, "d/1"); string(got) != "again" {
		t.Errorf("Get after Delete and PutIfAbsent = %q, want %q", got, "again")
	}
}

// The bucket keeps no reference to the caller's slices, nor the caller to
// the bucket's.
func testNotAliased(t *testing.T, b blob.Bucket) {
	data := []byte("abc")
	put(t, b, "x", data)
	data[0] = 'X'
	if got := get(t, b, "x"); string(got) != "abc" {
		t.Fatalf("after changing the slice put, Get = %q, want %q", got, "abc")
	}
	got := get(t, b, "x")
	got[0] = 'Y'
	if got := get(t, b, "x"); string(got) != "abc" {
		t.Fatalf("after changing a slice Get returned, Get = %q, want %q", got, "abc")
	}
	p := make([]byte, 3)
	if _, err := b.GetRange(t.Context(), "x", 0, p); err != nil {
		t.Fatalf("GetRange: %v", err)
	}
	p[0] = 'Z'
	if got := get(t, b, "x"); string(got) != "abc" {
		t.Fatalf("after changing GetRange's buffer, Get = %q, want %q", got, "abc")
	}
}

// Every operation refuses a key that is not valid, and List a prefix that
// no valid key can start with, with ErrInvalidKey.
func testInvalidKeys(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	put(t, b, "a/b", []byte("x"))
	for _, key := range []string{"", "/", "/a", "a/", "a/b/", "a//b", ".", "..", "./a", "a/./b", "a/..", "../a", "a/\x00", "a/\xff"} {
		if err := b.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("PutIfAbsent(%q): err = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Get(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Get(%q): err = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.GetRange(ctx, key, 0, make([]byte, 1)); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("GetRange(%q): err = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Stat(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Stat(%q): err = %v, want ErrInvalidKey", key, err)
		}
		if err := b.Delete(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Delete(%q): err = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, prefix := range []string{"/", "/a", "a//", "../", "a/../", "./a", "\xff", "a/\x00"} {
		if _, err := b.List(ctx, prefix); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("List(%q): err = %v, want ErrInvalidKey", prefix, err)
		}
	}
	checkList(t, b, "", []blob.Info{{Key: "a/b", Size: 1}})
}

// A canceled context fails every call and changes nothing.
func testCanceledContext(t *testing.T, b blob.Bucket) {
	put(t, b, "x", []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.PutIfAbsent(ctx, "y", []byte("y")); !errors.Is(err, context.Canceled) {
		t.Errorf("PutIfAbsent: err = %v, want context.Canceled", err)
	}
	if _, err := b.Get(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: err = %v, want context.Canceled", err)
	}
	if _, err := b.GetRange(ctx, "x", 0, make([]byte, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("GetRange: err = %v, want context.Canceled", err)
	}
	if _, err := b.Stat(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat: err = %v, want context.Canceled", err)
	}
	if _, err := b.List(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List: err = %v, want context.Canceled", err)
	}
	if err := b.Delete(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete: err = %v, want context.Canceled", err)
	}
	checkList(t, b, "", []blob.Info{{Key: "x", Size: 1}})
}

func put(t *testing.T, b blob.Bucket, key string, data []byte) {
	t.Helper()
	if err := b.PutIfAbsent(t.Context(), key, data); err != nil {
		t.Fatalf("PutIfAbsent(%q): %v", key, err)
	}
}

func get(t *testing.T, b blob.Bucket, key string) []byte {
	t.Helper()
	data, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return data
}

func stat(t *testing.T, b blob.Bucket, key string) blob.Info {
	t.Helper()
	info, err := b.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("Stat(%q): %v", key, err)
	}
	return info
}

func checkList(t *testing.T, b blob.Bucket, prefix string, want []blob.Info) {
	t.Helper()
	got, err := b.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %+v, want %+v", prefix, got, want)
	}
}

func keysOf(infos []blob.Info) []string {
	var keys []string
	for _, info := range infos {
		keys = append(keys, info.Key)
	}
	return keys
}

// pattern returns n bytes that differ at most offsets, so that a read from
// the wrong place shows.
func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return p
}
