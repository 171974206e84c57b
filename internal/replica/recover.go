package replica

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ternwal/tern/internal/vfs"
)

// errUnfinished means a journal's creation was cut short by a crash: its
// header is torn and nothing follows. It held nothing acknowledged.
var errUnfinished = errors.New("journal creation did not finish")

// recover loads every segment under the store's directory. It runs in Open,
// before the committer starts.
func (s *Store) recover() error {
	names, err := s.fs.List(s.dir)
	if err != nil {
		return fmt.Errorf("replica: list %s: %w", s.dir, err)
	}
	for _, name := range names {
		log, ok := parseNumber(name, "")
		if !ok {
			continue
		}
		if fi, err := s.fs.Stat(logDir(s.dir, log)); err != nil || !fi.IsDir() {
			continue
		}
		s.logDirs[log] = true
		if err := s.recoverLog(log); err != nil {
			return err
		}
	}
	return nil
}

// recoverLog loads the segments of one log, and finishes what a crash cut
// short: it removes unfinished state files, a state file whose journal a
// Drop removed, and a journal whose creation did not finish.
func (s *Store) recoverLog(log uint64) error {
	dir := logDir(s.dir, log)
	names, err := s.fs.List(dir)
	if err != nil {
		return fmt.Errorf("replica: list %s: %w", dir, err)
	}
	var journals []uint64
	states := make(map[uint64]bool)
	for _, name := range names {
		if seq, ok := parseNumber(name, journalSuffix); ok {
			journals = append(journals, seq)
		} else if seq, ok := parseNumber(name, stateSuffix); ok {
			states[seq] = true
		} else if strings.HasSuffix(name, stateSuffix+tmpSuffix) {
			if err := s.fs.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("replica: remove %s: %w", name, err)
			}
		}
	}
	for seq := range states {
		id := SegmentID{Log: log, Seq: seq}
		if slices.Contains(journals, seq) {
			continue
		}
		if err := s.removeDurably(statePath(s.dir, id)); err != nil {
			return err
		}
	}
	for _, seq := range journals {
		if err := s.recoverSegment(SegmentID{Log: log, Seq: seq}, states[seq]); err != nil {
			return err
		}
	}
	return nil
}

// recoverFree finds the dropped journals kept to be written over, and
// removes those over maxFree. It creates the free directory, durably, the
// first time.
func (s *Store) recoverFree() error {
	dir := s.freeDir()
	names, err := s.fs.List(dir)
	if isNotExist(err) {
		if s.maxFree == 0 {
			return nil
		}
		if err := vfs.MkdirAllSync(s.fs, dir); err != nil {
			return fmt.Errorf("replica: create %s: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("replica: list %s: %w", dir, err)
	}
	for _, name := range names {
		n, ok := parseNumber(name, journalSuffix)
		if !ok {
			continue
		}
		s.freeSeq = max(s.freeSeq, n)
		path := filepath.Join(dir, name)
		if len(s.free) < s.maxFree {
			s.free = append(s.free, path)
		} else if err := s.fs.Remove(path); err != nil {
			return fmt.Errorf("replica: remove %s: %w", path, err)
		}
	}
	return nil
}

func (s *Store) removeDurably(path string) error {
	if err := s.fs.Remove(path); err != nil && !isNotExist(err) {
		return fmt.Errorf("replica: remove %s: %w", path, err)
	}
	if err := s.fs.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("replica: sync %s: %w", filepath.Dir(path), err)
	}
	return nil
}

func (s *Store) recoverSegment(id SegmentID, hasState bool) error {
	var st *state
	if hasState {
		path := statePath(s.dir, id)
		got, err := readState(s.fs, path, id)
		if err != nil {
			return err
		}
		st = &got
	}
	path := journalPath(s.dir, id)
	f, err := s.fs.OpenRW(path)
	if err != nil {
		return fmt.Errorf("replica: open %s: %w", path, err)
	}
	seg, err := recoverJournal(f, id, st)
	if errors.Is(err, errUnfinished) {
		f.Close()
		s.log.Warn("replica: removing a journal whose creation did not finish", "path", path)
		return s.removeDurably(path)
	}
	if err != nil {
		f.Close()
		return err
	}
	if n := size(f); seg.end < n {
		zeros, err := vfs.AllZero(f, seg.end, n)
		if err == nil {
			err = truncate(path, f, seg.end)
		}
		if err != nil {
			f.Close()
			return err
		}
		if zeros {
			s.log.Info("replica: cut the zeros after a journal's last frame (written ahead of the frames, or a write a crash tore)", "path", path, "at", seg.end, "bytes", n-seg.end)
		} else {
			s.log.Warn("replica: cut a journal after its last valid frame (a torn tail, or what a reused file held before)", "path", path, "at", seg.end)
		}
	}
	s.segs[id] = seg
	s.memBytes += seg.memBytes
	s.diskBytes += seg.end
	return nil
}

// size is the file's size, or -1 if it cannot tell: truncating then fails
// with the real error.
func size(f vfs.File) int64 {
	n, err := f.Size()
	if err != nil {
		return -1
	}
	return n
}

func readState(fs vfs.FS, path string, id SegmentID) (state, error) {
	f, err := fs.Open(path)
	if err != nil {
		return state{}, fmt.Errorf("replica: open %s: %w", path, err)
	}
	defer f.Close()
	b := make([]byte, stateBytes+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return state{}, fmt.Errorf("replica: read %s: %w", path, err)
	}
	got, st, err := decodeState(b[:n])
	if err != nil {
		return state{}, &CorruptError{Path: path, Pos: 0, Err: err}
	}
	if got != id {
		return state{}, &CorruptError{Path: path, Pos: 8, Err: fmt.Errorf("state of segment %v", got)}
	}
	return st, nil
}

// recoverJournal scans a journal and returns its segment, whose end is
// where the valid frames end: the caller truncates what follows (a torn
// tail, or fragments a seal discarded). Damage followed by a valid frame is
// a *CorruptError.
func recoverJournal(f vfs.File, id SegmentID, st *state) (*segment, error) {
	path := f.Name()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("replica: stat %s: %w", path, err)
	}
	b := make([]byte, headerBytes)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("replica: read %s: %w", path, err)
	}
	h, err := decodeHeader(b[:n])
	if err != nil {
		// A header torn at its creation: nothing follows it, as the
		// header is written and synced before a reused file is renamed
		// into place. Any valid frame means damage.
		found, ferr := validFrameFrom(f, 0, size, anyNonce)
		switch {
		case ferr != nil:
			return nil, fmt.Errorf("replica: %s: %w", path, ferr)
		case found < 0 && st == nil && !errors.Is(err, errVersion):
			return nil, errUnfinished
		}
		return nil, &CorruptError{Path: path, Pos: 0, Err: fmt.Errorf("bad header: %w", err)}
	}
	if h.id != id {
		return nil, &CorruptError{Path: path, Pos: 8, Err: fmt.Errorf("header of segment %v", h.id)}
	}
	seg := &segment{id: id, file: f, nonce: h.nonce, initEpoch: h.epoch, fenced: h.epoch, persisted: h.epoch}
	if st != nil {
		seg.fenced = max(seg.fenced, st.epoch)
		seg.persisted = seg.fenced
		seg.sealed = st.sealed
	}
	pos := int64(headerBytes)
	for pos < size && !(seg.sealed && uint64(len(seg.frags)) == st.count) {
		n, data, err := readFrame(f, pos, size, h.nonce)
		if err == nil && n != uint64(len(seg.frags)) {
			// A whole, valid frame is no torn write.
			return nil, &CorruptError{Path: path, Pos: pos,
				Err: fmt.Errorf("frame of fragment %d, expected %d", n, len(seg.frags))}
		}
		if err != nil {
			if !errors.Is(err, errBadFrame) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("replica: %s: %w", path, err)
			}
			found, ferr := validFrameFrom(f, pos+1, size, h.nonce)
			if ferr != nil {
				return nil, fmt.Errorf("replica: %s: %w", path, ferr)
			}
			if found >= 0 {
				return nil, &CorruptError{Path: path, Pos: pos, Err: fmt.Errorf("%v, and a valid frame follows at byte %d", err, found)}
			}
			break // a torn tail
		}
		frag := fragment{pos: pos, size: int64(len(data)), data: data}
		if seg.sealed {
			frag.data = nil
		} else {
			seg.memBytes += frag.size
		}
		seg.frags = append(seg.frags, frag)
		pos = frag.end()
	}
	if seg.sealed && uint64(len(seg.frags)) < st.count {
		return nil, &CorruptError{Path: path, Pos: pos,
			Err: fmt.Errorf("segment sealed at %d fragments, the journal holds %d", st.count, len(seg.frags))}
	}
	seg.durable = uint64(len(seg.frags))
	if seg.sealed {
		seg.memFrom = seg.durable
	}
	seg.end = pos
	return seg, nil
}

