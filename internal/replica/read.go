package replica

import (
	"fmt"
	"io"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/vfs"
)

// List returns the sizes of seg's durable fragments, in order.
func (s *Store) List(id SegmentID) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seg, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	sizes := make([]int64, seg.durable)
	for i := range sizes {
		sizes[i] = seg.frags[i].size
	}
	return sizes, nil
}

// Read reads durable fragment n of seg from off into p, as io.ReaderAt
// does: it returns fewer than len(p) bytes only at the fragment's end, and
// then io.EOF. It fails with rpcerr.ErrSegmentNotFound if the segment is unknown or the
// fragment not durable. It reads from memory while the fragment is held
// there, and otherwise from the journal: the whole frame, even for part of
// the fragment, which is checked first. A frame that fails its check gives
// a *CorruptError and no bytes: the caller must read another replica.
func (s *Store) Read(id SegmentID, n uint64, off int64, p []byte) (int, error) {
	s.mu.Lock()
	seg, err := s.lookup(id)
	if err == nil && n >= seg.durable {
		err = fmt.Errorf("%w: fragment %d of %v, which has %d durable", rpcerr.ErrSegmentNotFound, n, id, seg.durable)
	}
	if err != nil {
		s.mu.Unlock()
		return 0, err
	}
	f, file := seg.frags[n], seg.file
	if held := f.hold(); held != nil {
		defer s.releaseAll(held) // once copied from
	}
	s.mu.Unlock()
	if testHookRead != nil {
		testHookRead()
	}
	if off < 0 {
		return 0, fmt.Errorf("%w: read at offset %d", rpcerr.ErrInvalid, off)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := int(min(int64(len(p)), f.size-off))
	if f.data != nil {
		copy(p, f.data[off:])
	} else {
		data, err := s.readFrame(seg, file, n, f)
		if err != nil {
			return 0, err
		}
		copy(p, data[off:])
	}
	if want < len(p) {
		return want, io.EOF
	}
	return want, nil
}

// readFrame reads fragment n of seg, located by f, from its journal file,
// whole, and returns its data once the frame is checked. A frame that fails
// its check, or holds another fragment, gives a *CorruptError.
func (s *Store) readFrame(seg *segment, file vfs.File, n uint64, f fragment) ([]byte, error) {
	id := seg.id
	frame := make([]byte, frameBytes(int(f.size)))
	if err := readAt(file, frame, f.pos); err != nil {
		if _, lerr := s.lookupLocked(id); lerr != nil {
			return nil, lerr // dropped while reading
		}
		return nil, fmt.Errorf("replica: read fragment %d of %v: %w", n, id, err)
	}
	got, data, err := decodeFrame(frame, seg.nonce)
	if err == nil && (got != n || int64(len(data)) != f.size) {
		err = fmt.Errorf("%w: frame of fragment %d holds fragment %d, %d bytes", errBadFrame, n, got, len(data))
	}
	if err != nil {
		return nil, &CorruptError{Path: journalPath(s.dir, id), Pos: f.pos, Err: err}
	}
	return data, nil
}

// testHookRead, if set, runs in each Read between taking the fragment and
// copying from it.
var testHookRead func()
