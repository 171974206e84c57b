package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/vfs"
)

// ErrUnfinished is returned by Recover for a segment file whose creation was
// cut short by a crash: its header is missing or torn, it holds no batch, and
// it is no longer than a sector (Create writes and syncs the header before
// any batch is appended, so a longer file had a durable header). It held
// nothing that was acknowledged, and the caller may remove it.
var ErrUnfinished = errors.New("segment: file creation did not finish")

// ErrCutAcknowledged is wrapped by the *rpcerr.CorruptError Recover returns for a
// tail it would have taken for a torn write, had the cut not lost entries
// the caller knows were acknowledged.
var ErrCutAcknowledged = errors.New("the cut would lose acknowledged entries")

// errNotSealed means a file has no valid footer.
var errNotSealed = errors.New("no valid footer")

// ReadSealed returns the Info of a sealed segment, read from its header and
// footer. A missing or damaged footer is reported as a *rpcerr.CorruptError.
func ReadSealed(fs vfs.FS, path string) (Info, error) {
	f, err := fs.Open(path)
	if err != nil {
		return Info{}, fmt.Errorf("segment: open %s: %w", path, err)
	}
	defer f.Close()
	return readSealed(f, path)
}

func readSealed(f vfs.File, path string) (Info, error) {
	size, err := f.Size()
	if err != nil {
		return Info{}, fmt.Errorf("segment: stat %s: %w", path, err)
	}
	info, err := readHeader(f, path)
	if err != nil {
		return Info{}, err
	}
	if size < HeaderBytes+trailerBytes {
		return Info{}, &rpcerr.CorruptError{Path: path, Pos: size, Err: errNotSealed}
	}
	t := make([]byte, trailerBytes)
	if _, err := f.ReadAt(t, size-trailerBytes); err != nil {
		return Info{}, fmt.Errorf("segment: read %s: %w", path, err)
	}
	end := int64(binary.LittleEndian.Uint64(t[0:]))
	n := int64(binary.LittleEndian.Uint32(t[8:]))
	if string(t[44:]) != footerMagic || end < HeaderBytes || end+n*indexEntry+trailerBytes != size {
		return Info{}, &rpcerr.CorruptError{Path: path, Pos: size - trailerBytes, Err: errNotSealed}
	}
	footer := make([]byte, n*indexEntry+trailerBytes)
	if _, err := f.ReadAt(footer, end); err != nil {
		return Info{}, fmt.Errorf("segment: read %s: %w", path, err)
	}
	if crc32.Checksum(footer[:len(footer)-8], castagnoli) != binary.LittleEndian.Uint32(footer[len(footer)-8:]) {
		return Info{}, &rpcerr.CorruptError{Path: path, Pos: end, Err: errors.New("footer checksum mismatch")}
	}
	info.Index = make([]IndexEntry, n)
	for k := range info.Index {
		info.Index[k] = IndexEntry{
			Offset: binary.LittleEndian.Uint64(footer[k*indexEntry:]),
			Pos:    int64(binary.LittleEndian.Uint64(footer[k*indexEntry+8:])),
		}
	}
	info.Next = binary.LittleEndian.Uint64(t[16:])
	info.MaxTime = int64(binary.LittleEndian.Uint64(t[24:]))
	info.End = end
	info.Size = size
	info.Sealed = true
	if info.Next < info.Base {
		return Info{}, &rpcerr.CorruptError{Path: path, Pos: end, Err: errors.New("footer offsets out of range")}
	}
	if int64(binary.LittleEndian.Uint64(t[32:])) != end-HeaderBytes {
		return Info{}, &rpcerr.CorruptError{Path: path, Pos: end, Err: errors.New("footer sizes disagree")}
	}
	// Readers seek to what Find returns: the index must point into the
	// batches, in order.
	for k, e := range info.Index {
		if e.Pos < HeaderBytes || e.Pos >= end || e.Offset < info.Base || e.Offset >= info.Next ||
			(k > 0 && (e.Pos <= info.Index[k-1].Pos || e.Offset <= info.Index[k-1].Offset)) {
			return Info{}, &rpcerr.CorruptError{Path: path, Pos: end + int64(k)*indexEntry,
				Err: fmt.Errorf("index entry %d (offset %d at byte %d) out of range", k, e.Offset, e.Pos)}
		}
	}
	return info, nil
}