// readFrame reads and decodes the frame at pos of a journal of size bytes
// and nonce (or anyNonce).
func readFrame(f vfs.File, pos, size int64, nonce uint64) (uint64, []byte, error) {
	if size-pos < frameHeaderBytes {
		return 0, nil, io.ErrUnexpectedEOF
	}
	h := make([]byte, frameHeaderBytes)
	if err := readAt(f, h, pos); err != nil {
		return 0, nil, err
	}
	length, err := frameLength(h, nonce)
	if err != nil {
		return 0, nil, err
	}
	if size-pos-frameHeaderBytes < int64(length) {
		return 0, nil, io.ErrUnexpectedEOF
	}
	b := append(h, make([]byte, length)...)
	if err := readAt(f, b[frameHeaderBytes:], pos+frameHeaderBytes); err != nil {
		return 0, nil, err
	}
	return decodeFrame(b, nonce)
}

// readAt reads len(p) bytes, which the caller knows are in the file. Its
// error does not name the file, whose name may have changed since it was
// opened (a journal written over a dropped one): the caller names it.
func readAt(f vfs.File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read at byte %d: %w", off, err)
}

// scanBytes is how much of a journal validFrameFrom reads at a time.
const scanBytes = 1 << 20

// validFrameFrom looks for a valid frame of the journal of nonce (or of
// any, anyNonce) that starts at or after position from and ends by size,
// and returns its position, or -1 if there is none. It reads the file in
// pieces of scanBytes, and a frame where its magic is.
func validFrameFrom(f vfs.File, from, size int64, nonce uint64) (int64, error) {
	magic := []byte(frameMagic)
	buf := make([]byte, min(int64(scanBytes+len(magic)-1), max(size-from, 0)))
	for at := from; at < size; at += scanBytes {
		b := buf[:min(int64(len(buf)), size-at)]
		if err := readAt(f, b, at); err != nil {
			return -1, err
		}
		for i := 0; i < len(b) && i < scanBytes; i++ {
			k := bytes.Index(b[i:], magic)
			if k < 0 || i+k >= scanBytes { // the next piece starts there
				break
			}
			i += k
			_, _, err := readFrame(f, at+int64(i), size, nonce)
			if err == nil {
				return at + int64(i), nil
			}
			if !errors.Is(err, errBadFrame) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return -1, err
			}
		}
	}
	return -1, nil
}
