package replica

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/ternwal/tern/client/rpcerr"
)

// Drop removes seg's files and memory. Dropping an unknown segment is no
// error. It waits for the adds queued for seg to finish.
func (s *Store) Drop(id SegmentID) error {
	s.mu.Lock()
	seg, closed := s.segs[id], s.closed
	s.mu.Unlock()
	if closed {
		return rpcerr.ErrReplicaClosed
	}
	if seg == nil {
		return nil
	}
	seg.opMu.Lock()
	defer seg.opMu.Unlock()
	s.mu.Lock()
	if s.segs[id] != seg {
		s.mu.Unlock()
		return nil // a concurrent Drop won
	}
	if !seg.dropping {
		// Only the first attempt waits for the queue: it emptied it, and
		// a retry must not send the committer a segment whose journal is
		// gone, which it would create again.
		seg.dropping = true
		if err := s.barrier(seg); errors.Is(err, rpcerr.ErrReplicaClosed) {
			s.mu.Unlock()
			return err
		}
	}
	// An error of a failed segment is no reason to keep its files.
	file := seg.file
	seg.file = nil
	s.mu.Unlock()

	if file != nil {
		file.Close()
	}
	// The journal goes first and durably: a state file without its journal
	// is a Drop cut short, which Open finishes.
	if err := s.dropJournal(id); err != nil {
		return fmt.Errorf("replica: drop %v: %w", id, err)
	}
	if err := s.fs.Remove(statePath(s.dir, id)); err != nil && !isNotExist(err) {
		return fmt.Errorf("replica: drop %v: %w", id, err)
	}
	if err := s.fs.SyncDir(logDir(s.dir, id.Log)); err != nil && !isNotExist(err) {
		return fmt.Errorf("replica: drop %v: %w", id, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.segs, id)
	for n := range seg.frags {
		s.forget(seg, uint64(n)) // which gives back their buffers
	}
	s.diskBytes -= seg.end
	seg.end = 0
	s.log.Info("replica: segment dropped", "segment", id)
	return nil
}

// dropJournal takes a dropped segment's journal out of its log directory,
// durably: into the free directory, to be written over, while fewer than
// maxFree are kept there, and otherwise away. The log directory is synced
// before the free one, so that no crash leaves the journal under both
// names.
func (s *Store) dropJournal(id SegmentID) error {
	path, dir := journalPath(s.dir, id), logDir(s.dir, id.Log)
	to := ""
	s.mu.Lock()
	if len(s.free)+s.freeing < s.maxFree {
		s.freeSeq++
		s.freeing++
		to = s.freePath(s.freeSeq)
	}
	s.mu.Unlock()

	var err error
	if to != "" {
		err = s.fs.Rename(path, to)
	} else {
		err = s.fs.Remove(path)
	}
	moved := to != "" && err == nil
	if err == nil || isNotExist(err) { // not there: a Drop that failed after it went
		err = s.fs.SyncDir(dir)
	}
	if err == nil && moved {
		err = s.fs.SyncDir(s.freeDir())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if to != "" {
		s.freeing--
		if moved && err == nil {
			s.free = append(s.free, to)
		}
	}
	if isNotExist(err) {
		return nil
	}
	return err
}

// freeDir is the directory of the dropped journals kept to write over.
func (s *Store) freeDir() string { return filepath.Join(s.dir, freeDir) }

// freePath is the name of the n-th journal moved to the free directory.
func (s *Store) freePath(n uint64) string {
	return filepath.Join(s.freeDir(), fmt.Sprintf("%020d%s", n, journalSuffix))
}

// takeFree returns a dropped journal to write over, no longer kept, or ""
// if none is.
func (s *Store) takeFree() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) == 0 {
		return ""
	}
	path := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return path
}
