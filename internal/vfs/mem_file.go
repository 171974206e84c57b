package vfs

import (
	"io"
	"os"
	"slices"
	"syscall"
	"time"
)

type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	readOnly bool
	pos      int64 // the write position, or -1 for the end; guarded by fs.mu
	closed   bool  // guarded by fs.mu
}

// usable reports, with fs.mu held, whether the file can serve op.
func (f *memFile) usable(op string, writing bool) error {
	switch {
	case f.closed:
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	case writing && f.readOnly:
		return &os.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.enter("write", f.name, true); err != nil {
		return 0, err
	}
	if err := f.usable("write", true); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := f.node
	off := int64(len(n.data))
	if f.pos >= 0 {
		off = f.pos
		f.pos += int64(len(p))
	}
	n.pending = append(n.pending, memOp{off: off, data: slices.Clone(p)})
	if off < int64(len(n.data)) {
		// Over bytes that durable may share: on a copy.
		n.data = slices.Clone(n.data)
	}
	n.data = writeAt(n.data, off, p)
	return len(p), nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.enter("read", f.name, false); err != nil {
		return 0, err
	}
	if err := f.usable("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: syscall.EINVAL}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.enter("sync", f.name, true); err != nil {
		return err
	}
	if err := f.usable("sync", false); err != nil {
		return err
	}
	f.node.durable = f.node.data
	f.node.pending = nil
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.enter("truncate", f.name, true); err != nil {
		return err
	}
	if err := f.usable("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	n := f.node
	n.pending = append(n.pending, memOp{truncate: true, off: size})
	n.data = resize(n.data, size)
	if f.pos >= 0 {
		f.pos = size
	}
	return nil
}

func (f *memFile) Extend(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.enter("extend", f.name, true); err != nil {
		return err
	}
	if err := f.usable("extend", true); err != nil {
		return err
	}
	n := f.node
	at := int64(len(n.data))
	if size <= at {
		return nil
	}
	if f.pos < 0 {
		f.pos = at // writes go on at the old end, not after the zeros
	}
	zeros := make([]byte, size-at) // the pending op's; writeAt copies it
	n.pending = append(n.pending, memOp{off: at, data: zeros})
	n.data = writeAt(n.data, at, zeros)
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.enter("stat", f.name, false); err != nil {
		return 0, err
	}
	if err := f.usable("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	return f.fs.enter("close", f.name, false)
}

type memFileInfo struct {
	name string
	size int64
	dir  bool
}

func (fi memFileInfo) Name() string       { return fi.name }
func (fi memFileInfo) Size() int64        { return fi.size }
func (fi memFileInfo) IsDir() bool        { return fi.dir }
func (fi memFileInfo) ModTime() time.Time { return time.Time{} }
func (fi memFileInfo) Sys() any           { return nil }

func (fi memFileInfo) Mode() os.FileMode {
	if fi.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
