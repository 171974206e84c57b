package segment

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/vfs"
)

// Writer appends batches to an open segment. It is not safe for concurrent
// use; readers read the file through their own handles, up to a size the
// writer's owner publishes.
//
// After a failed Append or Sync the file's state is unknown and the Writer
// refuses further appends until Rewind has restored a known state.
type Writer struct {
	fs      vfs.FS
	f       vfs.File
	info    Info
	indexed int64 // position of the last indexed batch
	broken  error
	cut     int64 // bytes Recover cut from the file's end
	// cutZeros says they were all zeros
	cutZeros bool
	// tail says old bytes of a deleted segment may follow the batches in
	// the file (CreateOver); zeros says what it writes ahead.
	tail bool
	path string // info.Path, for SyncWritten, which runs beside Append

	zeros vfs.Ahead // see ZeroAhead
}

// Cut returns how many bytes Recover cut from the end of the file after its
// last whole batch: a torn last write, or damage to the last batches, which
// look the same.
func (w *Writer) Cut() int64 { return w.cut }

// CutZeros reports whether the bytes Recover cut were all zeros: most
// likely written ahead (ZeroAhead), though a write a crash tore, or a
// zeroed block of the last batches, reads the same.
func (w *Writer) CutZeros() bool { return w.cutZeros }

// Create makes a new, empty segment in dir for offsets from base and makes it
// durable (file and directory synced) before returning.
func Create(fs vfs.FS, dir string, base, epoch uint64, now time.Time) (*Writer, error) {
	path := filepath.Join(dir, FileName(base))
	f, err := fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("segment: create %s: %w", path, err)
	}
	_, err = f.Write(encodeHeader(base, epoch, now))
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	if err != nil {
		f.Close()
		// Best effort: the name may never have been made durable anyway.
		fs.Remove(path)
		return nil, fmt.Errorf("segment: create %s: %w", path, err)
	}
	return &Writer{
		fs: fs, f: f, path: path,
		info: Info{Path: path, Base: base, Next: base, Epoch: epoch, Created: now,
			End: HeaderBytes, Size: HeaderBytes},
		indexed: -IndexIntervalBytes,
	}, nil
}

// CreateOver makes a new, empty segment in dir for offsets from base, as
// Create does, but in the file free instead of a new one: the file of a
// deleted segment, kept to be written over so that appends to the new
// segment overwrite blocks the file already has rather than allocate new
// ones. Every batch free holds must have offsets below base (the caller
// knows, from the deleted segment's footer), so that recovery takes the old
// batches after the new ones for what they are (see the package comment).
//
// The new header is written at the start of free and synced, then free is
// renamed to the segment's name, and free's directory synced before dir: a
// crash leaves the file under its free name (old batches, perhaps the new
// header), or under neither name, or as the new segment, never under both,
// and the segment's name is never on a file whose header is not its own.
// If CreateOver fails, free may be gone: the caller must not keep it as a
// file to write over (recovery finds it again if it is still there).
func CreateOver(fs vfs.FS, dir, free string, base, epoch uint64, now time.Time) (*Writer, error) {
	path := filepath.Join(dir, FileName(base))
	f, err := fs.Reuse(free)
	if err != nil {
		return nil, fmt.Errorf("segment: create %s over %s: %w", path, free, err)
	}
	renamed := false
	_, err = f.Write(encodeHeader(base, epoch, now))
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		if err = fs.Rename(free, path); err == nil {
			renamed = true
			err = fs.SyncDir(filepath.Dir(free))
		}
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	if err != nil {
		f.Close()
		if renamed {
			// Best effort, as in Create.
			fs.Remove(path)
		}
		return nil, fmt.Errorf("segment: create %s over %s: %w", path, free, err)
	}
	return &Writer{
		fs: fs, f: f, path: path,
		info: Info{Path: path, Base: base, Next: base, Epoch: epoch, Created: now,
			End: HeaderBytes, Size: HeaderBytes},
		indexed: -IndexIntervalBytes,
		tail:    true,
	}, nil
}

// Info describes the segment as written so far (not necessarily synced).
// Its Index must not be modified.
func (w *Writer) Info() Info { return w.info }

// Append writes one batch, whose header is h, at the end of the segment.
// h.BaseOffset must be the segment's next offset. maxTime is the newest entry
// time in the batch.
func (w *Writer) Append(batch []byte, h record.Header, maxTime int64) error {
	if w.broken != nil {
		return w.broken
	}
	if h.BaseOffset != w.info.Next {
		panic(fmt.Sprintf("segment: append of offset %d to %s, whose next offset is %d", h.BaseOffset, w.info.Path, w.info.Next))
	}
	if _, err := w.f.Write(batch); err != nil {
		w.broken = fmt.Errorf("segment: write %s: %w", w.info.Path, err)
		return w.broken
	}
	end := w.info.End + int64(len(batch))
	w.appended(h, maxTime, end)
	w.zeros.Wrote(w.f, end)
	return nil
}

// ZeroAhead has the writer keep the file's blocks written, with zeros, up
// to ahead bytes past its batches while its rounds average at most round
// bytes a sync (vfs.Ahead, which says why). Zero ahead turns it off.
//
// Recovery takes zeros after the last batch for the end of the segment
// (see the package comment), and Seal and Rewind cut them off.
func (w *Writer) ZeroAhead(ahead, round int64) {
	w.zeros.Start(w.f, w.info.End, ahead, round)
}

