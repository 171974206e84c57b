package blob

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// tempPrefix starts the name of a file that PutIfAbsent is still writing.
// List skips such files, and keys may not have a segment that starts with
// it.
const tempPrefix = ".tmp-"

// Dir is a Bucket in a local directory: the object at key "a/b/c" is the
// file a/b/c under it, and its parent directories are made as needed.
//
// PutIfAbsent writes the object to a temporary file in the target
// directory, fsyncs it, links it to its name (the link fails if the name is
// taken, which makes create-if-absent atomic), and fsyncs the directory; a
// directory it makes is made durable in its parent before the object is
// linked into it. A crash may leave a temporary file behind, which List
// ignores.
//
// Since a key's segments are directories, a Dir cannot hold both a key and
// a key under it, such as "a" and "a/b": the second put fails, with an
// error that is not ErrExist.
type Dir struct {
	root string

	// dirs is held for reading by a PutIfAbsent from making its object's
	// directories until its temporary file is in them, and for writing by
	// a Delete that removes empty directories, so that no directory is
	// removed under a PutIfAbsent.
	dirs sync.RWMutex

	// synced holds the directories, relative to root in slash form, whose
	// entries in their parents have been fsynced since they were made.
	// A PutIfAbsent syncs each parent of its object that is not here
	// before it returns, which covers a directory that another PutIfAbsent
	// has made but not yet synced. Delete forgets a directory as it
	// removes it.
	mu     sync.Mutex
	synced map[string]bool
}

// OpenDir opens the directory at path as a bucket, making it and its
// parents durably if they do not exist.
func OpenDir(path string) (*Dir, error) {
	root, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("blob: open dir %s: %w", path, err)
	}
	if err := makeDirs(root); err != nil {
		return nil, fmt.Errorf("blob: open dir %s: %w", path, err)
	}
	return &Dir{root: root, synced: map[string]bool{}}, nil
}

// makeDirs makes dir and its missing parents, and fsyncs the parent of each
// one it made.
func makeDirs(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(d) == d {
			return err
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := syncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Path returns the directory's absolute path.
func (d *Dir) Path() string { return d.root }

// PutIfAbsent is durable when it returns nil: the object's data and every
// directory entry that leads to it have been fsynced.
func (d *Dir) PutIfAbsent(ctx context.Context, key string, data ...[]byte) error {
	if err := d.check(ctx, key); err != nil {
		return err
	}
	name := d.file(key)
	dir := filepath.Dir(name)
	f, err := d.createTemp(key)
	if err != nil {
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once it is removed below
	for _, part := range data {
		if _, err = f.Write(part); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := os.Link(tmp, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Lstat(name); serr == nil && fi.IsDir() {
				return fmt.Errorf("blob: put %s: %s is a directory of other keys, and a Dir cannot hold both", key, name)
			}
			return fmt.Errorf("%w: %s", ErrExist, key)
		}
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("blob: put %s: the object is stored, but syncing its directory failed: %w", key, err)
	}
	return nil
}

// createTemp makes the directories of key durably and creates a temporary
// file in the last one.
func (d *Dir) createTemp(key string) (*os.File, error) {
	d.dirs.RLock()
	defer d.dirs.RUnlock()
	rel := path.Dir(key)
	parent := d.root
	for i := 0; rel != "." && i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		dir := filepath.Join(d.root, filepath.FromSlash(rel[:i]))
		made, err := makeDir(dir)
		if err != nil {
			return nil, err
		}
		if made || !d.isSynced(rel[:i]) {
			if err := syncDir(parent); err != nil {
				return nil, err
			}
			d.setSynced(rel[:i], true)
		}
		parent = dir
	}
	return os.CreateTemp(parent, tempPrefix+"*")
}

// makeDir makes dir unless it exists, and reports whether it made it.
func makeDir(dir string) (made bool, err error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		err = os.Mkdir(dir, 0o700)
		if err == nil {
			return true, nil
		}
		if errors.Is(err, fs.ErrExist) { // made by a concurrent PutIfAbsent
			fi, err = os.Stat(dir)
		}
	}
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s is an object, not a directory of other keys, and a Dir cannot hold both", dir)
	}
	return false, nil
}