// errBadHeader is wrapped by the rpcerr.CorruptError readHeader returns for a header
// that does not decode, as opposed to one that names the wrong base offset.
var errBadHeader = errors.New("bad header")

func readHeader(f vfs.File, path string) (Info, error) {
	h := make([]byte, HeaderBytes)
	n, err := f.ReadAt(h, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return Info{}, fmt.Errorf("segment: read %s: %w", path, err)
	}
	base, epoch, created, err := decodeHeader(h[:n])
	if err != nil {
		return Info{}, &rpcerr.CorruptError{Path: path, Pos: 0, Err: fmt.Errorf("%w: %w", errBadHeader, err)}
	}
	if named, ok := ParseFileName(path); !ok || named != base {
		return Info{}, &rpcerr.CorruptError{Path: path, Pos: 8, Err: fmt.Errorf("header says base offset %d, file name disagrees", base)}
	}
	return Info{Path: path, Base: base, Next: base, Epoch: epoch, Created: created, End: HeaderBytes, Size: HeaderBytes}, nil
}

// Recover opens the segment at path after a restart. A sealed segment's Info
// is returned with a nil Writer. For an open segment, Recover scans every
// batch, truncates a torn tail (and syncs), and returns a Writer positioned to
// append after the last valid batch. Damage that is not a torn tail is
// returned as a *rpcerr.CorruptError and nothing is truncated.
//
// acked is an offset the caller knows every entry below was acknowledged
// (0 if it knows none): a tail whose cut would lose one of them is damage,
// not a torn write, and is returned as a *rpcerr.CorruptError.
func Recover(fs vfs.FS, path string, acked uint64) (Info, *Writer, error) {
	f, err := fs.OpenRW(path)
	if err != nil {
		return Info{}, nil, fmt.Errorf("segment: open %s: %w", path, err)
	}
	w, err := recoverFile(fs, f, path, acked)
	if err != nil || w == nil {
		f.Close()
		if err != nil {
			return Info{}, nil, err
		}
		info, err := ReadSealed(fs, path)
		return info, nil, err
	}
	return w.info, w, nil
}

// recoverFile returns a nil Writer and no error for a sealed segment.
func recoverFile(fs vfs.FS, f vfs.File, path string, acked uint64) (*Writer, error) {
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("segment: stat %s: %w", path, err)
	}
	info, err := readHeader(f, path)
	if err != nil {
		// A header that is whole but names another base offset is not
		// the torn header of a creation cut short.
		if !errors.Is(err, errBadHeader) {
			return nil, err
		}
		found, ferr := validBatchAfter(f, 0, size, 0)
		if ferr != nil {
			return nil, ferr
		}
		// A file longer than a sector had its header synced: a bad one
		// is damage, even with no whole batch left after it. So is a
		// file that held acknowledged entries.
		if found < 0 && size <= vfs.SectorBytes {
			if named, _ := ParseFileName(path); named >= acked {
				return nil, fmt.Errorf("%w: %s", ErrUnfinished, path)
			}
			ce, _ := errors.AsType[*rpcerr.CorruptError](err)
			return nil, &rpcerr.CorruptError{Path: path, Pos: 0, Err: fmt.Errorf("%w, but removing the file as unfinished would lose entries: %w", ce.Err, ErrCutAcknowledged)}
		}
		return nil, err
	}
	if _, err := readSealed(f, path); err == nil {
		return nil, nil
	} else if _, ok := errors.AsType[*rpcerr.CorruptError](err); !ok {
		// Not knowing whether the segment is sealed, scanning it as open
		// could truncate its footer.
		return nil, err
	}
	w := &Writer{fs: fs, f: f, info: info, indexed: -IndexIntervalBytes, path: path}
	s := NewScanner(f, HeaderBytes, size)
	for {
		b, pos, err := s.Next()
		if err == io.EOF {
			break
		}
		if err == nil && b.BaseOffset != w.info.Next {
			if b.BaseOffset >= w.info.Base {
				// A whole, valid batch of this segment is no torn write.
				return nil, &rpcerr.CorruptError{Path: path, Pos: pos,
					Err: fmt.Errorf("batch has offset %d, expected %d", b.BaseOffset, w.info.Next)}
			}
			err = staleBatch(b.BaseOffset, w.info.Base)
		}
		if err != nil {
			if !errors.Is(err, record.ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errStale) {
				return nil, err
			}
			found, ferr := validBatchAfter(f, pos, size, w.info.Base)
			if ferr != nil {
				return nil, ferr
			}
			if found >= 0 {
				return nil, &rpcerr.CorruptError{Path: path, Pos: pos, Err: fmt.Errorf("%v, and a valid batch follows at byte %d", err, found)}
			}
			if w.info.Next < acked {
				return nil, &rpcerr.CorruptError{Path: path, Pos: pos,
					Err: fmt.Errorf("%v, and no valid batch follows, but %w: offsets %d to %d", err, ErrCutAcknowledged, w.info.Next, acked)}
			}
			zeros, err := vfs.AllZero(f, pos, size)
			if err != nil {
				return nil, err
			}
			if err := truncateTail(f, pos); err != nil {
				return nil, fmt.Errorf("segment: truncate torn tail of %s at byte %d: %w", path, pos, err)
			}
			w.cut, w.cutZeros = size-pos, zeros
			break
		}
		var maxTime int64
		b.Each(func(_ uint64, e record.Entry) error { maxTime = max(maxTime, e.Time); return nil })
		w.appended(b.Header, maxTime, pos+int64(b.Length))
	}
	return w, nil
}

