package vfs

import (
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// MemFS is an in-memory FS that remembers what is durable, so that a test can
// cut the power at any point (Crash) or stop the machine after a given number
// of operations (CrashAfter). It follows the crash model of the package
// comment, for directories as for files: a directory MkdirAll creates is lost
// at a crash, with everything in it, until its parent is synced, and one that
// Remove or RemoveAll removes comes back, with what was durable in it, until
// its parent is synced. Of the changes to a directory's entries since its last
// SyncDir, a crash keeps none (a real filesystem may keep some of them).
// Renaming a directory is not supported.
//
// Paths are cleaned with filepath.Clean; "/" and "." exist from the start, and
// a relative path is not the same file as any absolute one.
//
// Its methods, and those of its Files, are safe for concurrent use.
type MemFS struct {
	mu      sync.Mutex
	dirs    map[string]*memDir // by cleaned path
	locks   map[string]bool    // cleaned paths held by Lock
	ops     int                // mutating operations so far
	crashAt int                // ops at which the machine dies; -1 for never
}

// memDir is a directory. Its entries are in two namespaces: the current one,
// and the one a crash would leave, which SyncDir brings up to date. A
// directory removed from the current namespace lives on, unchanged, in its
// parent's durable one until the parent is synced.
type memDir struct {
	files       map[string]*memNode
	durable     map[string]*memNode
	subdirs     map[string]*memDir
	durableDirs map[string]*memDir
}

// memNode is a file's content. A byte at an index below a slice's length is
// never overwritten: data grows by append, a write over its bytes goes to a
// copy, and shrinking caps the slice so the next append copies. This lets
// durable share data's array.
type memNode struct {
	data    []byte
	durable []byte  // as of the last Sync
	pending []memOp // since the last Sync, in order
}

// memOp is an unsynced change to a file.
type memOp struct {
	truncate bool
	off      int64  // a write's file position, or a truncate's new size
	data     []byte // a write's bytes
}

var _ FS = (*MemFS)(nil)

// NewMem returns an empty MemFS.
func NewMem() *MemFS {
	fs := &MemFS{
		dirs:    make(map[string]*memDir),
		locks:   make(map[string]bool),
		crashAt: -1,
	}
	fs.dirs["."] = newMemDir()
	fs.dirs[string(filepath.Separator)] = newMemDir()
	return fs
}

func newMemDir() *memDir {
	return &memDir{
		files:       make(map[string]*memNode),
		durable:     make(map[string]*memNode),
		subdirs:     make(map[string]*memDir),
		durableDirs: make(map[string]*memDir),
	}
}

// parent returns the directory that holds name and name's last element.
func (fs *MemFS) parent(op, name string) (*memDir, string, error) {
	clean := filepath.Clean(name)
	d, ok := fs.dirs[filepath.Dir(clean)]
	if !ok {
		return nil, "", &os.PathError{Op: op, Path: name, Err: os.ErrNotExist}
	}
	return d, filepath.Base(clean), nil
}

// file returns the file at name, failing if it is missing or a directory.
func (fs *MemFS) file(op, name string) (*memNode, error) {
	if _, ok := fs.dirs[filepath.Clean(name)]; ok {
		return nil, &os.PathError{Op: op, Path: name, Err: syscall.EISDIR}
	}
	d, base, err := fs.parent(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := d.files[base]
	if !ok {
		return nil, &os.PathError{Op: op, Path: name, Err: os.ErrNotExist}
	}
	return n, nil
}

// dir returns the directory at name.
func (fs *MemFS) dir(op, name string) (*memDir, error) {
	if d, ok := fs.dirs[filepath.Clean(name)]; ok {
		return d, nil
	}
	if _, err := fs.file(op, name); err == nil {
		return nil, &os.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
	}
	return nil, &os.PathError{Op: op, Path: name, Err: os.ErrNotExist}
}

func (fs *MemFS) Create(name string) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter("create", name, true); err != nil {
		return nil, err
	}
	d, base, err := fs.parent("create", name)
	if err != nil {
		return nil, err
	}
	if d.files[base] != nil || d.subdirs[base] != nil {
		return nil, &os.PathError{Op: "create", Path: name, Err: os.ErrExist}
	}
	n := &memNode{}
	d.files[base] = n
	return &memFile{fs: fs, node: n, name: name}, nil
}

func (fs *MemFS) OpenRW(name string) (File, error) { return fs.open("open", name, false) }

func (fs *MemFS) Reuse(name string) (File, error) {
	f, err := fs.open("open", name, false)
	if err != nil {
		return nil, err
	}
	f.(*memFile).pos = 0
	return f, nil
}

func (fs *MemFS) Open(name string) (File, error) { return fs.open("open", name, true) }

func (fs *MemFS) open(op, name string, readOnly bool) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter(op, name, false); err != nil {
		return nil, err
	}
	n, err := fs.file(op, name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: fs, node: n, name: name, readOnly: readOnly, pos: -1}, nil
}

func (fs *MemFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter("remove", name, true); err != nil {
		return err
	}
	return fs.remove("remove", name, false)
}

