package segment_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// trailerBytes is the size of a footer's fixed trailer (see doc.go).
const trailerBytes = 48

const testEpoch = 7

var testCreated = time.Unix(1700000000, 123456789)

// batch is a batch as a test writes it, with what the test expects back.
type batch struct {
	data    []byte
	h       record.Header
	maxTime int64
	entries []record.Entry
}

// makeBatches returns n batches with dense offsets from base, each holding
// one to four entries with payloads of up to maxPayload bytes.
func makeBatches(rng *rand.Rand, base uint64, n, maxPayload int) []batch {
	bs := make([]batch, 0, n)
	off := base
	for range n {
		entries := make([]record.Entry, 1+rng.IntN(4))
		t0 := rng.Int64N(1 << 60)
		var maxTime int64
		for j := range entries {
			e := record.Entry{Time: t0 + rng.Int64N(1<<20), Payload: make([]byte, rng.IntN(maxPayload+1))}
			for k := range e.Payload {
				e.Payload[k] = byte(rng.Uint32())
			}
			if rng.IntN(3) == 0 {
				e.Properties = map[string][]byte{"k": {byte(j)}, "trace": []byte("abc")}
			}
			entries[j] = e
			maxTime = max(maxTime, e.Time)
		}
		data := record.Encode(off, testEpoch, entries)
		h, err := record.ParseHeader(data)
		if err != nil {
			panic(fmt.Sprintf("batch just encoded does not parse: %v", err))
		}
		bs = append(bs, batch{data: data, h: h, maxTime: maxTime, entries: entries})
		off = h.NextOffset()
	}
	return bs
}

// positions returns the file position of each batch and the position where
// the batches end.
func positions(bs []batch) ([]int64, int64) {
	pos := make([]int64, len(bs))
	at := int64(segment.HeaderBytes)
	for i, b := range bs {
		pos[i] = at
		at += int64(len(b.data))
	}
	return pos, at
}

// expectedInfo is the Info of an open segment holding bs, derived from the
// format's description rather than from the writer.
func expectedInfo(path string, base uint64, bs []batch) segment.Info {
	info := segment.Info{Path: path, Base: base, Next: base, Epoch: testEpoch, Created: testCreated}
	pos, end := positions(bs)
	indexed := int64(-1)
	for i, b := range bs {
		if indexed < 0 || pos[i]-indexed >= segment.IndexIntervalBytes {
			info.Index = append(info.Index, segment.IndexEntry{Offset: b.h.BaseOffset, Pos: pos[i]})
			indexed = pos[i]
		}
		info.Next = b.h.NextOffset()
		info.MaxTime = max(info.MaxTime, b.maxTime)
	}
	info.End, info.Size = end, end
	return info
}

// sealedInfo is expectedInfo of a sealed segment.
func sealedInfo(path string, base uint64, bs []batch) segment.Info {
	info := expectedInfo(path, base, bs)
	info.Sealed = true
	info.Size += int64(len(info.Index))*16 + trailerBytes
	return info
}

// checkInfo fails the test if got and want differ. Created is compared as an
// instant and an empty Index equals a nil one.
func checkInfo(t testing.TB, what string, got, want segment.Info) {
	t.Helper()
	norm := func(i segment.Info) segment.Info {
		i.Created = time.Unix(0, i.Created.UnixNano())
		if len(i.Index) == 0 {
			i.Index = nil
		}
		return i
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

// testFS is a filesystem to run a test on, with a directory to use in it.
type testFS struct {
	name string
	fs   vfs.FS
	dir  string
}

func filesystems(t *testing.T) []testFS {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/seg"); err != nil {
		t.Fatal(err)
	}
	return []testFS{
		{name: "mem", fs: mem, dir: "/seg"},
		{name: "os", fs: vfs.OS, dir: t.TempDir()},
	}
}

func create(t testing.TB, fs vfs.FS, dir string, base uint64) *segment.Writer {
	t.Helper()
	w, err := segment.Create(fs, dir, base, testEpoch, testCreated)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return w
}

func appendAll(t testing.TB, w *segment.Writer, bs []batch) {
	t.Helper()
	for _, b := range bs {
		if err := w.Append(b.data, b.h, b.maxTime); err != nil {
			t.Fatalf("Append of offset %d: %v", b.h.BaseOffset, err)
		}
	}
}

// writeOpen writes an open segment holding bs and returns its path.
func writeOpen(t testing.TB, fs vfs.FS, dir string, base uint64, bs []batch) string {
	t.Helper()
	w := create(t, fs, dir, base)
	appendAll(t, w, bs)
	if err := w.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return w.Info().Path
}

// writeSealed writes a sealed segment holding bs and returns its Info.
func writeSealed(t testing.TB, fs vfs.FS, dir string, base uint64, bs []batch) segment.Info {
	t.Helper()
	w := create(t, fs, dir, base)
	appendAll(t, w, bs)
	info, err := w.Seal()
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return info
}

func readFile(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile replaces the file at path with data, durably.
func writeFile(t testing.TB, fs vfs.FS, path string, data []byte) {
	t.Helper()
	if err := vfs.WriteFile(fs, path, data); err != nil {
		t.Fatal(err)
	}
}

// memFile returns a MemFS holding data at /FileName(base), and the path.
func memFile(t testing.TB, base uint64, data []byte) (*vfs.MemFS, string) {
	t.Helper()
	fs := vfs.NewMem()
	path := "/" + segment.FileName(base)
	writeFile(t, fs, path, data)
	return fs, path
}

// scanAll reads every batch from pos to limit and fails the test on any error
// but io.EOF.
func scanAll(t testing.TB, fs vfs.FS, path string, pos, limit int64) []record.Batch {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := segment.NewScanner(f, pos, limit)
	var out []record.Batch
	for {
		b, at, err := s.Next()
		if err == io.EOF {
			if at != limit {
				t.Fatalf("scanner stopped at %d, limit %d", at, limit)
			}
			return out
		}
		if err != nil {
			t.Fatalf("scan of %s at byte %d: %v", path, at, err)
		}
		out = append(out, b)
	}
}

// checkBatches fails the test unless got holds exactly the entries of want.
func checkBatches(t testing.TB, got []record.Batch, want []batch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d batches, want %d", len(got), len(want))
	}
	for i, b := range got {
		if b.Header != want[i].h {
			t.Fatalf("batch %d: header %+v, want %+v", i, b.Header, want[i].h)
		}
		var k int
		err := b.Each(func(off uint64, e record.Entry) error {
			w := want[i].entries[k]
			if off != want[i].h.BaseOffset+uint64(k) || e.Time != w.Time || !bytes.Equal(e.Payload, w.Payload) ||
				len(e.Properties) != len(w.Properties) {
				return fmt.Errorf("entry %d (offset %d) differs", k, off)
			}
			for key, v := range w.Properties {
				if !bytes.Equal(e.Properties[key], v) {
					return fmt.Errorf("entry %d: property %q differs", k, key)
				}
			}
			k++
			return nil
		})
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
}

// segmentBytes returns the content of a segment file holding bs, written by
// the package, sealed or not.
func segmentBytes(t testing.TB, base uint64, bs []batch, seal bool) []byte {
	t.Helper()
	fs := vfs.NewMem()
	if seal {
		return readFile(t, fs, writeSealed(t, fs, "/", base, bs).Path)
	}
	return readFile(t, fs, writeOpen(t, fs, "/", base, bs))
}
