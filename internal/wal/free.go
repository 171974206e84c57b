package wal

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// DefaultReuseSegments is how many files of deleted segments a log keeps to
// write over, unless Options.ReuseSegments says otherwise.
const DefaultReuseSegments = 2

// FreeDirName is the directory, inside a log's directory, of the files of
// deleted segments kept to be written over by new segments. They hold the
// deleted segments' bytes until they are.
const FreeDirName = "free"

// freeSuffix ends the name of a file in the free directory, which is the
// offset after the last entry of the segment it held (20 decimal digits):
// every batch in the file has offsets below it.
const freeSuffix = ".free"

// freeFile is a deleted segment's file kept to be written over.
type freeFile struct {
	path string
	next uint64 // every batch in the file has offsets below next
}

func (l *Log) freeDir() string { return l.opts.Dir + "/" + FreeDirName }

// maxFree is how many free files the log keeps.
func (l *Log) maxFree() int {
	switch n := l.opts.ReuseSegments; {
	case n < 0:
		return 0
	case n == 0:
		return DefaultReuseSegments
	default:
		return n
	}
}

func parseFreeName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, freeSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// recoverFree finds the files kept to be written over and removes those
// beyond maxFree. A crash cannot have left one of them under a segment's
// name as well (see dropSegment and segment.CreateOver).
func (l *Log) recoverFree() error {
	fs, dir := l.opts.FS, l.freeDir()
	names, err := fs.List(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wal: list %s: %w", dir, err)
	}
	l.freeMade = true
	for _, name := range names {
		next, ok := parseFreeName(name)
		if !ok {
			continue
		}
		path := dir + "/" + name
		if len(l.free) < l.maxFree() {
			l.free = append(l.free, freeFile{path: path, next: next})
			continue
		}
		// Not synced: a crash brings it back, and the next Open removes it.
		if err := fs.Remove(path); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("wal: remove %s: %w", path, err)
		}
	}
	return nil
}

// dropSegment deletes the file of a sealed segment that retention or a
// truncation removes from the log, durably: it moves it to the free
// directory, to be written over by a new segment, while fewer than
// maxFree are kept there, and removes it otherwise. The log directory is
// synced before the free one, so that no crash leaves the file under both
// names: a crash leaves it as the segment (the next retention drops it
// again), gone, or free. The caller holds commitMu.
func (l *Log) dropSegment(s segment.Info) error {
	fs := l.opts.FS
	to := l.freeDir() + "/" + fmt.Sprintf("%020d%s", s.Next, freeSuffix)
	if len(l.free) >= l.maxFree() || s.Next <= s.Base ||
		slices.ContainsFunc(l.free, func(f freeFile) bool { return f.path == to }) {
		return segment.Remove(fs, s.Path)
	}
	if !l.freeMade {
		if err := vfs.MkdirAllSync(fs, l.freeDir()); err != nil {
			return fmt.Errorf("wal: create %s: %w", l.freeDir(), err)
		}
		l.freeMade = true
	}
	if err := fs.Rename(s.Path, to); err != nil {
		return fmt.Errorf("wal: move %s to %s: %w", s.Path, to, err)
	}
	if err := fs.SyncDir(l.opts.Dir); err != nil {
		return fmt.Errorf("wal: move %s to %s: %w", s.Path, to, err)
	}
	if err := fs.SyncDir(l.freeDir()); err != nil {
		return fmt.Errorf("wal: move %s to %s: %w", s.Path, to, err)
	}
	l.free = append(l.free, freeFile{path: to, next: s.Next})
	return nil
}

// takeFree returns a file to create the segment of offsets from base over,
// no longer kept, or "" if none is kept whose batches are all below base.
// (Offsets only grow in a log, so all of them are, unless a crash lost
// entries that were acknowledged before they were synced, with SyncNever or
// SyncInterval, or the log's start was not recorded before the segments
// below it were dropped: then a new file is created.) The caller holds
// commitMu.
func (l *Log) takeFree(base uint64) string {
	for i := len(l.free) - 1; i >= 0; i-- {
		if f := l.free[i]; f.next <= base {
			l.free = slices.Delete(l.free, i, i+1)
			return f.path
		}
	}
	return ""
}