func (fs *MemFS) RemoveAll(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter("removeall", name, true); err != nil {
		return err
	}
	err := fs.remove("removeall", name, true)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (fs *MemFS) remove(op, name string, all bool) error {
	clean := filepath.Clean(name)
	if clean == "." || clean == string(filepath.Separator) {
		return &os.PathError{Op: op, Path: name, Err: syscall.EINVAL}
	}
	pd, base, err := fs.parent(op, name)
	if err != nil {
		return err
	}
	if _, ok := pd.files[base]; ok {
		// Durable only after SyncDir: pd.durable keeps the file till then.
		delete(pd.files, base)
		return nil
	}
	d, ok := fs.dirs[clean]
	if !ok {
		return &os.PathError{Op: op, Path: name, Err: os.ErrNotExist}
	}
	if !all && (len(d.files) > 0 || len(d.subdirs) > 0) {
		return &os.PathError{Op: op, Path: name, Err: syscall.ENOTEMPTY}
	}
	prefix := clean + string(filepath.Separator)
	for p := range fs.dirs {
		if p == clean || strings.HasPrefix(p, prefix) {
			delete(fs.dirs, p)
		}
	}
	// Durable only after SyncDir: pd.durableDirs keeps d, as it is, till then.
	delete(pd.subdirs, base)
	return nil
}

func (fs *MemFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter("rename", oldname, true); err != nil {
		return err
	}
	fail := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if _, ok := fs.dirs[filepath.Clean(oldname)]; ok {
		return fail(errors.ErrUnsupported)
	}
	od, obase, err := fs.parent("rename", oldname)
	if err != nil || od.files[obase] == nil {
		return fail(os.ErrNotExist)
	}
	nd, nbase, err := fs.parent("rename", newname)
	if err != nil {
		return fail(os.ErrNotExist)
	}
	if nd.subdirs[nbase] != nil {
		return fail(syscall.EISDIR)
	}
	n := od.files[obase]
	delete(od.files, obase)
	nd.files[nbase] = n
	return nil
}

// MkdirAll does not count towards the crash point: a crash just after it
// leaves what one just before it would, as the new directories are durable
// only once their parents are synced.
func (fs *MemFS) MkdirAll(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter("mkdir", dir, false); err != nil {
		return err
	}
	var missing []string
	p := filepath.Clean(dir)
	for fs.dirs[p] == nil {
		pd, base, err := fs.parent("mkdir", p)
		if err == nil && pd.files[base] != nil {
			return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		missing = append(missing, p)
		p = filepath.Dir(p)
	}
	for _, p := range slices.Backward(missing) {
		d := newMemDir()
		fs.dirs[p] = d
		fs.dirs[filepath.Dir(p)].subdirs[filepath.Base(p)] = d
	}
	return nil
}

func (fs *MemFS) List(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter("list", dir, false); err != nil {
		return nil, err
	}
	d, err := fs.dir("list", dir)
	if err != nil {
		return nil, err
	}
	names := slices.AppendSeq(slices.Collect(maps.Keys(d.files)), maps.Keys(d.subdirs))
	slices.Sort(names)
	return names, nil
}

func (fs *MemFS) Stat(name string) (os.FileInfo, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter("stat", name, false); err != nil {
		return nil, err
	}
	base := filepath.Base(filepath.Clean(name))
	if _, ok := fs.dirs[filepath.Clean(name)]; ok {
		return memFileInfo{name: base, dir: true}, nil
	}
	n, err := fs.file("stat", name)
	if err != nil {
		return nil, err
	}
	return memFileInfo{name: base, size: int64(len(n.data))}, nil
}

func (fs *MemFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter("syncdir", dir, true); err != nil {
		return err
	}
	d, err := fs.dir("syncdir", dir)
	if err != nil {
		return err
	}
	d.durable = maps.Clone(d.files)
	d.durableDirs = maps.Clone(d.subdirs)
	return nil
}

// Lock holds the lock within this MemFS only. Creating the file follows the
// crash model, but neither Lock nor releasing counts towards the crash point.
func (fs *MemFS) Lock(name string) (io.Closer, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.enter("lock", name, false); err != nil {
		return nil, err
	}
	if _, err := fs.file("lock", name); errors.Is(err, os.ErrNotExist) {
		d, base, perr := fs.parent("lock", name)
		if perr != nil {
			return nil, perr
		}
		d.files[base] = &memNode{}
	} else if err != nil {
		return nil, err
	}
	clean := filepath.Clean(name)
	if fs.locks[clean] {
		return nil, &os.PathError{Op: "lock", Path: name, Err: ErrLocked}
	}
	fs.locks[clean] = true
	return &memLock{fs: fs, path: clean}, nil
}

type memLock struct {
	fs     *MemFS
	path   string
	closed bool // guarded by fs.mu
}

func (l *memLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if l.closed {
		return &os.PathError{Op: "unlock", Path: l.path, Err: os.ErrClosed}
	}
	l.closed = true
	delete(l.fs.locks, l.path)
	return l.fs.enter("unlock", l.path, false)
}
