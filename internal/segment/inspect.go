package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/vfs"
)

// Damage describes an open segment file as Inspect found it: where its
// valid batches end, and what lies after them.
type Damage struct {
	Path string
	// Pos is where the valid prefix ends: the position of the first bytes
	// that are not a valid batch with the expected offset, or 0 when the
	// header itself is bad. Pos == Size: the file is whole.
	Pos  int64
	Size int64 // the file's size
	// Prefix is the segment as its valid batches make it: Prefix.End is
	// Pos (or HeaderBytes when the header is bad, with no batch) and
	// Prefix.Next the offset after the last valid entry.
	Prefix Info
	// Batches and Entries count the whole, valid batches found from Pos on
	// (one at Pos has an offset out of order) whose offsets are not below
	// the segment's base (those are old bytes of a deleted segment whose
	// file this one was created over: see CreateOver): when there are any,
	// the bytes after Pos are not a torn write.
	Batches int
	Entries uint64
	// Zeros says every byte after the valid prefix is zero: blocks the
	// writer wrote ahead of its batches (Writer.ZeroAhead), or a write a
	// crash tore before its bytes reached the disk. Either way nothing
	// but what the caller knows was acknowledged can be lost there.
	Zeros bool
	Err   error // what is wrong at Pos; nil when the file is whole
}

// Damaged reports whether anything follows the valid prefix.
func (d Damage) Damaged() bool { return d.Pos < d.Size }

// CutBytes is how many bytes cutting the file at Pos removes.
func (d Damage) CutBytes() int64 { return d.Size - d.Pos }

// TornTail reports whether the bytes after the valid prefix look like a
// write a crash tore: no valid batch follows them.
func (d Damage) TornTail() bool { return d.Damaged() && d.Batches == 0 && d.Pos > 0 }

// Inspect reads the open segment at path without changing it, and returns
// its valid prefix and what follows it. It fails only when the file cannot
// be read; damage is described, not returned as an error.
func Inspect(fs vfs.FS, path string) (Damage, error) {
	f, err := fs.Open(path)
	if err != nil {
		return Damage{}, fmt.Errorf("segment: open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return Damage{}, fmt.Errorf("segment: stat %s: %w", path, err)
	}
	d := Damage{Path: path, Size: size, Pos: size}
	info, err := readHeader(f, path)
	if err != nil {
		if _, ok := errors.AsType[*rpcerr.CorruptError](err); !ok {
			return Damage{}, err
		}
		base, _ := ParseFileName(path)
		d.Prefix = Info{Path: path, Base: base, Next: base, End: HeaderBytes, Size: size}
		d.Pos, d.Err = 0, err
		if err := countBatches(f, &d, 0, 0); err != nil {
			return Damage{}, err
		}
		return d, nil
	}
	w := &Writer{info: info, indexed: -IndexIntervalBytes}
	s := NewScanner(f, HeaderBytes, size)
	for {
		b, pos, err := s.Next()
		if err == io.EOF {
			break
		}
		if err == nil && b.BaseOffset < w.info.Base {
			err = staleBatch(b.BaseOffset, w.info.Base)
		} else if err == nil && b.BaseOffset != w.info.Next {
			err = fmt.Errorf("batch has offset %d, expected %d", b.BaseOffset, w.info.Next)
		} else if err != nil && !errors.Is(err, record.ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return Damage{}, err
		}
		if err != nil {
			d.Pos, d.Err = pos, err
			break
		}
		var maxTime int64
		b.Each(func(_ uint64, e record.Entry) error { maxTime = max(maxTime, e.Time); return nil })
		w.appended(b.Header, maxTime, pos+int64(b.Length))
	}
	d.Prefix = w.info
	d.Prefix.Size = size
	if d.Damaged() {
		var err error
		if d.Zeros, err = vfs.AllZero(f, d.Pos, size); err != nil {
			return Damage{}, err
		}
		if err := countBatches(f, &d, d.Pos, d.Prefix.Base); err != nil {
			return Damage{}, err
		}
	}
	return d, nil
}

// countBatches counts the whole, valid batches that start at or after
// position from, with base offsets of at least min, into d (a valid batch at
// from is one with the wrong offset).
func countBatches(f vfs.File, d *Damage, from int64, min uint64) error {
	if d.Size <= from {
		return nil
	}
	rest := make([]byte, d.Size-from)
	if _, err := f.ReadAt(rest, from); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("segment: read %s: %w", d.Path, err)
	}
	magic := []byte(record.Magic)
	for i := 0; i < len(rest); {
		k := bytes.Index(rest[i:], magic)
		if k < 0 {
			break
		}
		i += k
		b, err := record.Decode(rest[i:])
		if err != nil || b.BaseOffset < min {
			// Not a batch, or old bytes of a deleted segment.
			i++
			continue
		}
		d.Batches++
		d.Entries += uint64(b.Count)
		i += int(b.Length)
	}
	return nil
}

// Cut truncates the open segment at path to pos, the end of its valid
// prefix as Inspect found it, and syncs it. Cutting at 0 (a bad header)
// removes the file and syncs its directory. What was cut is lost: the
// caller records it.
func Cut(fs vfs.FS, path string, pos int64) error {
	if pos < HeaderBytes {
		return Remove(fs, path)
	}
	f, err := fs.OpenRW(path)
	if err != nil {
		return fmt.Errorf("segment: open %s: %w", path, err)
	}
	err = truncateTail(f, pos)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("segment: cut %s at byte %d: %w", path, pos, err)
	}
	return nil
}

// Verify reads every batch of the sealed segment at path and checks it
// against the footer: each batch's CRC, dense offsets from the base to the
// footer's next offset, and index entries that point at batches. It returns
// the segment's Info, or a *rpcerr.CorruptError naming the first damage.
func Verify(fs vfs.FS, path string) (Info, error) {
	f, err := fs.Open(path)
	if err != nil {
		return Info{}, fmt.Errorf("segment: open %s: %w", path, err)
	}
	defer f.Close()
	info, err := readSealed(f, path)
	if err != nil {
		return Info{}, err
	}
	starts := map[int64]uint64{}
	next := info.Base
	s := NewScanner(f, HeaderBytes, info.End)
	for {
		b, pos, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if !errors.Is(err, record.ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return Info{}, err
			}
			return Info{}, &rpcerr.CorruptError{Path: path, Pos: pos, Err: err}
		}
		if b.BaseOffset != next {
			return Info{}, &rpcerr.CorruptError{Path: path, Pos: pos,
				Err: fmt.Errorf("batch has offset %d, expected %d", b.BaseOffset, next)}
		}
		starts[pos] = next
		next = b.NextOffset()
	}
	if next != info.Next {
		return Info{}, &rpcerr.CorruptError{Path: path, Pos: info.End,
			Err: fmt.Errorf("the batches end at offset %d, the footer says %d", next, info.Next)}
	}
	for k, e := range info.Index {
		if off, ok := starts[e.Pos]; !ok || off != e.Offset {
			return Info{}, &rpcerr.CorruptError{Path: path, Pos: info.End + int64(k)*indexEntry,
				Err: fmt.Errorf("index entry %d (offset %d at byte %d) points at no such batch", k, e.Offset, e.Pos)}
		}
	}
	return info, nil
}
