package vfs

import (
	"bytes"
	"syscall"
	"testing"
)

// noSpace is a file whose writes of zeros fail as on a full disk.
type noSpace struct {
	File
	tried *int
}

func (f noSpace) Extend(int64) error {
	*f.tried++
	return syscall.ENOSPC
}

// aheadRun appends n writes of size bytes to a new file, syncing every so
// many, as a log's rounds do, and returns the file's contents, the data's
// end and the Ahead. wrap, if set, wraps the file.
func aheadRun(t *testing.T, wrap func(File) File, n, size, every int, ahead, round int64) ([]byte, int64, *Ahead) {
	t.Helper()
	fs := NewMem()
	f, err := fs.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if wrap != nil {
		f = wrap(f)
	}
	a := new(Ahead)
	a.Start(f, 0, ahead, round)
	data := bytes.Repeat([]byte{7}, size)
	end := int64(0)
	for i := range n {
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		end += int64(size)
		a.Wrote(f, end)
		if (i+1)%every == 0 {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			a.Synced()
		}
	}
	if zero, err := AllZero(f, end, max(end, size64(t, f))); err != nil || !zero {
		t.Fatalf("the bytes after the data are not all zeros (%v)", err)
	}
	b, err := ReadFile(fs, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:end], bytes.Repeat([]byte{7}, int(end))) {
		t.Fatal("the data does not read back whole: a write landed after the zeros")
	}
	return b, end, a
}

func size64(t *testing.T, f File) int64 {
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Small rounds get zeros ahead of the data, and the writes go on at the
// data's end (Extend does not move the write position); large rounds get
// none.
func TestAhead(t *testing.T) {
	b, end, a := aheadRun(t, nil, 200, 100, 1, 4096, 1024)
	if int64(len(b)) <= end || !a.Tail() {
		t.Fatalf("rounds of 100 bytes: the file has %d bytes for data ending at %d (tail %v), want zeros after it", len(b), end, a.Tail())
	}
	b, end, a = aheadRun(t, nil, 200, 100, 20, 4096, 1024)
	if int64(len(b)) != end || a.Tail() {
		t.Fatalf("rounds of 2,000 bytes, above 1,024: the file has %d bytes for data ending at %d (tail %v), want no zeros", len(b), end, a.Tail())
	}
}

// A write of zeros that fails (a full disk) fails nothing: the writes go
// on, and no more zeros are tried.
func TestAheadFullDisk(t *testing.T) {
	tried := 0
	b, end, a := aheadRun(t, func(f File) File { return noSpace{f, &tried} }, 200, 100, 1, 4096, 1024)
	if tried != 1 || !a.Tail() || int64(len(b)) != end {
		t.Fatalf("after a failed write of zeros: %d tried (tail %v), %d bytes for data ending at %d; want 1 tried and the data whole", tried, a.Tail(), len(b), end)
	}
}
