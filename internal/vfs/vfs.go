// Package vfs is the filesystem seam under Tern's storage: the segment and
// metadata code touch disk only through FS, so tests can swap in a memory
// filesystem that simulates crashes (MemFS) or a wrapper that injects I/O
// errors (WithErrors).
//
// # Crash model
//
// Tern's durability rests on these assumptions about the real filesystem, and
// MemFS simulates exactly them:
//   - data written to a file is durable once File.Sync has returned;
//   - the creation, removal or rename of a file or a directory is durable
//     once SyncDir of its parent directory has returned: until then a crash
//     may undo it, and a directory lost so takes everything in it along;
//   - writes that were not synced may be lost at a crash, but what survives of
//     them is a prefix in write order: a random number of the unsynced writes
//     survive whole, the next one may be torn at a sector boundary (its first
//     sectors survive), and the sector after the tear may hold garbage;
//   - a Truncate that was not synced may or may not survive.
//
// A File is safe for concurrent ReadAt calls with one goroutine writing, and
// for one goroutine calling Sync while another writes (Sync then makes
// durable at least what was written before it was called: the local
// engine's pipelined group commit relies on it); the other methods need the
// caller's serialisation.
package vfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// SectorBytes is the granularity at which MemFS tears an unsynced write.
const SectorBytes = 512

// ErrLocked is wrapped by the error FS.Lock returns when the lock is held,
// whether by another process or by an earlier Lock in this one.
var ErrLocked = errors.New("vfs: file is locked by another process")

// FS is the set of filesystem operations Tern's storage uses.
type FS interface {
	// Create makes a new file for reading and writing. It fails if the file
	// exists (os.ErrExist). The file's name is durable only after SyncDir.
	Create(name string) (File, error)
	// OpenRW opens an existing file for reading and writing.
	OpenRW(name string) (File, error)
	// Reuse opens an existing file for reading and for writing over from
	// its start: each Write overwrites the bytes at the write position and
	// moves it along, extending the file only past its end, so the old
	// bytes after the last write stay until a Truncate. Writing over blocks
	// a file already has spares the filesystem the allocation of new ones.
	Reuse(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// RemoveAll deletes a directory and everything under it.
	RemoveAll(name string) error
	// Rename moves a file, replacing any file at newname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents. The new directories are
	// durable only after SyncDir of their parents; MkdirAllSync does both.
	MkdirAll(dir string) error
	// List returns the names (not paths) of the entries in dir, sorted.
	List(dir string) ([]string, error)
	// Stat reports a file's size and kind.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the creations, removals and renames in dir durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on the named file, creating it
	// if needed, and fails at once with ErrLocked if another process (or
	// another Lock call) holds it. Closing the returned Closer releases the
	// lock.
	Lock(name string) (io.Closer, error)
}

// File is an open file.
type File interface {
	io.Writer // at the write position: the file's end, unless opened by Reuse
	io.ReaderAt
	io.Closer
	// Sync makes the data written so far durable (fdatasync on Linux).
	Sync() error
	// Truncate changes the file's size and moves the write position to the
	// new end. The new size is durable after Sync.
	Truncate(size int64) error
	// Size returns the current size of the file, including unsynced writes.
	Size() (int64, error)
	// Extend writes zeros from the file's end up to size (nothing if the
	// file is that long already) without moving the write position, so
	// that later writes land on blocks the file has. The zeros are durable
	// after Sync.
	Extend(size int64) error
	// Name returns the path the file was opened with.
	Name() string
}

// WriteBuffers writes bufs to f in order, at its write position, as one
// Write of their concatenation would, without joining them: a file of the
// OS takes them with writev, others one Write each. On an error the bytes
// written so far are counted in n.
func WriteBuffers(f File, bufs [][]byte) (n int64, err error) {
	if bw, ok := f.(interface {
		writeBuffers([][]byte) (int64, error)
	}); ok {
		return bw.writeBuffers(bufs)
	}
	return writeEach(f, bufs)
}

func writeEach(f File, bufs [][]byte) (int64, error) {
	var n int64
	for _, b := range bufs {
		k, err := f.Write(b)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// WriteFile replaces the named file with a new one holding data, durably:
// the file is synced, and then its directory. A crash may leave the file
// partly written; ReplaceFile does not.
func WriteFile(fs FS, name string, data []byte) error {
	if err := writeSynced(fs, name, data); err != nil {
		return err
	}
	return fs.SyncDir(filepath.Dir(name))
}

// MkdirAllSync creates dir and any missing parents, as FS.MkdirAll does, and
// makes them durable: it syncs the parent of each directory it creates, top
// down, so that a crash after it returns leaves dir in place. When dir exists
// already it still syncs dir's parent, once: a process that crashed between
// creating dir and syncing its parent left a directory that a power loss
// could still take away. The levels above dir are trusted once they exist.
func MkdirAllSync(fs FS, dir string) error {
	dir = filepath.Clean(dir)
	var missing []string // dir first, then its missing parents
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := fs.Stat(p); err == nil {
			break
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := fs.MkdirAll(dir); err != nil {
		return err
	}
	if len(missing) == 0 {
		return fs.SyncDir(filepath.Dir(dir))
	}
	for _, p := range slices.Backward(missing) {
		if err := fs.SyncDir(filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

// TempSuffix ends the name of the temporary file ReplaceFile writes first.
const TempSuffix = ".tmp"

// ReplaceFile replaces the named file with one holding data, atomically and
// durably: data is written to name+TempSuffix and synced, which is renamed
// over name, and the directory synced. A crash leaves the old file or the
// new one, and perhaps the temporary file, which the next call replaces.
func ReplaceFile(fs FS, name string, data []byte) error {
	tmp := name + TempSuffix
	if err := writeSynced(fs, tmp, data); err != nil {
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		return err
	}
	return fs.SyncDir(filepath.Dir(name))
}

// writeSynced creates the named file anew with data, and syncs it.
func writeSynced(fs FS, name string, data []byte) error {
	if err := fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// ReadFile returns the whole content of the named file, as os.ReadFile
// does, through fs.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, err
	}
	return b, nil
}
