package vfs

import (
	"io"
	"os"
)

// OS is the real filesystem. Its methods are safe for concurrent use and
// return the *os.PathError or *os.LinkError of the os package, so callers can
// test them with errors.Is(err, os.ErrNotExist) and the like. It creates
// files 0600 and directories 0700: a log holds a database's every write, for
// its owner only.
var OS FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenRW(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	// Write appends: start at the end, and Truncate moves the offset along.
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Reuse(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0) // at offset 0
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error              { return os.Remove(name) }
func (osFS) RemoveAll(name string) error           { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error  { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error             { return os.MkdirAll(dir, 0o700) }
func (osFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }
func (osFS) Lock(name string) (io.Closer, error)   { return lockFile(name) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile's write position is the file offset: only Write and Truncate move
// it, and ReadAt does not. OpenRW puts it at the end, Reuse at the start.
type osFile struct {
	f *os.File
}

func (f osFile) Write(p []byte) (int, error)             { return f.f.Write(p) }
func (f osFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }
func (f osFile) Close() error                            { return f.f.Close() }
func (f osFile) Sync() error                             { return Datasync(f.f) }
func (f osFile) Name() string                            { return f.f.Name() }

func (f osFile) Truncate(size int64) error {
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	_, err := f.f.Seek(size, io.SeekStart)
	return err
}

// Extend writes the zeros with pwrite, which leaves the file offset (the
// write position) where it is. They are written, not fallocated: a range
// fallocate reserves is marked unwritten, and the first write to it
// changes the file's metadata, which an fdatasync must then commit.
func (f osFile) Extend(size int64) error {
	at, err := f.Size()
	for err == nil && at < size {
		n := min(size-at, int64(len(zeros)))
		_, err = f.f.WriteAt(zeros[:n], at)
		at += n
	}
	return err
}

// zeros is what Extend writes; never written to.
var zeros = make([]byte, 256<<10)

func (f osFile) Size() (int64, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