// Sync makes everything appended so far durable.
func (w *Writer) Sync() error {
	if w.broken != nil {
		return w.broken
	}
	if err := w.f.Sync(); err != nil {
		w.broken = fmt.Errorf("segment: sync %s: %w", w.info.Path, err)
		return w.broken
	}
	w.zeros.Synced()
	return nil
}

// SyncWritten makes durable every batch whose Append returned before the
// call. Unlike the Writer's other methods it may run in another goroutine
// while one goroutine goes on appending (the batches appended meanwhile may
// or may not be covered); it must not overlap Sync, Rewind, Seal or Close.
// A failure does not mark the Writer broken: the caller must not count on
// anything appended since its last good sync, and must Rewind to a state
// synced before appending again.
func (w *Writer) SyncWritten() error {
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", w.path, err)
	}
	w.zeros.Synced()
	return nil
}

// Mark is a point a Writer can be rewound to.
type Mark struct {
	info    Info
	indexed int64
}

// Info describes the segment as it was at the mark.
func (m Mark) Info() Info { return m.info }

// Mark records the writer's current state.
func (w *Writer) Mark() Mark { return Mark{info: w.info, indexed: w.indexed} }

// Rewind cuts the file back to the state recorded by m, which must be a state
// that was synced, syncs, and makes the Writer usable again. If Rewind fails,
// the Writer stays broken. In a file written over (CreateOver) the cut also
// drops the old bytes after the mark, so that no batch written and cut off
// stays behind them.
func (w *Writer) Rewind(m Mark) error {
	err := w.f.Truncate(m.info.End)
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		// The file may have been cut back already: its state is unknown.
		w.broken = errors.Join(w.broken, fmt.Errorf("segment: rewind %s to byte %d: %w", w.info.Path, m.info.End, err))
		return w.broken
	}
	w.info = m.info
	w.info.Index = w.info.Index[:len(m.info.Index):len(m.info.Index)]
	w.indexed = m.indexed
	w.zeros.Cut(m.info.End)
	w.broken = nil
	return nil
}

// Seal writes the footer, syncs and closes the file, and returns the sealed
// segment's Info. The Writer must not be used afterwards. In a file written
// over (CreateOver), the old bytes after the footer are cut off before the
// sync, so that the footer ends the file, where readers look for it.
func (w *Writer) Seal() (Info, error) {
	if w.broken != nil {
		return Info{}, w.broken
	}
	footer := encodeFooter(w.info)
	if _, err := w.f.Write(footer); err != nil {
		w.broken = fmt.Errorf("segment: seal %s: %w", w.info.Path, err)
		return Info{}, w.broken
	}
	if w.tail || w.zeros.Tail() {
		// Written first, cut after: the footer takes blocks the file has.
		if err := w.f.Truncate(w.info.End + int64(len(footer))); err != nil {
			w.broken = fmt.Errorf("segment: seal %s: %w", w.info.Path, err)
			return Info{}, w.broken
		}
	}
	if err := w.f.Sync(); err != nil {
		w.broken = fmt.Errorf("segment: seal %s: %w", w.info.Path, err)
		return Info{}, w.broken
	}
	if err := w.f.Close(); err != nil {
		return Info{}, fmt.Errorf("segment: close %s: %w", w.info.Path, err)
	}
	w.info.Size = w.info.End + int64(len(footer))
	w.info.Sealed = true
	w.broken = errors.New("segment: writer is sealed")
	return w.info, nil
}

// Close closes the file without sealing: the segment stays open and will be
// recovered by scanning. It does not sync.
func (w *Writer) Close() error {
	w.broken = errors.New("segment: writer is closed")
	return w.f.Close()
}

// Reopen makes the sealed segment info (as ReadSealed or Seal returned it)
// open again, so that a new writer appends to it instead of creating a file:
// it cuts the footer off and syncs before returning, so no batch appended
// later can land before a footer that a crash leaves behind. A crash at any
// point leaves the segment sealed as it was, or open and ending exactly at
// its last batch, which recovery scans to info.End. The index continues
// where the footer's left off, as recovery would rebuild it.
//
// If Reopen fails after opening the file, whether the footer is still there
// is unknown: the caller must recover the segment (reopen the log) before
// trusting either.
func Reopen(fs vfs.FS, info Info) (*Writer, error) {
	if !info.Sealed || info.Next <= info.Base {
		panic(fmt.Sprintf("segment: reopen of %s, which is not a sealed segment holding entries", info.Path))
	}
	f, err := fs.OpenRW(info.Path)
	if err != nil {
		return nil, fmt.Errorf("segment: reopen %s: %w", info.Path, err)
	}
	if err := truncateTail(f, info.End); err != nil {
		f.Close()
		return nil, fmt.Errorf("segment: reopen %s, cutting its footer at byte %d: %w", info.Path, info.End, err)
	}
	w := &Writer{fs: fs, f: f, info: info, indexed: -IndexIntervalBytes, path: info.Path}
	w.info.Index = slices.Clone(info.Index)
	if n := len(info.Index); n > 0 {
		w.indexed = info.Index[n-1].Pos
	}
	w.info.Size, w.info.Sealed = info.End, false
	return w, nil
}
