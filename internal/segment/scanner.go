package segment

import (
	"errors"
	"fmt"
	"io"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/vfs"
)

// ChunkBytes is how much a Scanner reads from the file at a time.
const ChunkBytes = 256 << 10

// Scanner reads the batches of a segment file in order, from a position up to
// a limit, in large chunks. The batches it returns alias a buffer that the
// Scanner never reuses, so they stay valid after later calls to Next.
// A Scanner is not safe for concurrent use.
type Scanner struct {
	f     vfs.File
	limit int64
	buf   []byte
	base  int64 // file position of buf[0]
	off   int   // position of the next batch in buf
}

// NewScanner returns a Scanner that reads batches from file position pos up
// to limit.
func NewScanner(f vfs.File, pos, limit int64) *Scanner {
	return &Scanner{f: f, base: pos, limit: limit}
}

// Pos is the file position of the next batch.
func (s *Scanner) Pos() int64 { return s.base + int64(s.off) }

// SetLimit moves the limit, for a reader following a segment that grows.
func (s *Scanner) SetLimit(limit int64) { s.limit = limit }

// Next returns the next batch and its file position. It returns io.EOF at the
// limit, io.ErrUnexpectedEOF if the limit or the file's end cuts a batch, and
// an error wrapping record.ErrCorrupt for bytes that are not a valid batch.
func (s *Scanner) Next() (record.Batch, int64, error) {
	at := s.Pos()
	if at >= s.limit {
		return record.Batch{}, at, io.EOF
	}
	if err := s.fill(record.HeaderBytes); err != nil {
		return record.Batch{}, at, err
	}
	h, err := record.ParseHeader(s.buf[s.off:])
	if err != nil {
		return record.Batch{}, at, err
	}
	if err := s.fill(int(h.Length)); err != nil {
		return record.Batch{}, at, err
	}
	b, err := record.Decode(s.buf[s.off : s.off+int(h.Length)])
	if err != nil {
		return record.Batch{}, at, err
	}
	s.off += int(h.Length)
	return b, at, nil
}

// fill makes sure at least need bytes from the next batch's position are
// buffered, reading a chunk or more into a new buffer.
func (s *Scanner) fill(need int) error {
	have := len(s.buf) - s.off
	if have >= need {
		return nil
	}
	at := s.Pos()
	if int64(need) > s.limit-at {
		return io.ErrUnexpectedEOF
	}
	n := int(min(max(int64(need), ChunkBytes), s.limit-at))
	buf := make([]byte, n)
	copy(buf, s.buf[s.off:])
	read, err := s.f.ReadAt(buf[have:], at+int64(have))
	if read < n-have {
		if err == nil || errors.Is(err, io.EOF) {
			// The file is shorter than the limit: the end cuts a batch.
			buf = buf[:have+read]
			s.buf, s.base, s.off = buf, at, 0
			if len(buf) < need {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		return fmt.Errorf("segment: read %s at %d: %w", s.f.Name(), at+int64(have), err)
	}
	s.buf, s.base, s.off = buf, at, 0
	return nil
}
