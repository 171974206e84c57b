package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// Op is a kind of filesystem operation, as seen by the inject function of
// WithErrors.
type Op int

const (
	OpCreate   Op = iota // FS.Create
	OpOpen               // FS.Open, FS.OpenRW and FS.Reuse
	OpWrite              // File.Write
	OpSync               // File.Sync
	OpTruncate           // File.Truncate
	OpRemove             // FS.Remove and FS.RemoveAll
	OpRename             // FS.Rename, with the old name
	OpSyncDir            // FS.SyncDir
	OpRead               // File.ReadAt, File.Size, FS.Stat and FS.List
	OpMkdir              // FS.MkdirAll
	OpLock               // FS.Lock
)

var opNames = [...]string{
	OpCreate:   "create",
	OpOpen:     "open",
	OpWrite:    "write",
	OpSync:     "sync",
	OpTruncate: "truncate",
	OpRemove:   "remove",
	OpRename:   "rename",
	OpSyncDir:  "syncdir",
	OpRead:     "read",
	OpMkdir:    "mkdir",
	OpLock:     "lock",
}

func (op Op) String() string {
	if op >= 0 && int(op) < len(opNames) {
		return opNames[op]
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

// WithErrors returns fs with inject called before every operation, and before
// every operation on the Files it opens (File.Close excepted), with the path
// the operation is on. If inject returns an error, the operation is not done
// and the error is returned wrapped in an *os.PathError (an *os.LinkError for
// Rename), so errors.Is sees through to it.
//
// inject may be called concurrently: by concurrent callers of fs, and because
// a File's ReadAt may run alongside its Write.
func WithErrors(fs FS, inject func(op Op, name string) error) FS {
	return &errorFS{fs: fs, inject: inject}
}

// FailAfter returns an inject function for WithErrors that lets the first n
// operations of kind op through and fails every later one with err. Other
// kinds of operation always pass. It is safe for concurrent use.
func FailAfter(n int, op Op, err error) func(Op, string) error {
	var seen atomic.Int64
	return func(o Op, _ string) error {
		if o != op || seen.Add(1) <= int64(n) {
			return nil
		}
		return err
	}
}

type errorFS struct {
	fs     FS
	inject func(Op, string) error
}

func (e *errorFS) check(op Op, name string) error {
	if err := e.inject(op, name); err != nil {
		return &os.PathError{Op: op.String(), Path: name, Err: err}
	}
	return nil
}

func (e *errorFS) Create(name string) (File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	return e.wrap(e.fs.Create(name))
}

func (e *errorFS) OpenRW(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	return e.wrap(e.fs.OpenRW(name))
}

func (e *errorFS) Reuse(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	return e.wrap(e.fs.Reuse(name))
}

func (e *errorFS) Open(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	return e.wrap(e.fs.Open(name))
}

func (e *errorFS) wrap(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, fs: e}, nil
}

func (e *errorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *errorFS) RemoveAll(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.fs.RemoveAll(name)
}

func (e *errorFS) Rename(oldname, newname string) error {
	if err := e.inject(OpRename, oldname); err != nil {
		return &os.LinkError{Op: OpRename.String(), Old: oldname, New: newname, Err: err}
	}
	return e.fs.Rename(oldname, newname)
}

func (e *errorFS) MkdirAll(dir string) error {
	if err := e.check(OpMkdir, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir)
}

func (e *errorFS) List(dir string) ([]string, error) {
	if err := e.check(OpRead, dir); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

func (e *errorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.check(OpRead, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

func (e *errorFS) SyncDir(dir string) error {
	if err := e.check(OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

func (e *errorFS) Lock(name string) (io.Closer, error) {
	if err := e.check(OpLock, name); err != nil {
		return nil, err
	}
	return e.fs.Lock(name)
}

type errorFile struct {
	f  File
	fs *errorFS
}

func (f *errorFile) Name() string { return f.f.Name() }
func (f *errorFile) Close() error { return f.f.Close() }

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.f.Write(p)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.fs.check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *errorFile) Extend(size int64) error {
	if err := f.fs.check(OpWrite, f.Name()); err != nil {
		return err
	}
	return f.f.Extend(size)
}

func (f *errorFile) Size() (int64, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.f.Size()
}

// space passes through to the wrapped filesystem, uninjected: a full disk is
// injected as the ENOSPC of the writes.
func (e *errorFS) space(dir string) (Space, error) {
	s, ok, err := SpaceOf(e.fs, dir)
	if err == nil && !ok {
		err = errors.ErrUnsupported
	}
	return s, err
}