// appended records a batch that is already in the file and ends at end.
func (w *Writer) appended(h record.Header, maxTime, end int64) {
	if w.info.End-w.indexed >= IndexIntervalBytes {
		w.info.Index = append(w.info.Index, IndexEntry{Offset: h.BaseOffset, Pos: w.info.End})
		w.indexed = w.info.End
	}
	w.info.End = end
	w.info.Size = end
	w.info.Next = h.NextOffset()
	w.info.MaxTime = max(w.info.MaxTime, maxTime)
}

func truncateTail(f vfs.File, pos int64) error {
	if err := f.Truncate(pos); err != nil {
		return err
	}
	return f.Sync()
}

// errStale is wrapped by the error for a valid batch whose offsets are
// below its segment's base: old bytes of the deleted segment whose file the
// segment was created over.
var errStale = errors.New("old bytes of a deleted segment")

func staleBatch(off, base uint64) error {
	return fmt.Errorf("%w: a batch at offset %d, below the segment's base offset %d", errStale, off, base)
}

// validBatchAfter looks for a valid batch that starts after position from,
// ends by size and has a base offset of at least floor (the batches below are
// old bytes of a deleted segment), and returns its position, or -1 if there
// is none. It reads the file a chunk at a time, and each candidate batch
// whole: after the new batches of a file written over, the rest of the file
// may be as large as a segment.
func validBatchAfter(f vfs.File, from, size int64, floor uint64) (int64, error) {
	magic := []byte(record.Magic)
	buf := make([]byte, scanChunkBytes+len(magic)-1)
	for at := from + 1; at < size; at += scanChunkBytes {
		b := buf[:int(min(int64(len(buf)), size-at))]
		if _, err := f.ReadAt(b, at); err != nil && !errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("segment: read %s: %w", f.Name(), err)
		}
		for i := 0; ; i++ {
			k := bytes.Index(b[i:], magic)
			if k < 0 {
				break
			}
			if i += k; i >= scanChunkBytes {
				break // the next chunk starts there
			}
			ok, err := validBatchAt(f, at+int64(i), size, floor)
			if err != nil || ok {
				return at + int64(i), err
			}
		}
	}
	return -1, nil
}

// scanChunkBytes is how much of a file validBatchAfter searches at a time.
const scanChunkBytes = 1 << 20

// validBatchAt reports whether a valid batch with a base offset of at least
// floor starts at pos and ends by size.
func validBatchAt(f vfs.File, pos, size int64, floor uint64) (bool, error) {
	if size-pos < record.HeaderBytes {
		return false, nil
	}
	hb := make([]byte, record.HeaderBytes)
	if _, err := f.ReadAt(hb, pos); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("segment: read %s: %w", f.Name(), err)
	}
	h, err := record.ParseHeader(hb)
	if err != nil || h.BaseOffset < floor || int64(h.Length) > size-pos {
		return false, nil
	}
	b := make([]byte, h.Length)
	if _, err := f.ReadAt(b, pos); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("segment: read %s: %w", f.Name(), err)
	}
	_, err = record.Decode(b)
	return err == nil, nil
}

// Remove deletes a segment file and syncs its directory.
func Remove(fs vfs.FS, path string) error {
	if err := fs.Remove(path); err != nil {
		return fmt.Errorf("segment: remove %s: %w", path, err)
	}
	return fs.SyncDir(filepath.Dir(path))
}