func (d *Dir) isSynced(rel string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.synced[rel]
}

func (d *Dir) setSynced(rel string, synced bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if synced {
		d.synced[rel] = true
	} else {
		delete(d.synced, rel)
	}
}

// Get reads the object's file; the caller owns the result.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	if err := d.check(ctx, key); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(d.file(key))
	if err != nil {
		return nil, d.readErr("get", key, err)
	}
	return data, nil
}

func (d *Dir) GetRange(ctx context.Context, key string, off int64, p []byte) (int, error) {
	if err := d.check(ctx, key); err != nil {
		return 0, err
	}
	f, err := os.Open(d.file(key))
	if err != nil {
		return 0, d.readErr("get range of", key, err)
	}
	defer f.Close()
	if len(p) == 0 {
		// ReadAt reads nothing, so it cannot tell a directory of other
		// keys from an object.
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return 0, d.readErr("get range of", key, cmp.Or(err, error(syscall.EISDIR)))
		}
	}
	n, err := f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return n, d.readErr("get range of", key, err)
	}
	return n, err
}

func (d *Dir) Stat(ctx context.Context, key string) (Info, error) {
	if err := d.check(ctx, key); err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(d.file(key))
	if err != nil {
		return Info{}, d.readErr("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return Info{Key: key, Size: fi.Size()}, nil
}

// readErr maps the error of reading key's file: a missing file, a file
// where a parent directory should be, and a directory of other keys all
// mean there is no object.
func (d *Dir) readErr(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return fmt.Errorf("blob: %s %s: %w", op, key, err)
}

// List walks the directory that holds prefix's last segment, so its cost
// grows with the objects under that directory, not with the whole bucket.
func (d *Dir) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	for seg := range strings.SplitSeq(prefix, "/") {
		if strings.HasPrefix(seg, tempPrefix) {
			return nil, nil // no key has such a segment
		}
	}
	start := d.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(d.root, filepath.FromSlash(prefix[:i]))
	}
	var infos []Info
	err := filepath.WalkDir(start, func(name string, e fs.DirEntry, err error) error {
		if err != nil {
			// A directory that a concurrent Delete removed, or a
			// prefix's directory that is a file or does not exist,
			// holds nothing to list.
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err
		}
		if name == start {
			return nil
		}
		rel, err := filepath.Rel(d.root, name)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if e.IsDir() {
			// Descend only where keys can start with the prefix.
			if !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), tempPrefix) || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since the directory was read
		}
		if err != nil {
			return err
		}
		infos = append(infos, Info{Key: key, Size: fi.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blob: list %q: %w", prefix, err)
	}
	sortInfos(infos)
	return infos, nil
}

// Delete removes the object's file, and then its parent directories as long
// as they are empty.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := d.check(ctx, key); err != nil {
		return err
	}
	name := d.file(key)
	fi, err := os.Lstat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return fmt.Errorf("blob: delete %s: %w", key, err)
	}
	if fi.IsDir() {
		return nil // a directory of other keys, not an object
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blob: delete %s: %w", key, err)
	}
	d.dirs.Lock()
	defer d.dirs.Unlock()
	for rel := path.Dir(key); rel != "."; rel = path.Dir(rel) {
		if os.Remove(filepath.Join(d.root, filepath.FromSlash(rel))) != nil {
			break // not empty, most likely
		}
		d.setSynced(rel, false)
	}
	return nil
}

// Close does nothing: a Dir holds no resources between calls.
func (d *Dir) Close() error { return nil }

func (d *Dir) file(key string) string {
	return filepath.Join(d.root, filepath.FromSlash(key))
}

// check adds the Dir's own rule to those of every bucket: no segment may
// look like a temporary file.
func (d *Dir) check(ctx context.Context, key string) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(seg, tempPrefix) {
			return fmt.Errorf("%w %q: a segment starts with %q, which a Dir keeps for temporary files", ErrInvalidKey, key, tempPrefix)
		}
	}
	return nil
}
