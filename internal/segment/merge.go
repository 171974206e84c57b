package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"

	"github.com/ternwal/tern/internal/vfs"
)

// WriteMerged writes, to a new file at tmp, one sealed segment holding the
// batches of the sealed segments segs, which must be adjacent (each one's
// Base the one before's Next), oldest first. The batches are copied as
// they are, each checked (header, CRC, offsets) on the way; the header is
// segs[0]'s (base, epoch, creation time), so that the batches of segs[0]
// lie at the same file positions in the merged file as in its own, and
// the footer's index and max time cover them all. The file is synced and
// closed; tmp's directory is not synced.
//
// It returns the merged segment's Info as it is once tmp is renamed to
// segs[0].Path (Info.Path is segs[0].Path). A file already at tmp (left
// by a crash) is replaced. On any error, ctx's included (checked between
// the segments), tmp is removed, best effort, and the segments are as they
// were: their files are only read. A segment whose file changed since its
// Info was read (deleted and written over meanwhile) fails the merge.
func WriteMerged(ctx context.Context, fs vfs.FS, tmp string, segs []Info) (Info, error) {
	if len(segs) == 0 {
		return Info{}, errors.New("segment: merge of no segments")
	}
	first := segs[0]
	w := &Writer{fs: fs, path: tmp, indexed: -IndexIntervalBytes,
		info: Info{Path: tmp, Base: first.Base, Next: first.Base, Epoch: first.Epoch, Created: first.Created,
			End: HeaderBytes, Size: HeaderBytes}}
	info, err := w.merge(ctx, fs, tmp, segs)
	if err != nil {
		fs.Remove(tmp) // best effort: recovery removes a leftover too
		return Info{}, fmt.Errorf("segment: merge %d segments from %s into %s: %w", len(segs), first.Path, tmp, err)
	}
	info.Path = first.Path
	return info, nil
}

func (w *Writer) merge(ctx context.Context, fs vfs.FS, tmp string, segs []Info) (Info, error) {
	if err := fs.Remove(tmp); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return Info{}, err
	}
	f, err := fs.Create(tmp)
	if err != nil {
		return Info{}, err
	}
	w.f = f
	defer func() {
		if w.f != nil {
			w.f.Close()
		}
	}()
	if _, err := f.Write(encodeHeader(w.info.Base, w.info.Epoch, w.info.Created)); err != nil {
		return Info{}, err
	}
	for _, s := range segs {
		if err := ctx.Err(); err != nil {
			return Info{}, err
		}
		if !s.Sealed || s.Base != w.info.Next {
			return Info{}, fmt.Errorf("%s is not a sealed segment starting at offset %d", s.Path, w.info.Next)
		}
		if err := w.copyBatches(fs, s); err != nil {
			return Info{}, err
		}
		w.info.MaxTime = max(w.info.MaxTime, s.MaxTime)
	}
	footer := encodeFooter(w.info)
	if _, err := f.Write(footer); err != nil {
		return Info{}, err
	}
	if err := f.Sync(); err != nil {
		return Info{}, err
	}
	w.f = nil
	if err := f.Close(); err != nil {
		return Info{}, err
	}
	w.info.Size = w.info.End + int64(len(footer))
	w.info.Sealed = true
	return w.info, nil
}

// mergeFlushBytes is how many bytes of batches WriteMerged gathers before
// it writes them.
const mergeFlushBytes = 1 << 20

// copyBatches appends the batches of the sealed segment s to w's file,
// checking each, and records them in w's Info. It holds a chunk of the
// segment and at most mergeFlushBytes (or one batch) of output at a time.
func (w *Writer) copyBatches(fs vfs.FS, s Info) error {
	f, err := fs.Open(s.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	var out []byte
	sc := NewScanner(f, HeaderBytes, s.End)
	for {
		b, pos, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s at byte %d: %w", s.Path, pos, err)
		}
		if b.BaseOffset != w.info.Next {
			return fmt.Errorf("%s at byte %d: batch has offset %d, expected %d", s.Path, pos, b.BaseOffset, w.info.Next)
		}
		// The batch's bytes as they are in the file, still in the
		// scanner's buffer.
		out = append(out, sc.buf[pos-sc.base:][:b.Length]...)
		w.appended(b.Header, 0, w.info.End+int64(b.Length))
		if len(out) >= mergeFlushBytes {
			if _, err := w.f.Write(out); err != nil {
				return err
			}
			out = out[:0]
		}
	}
	if w.info.Next != s.Next {
		return fmt.Errorf("%s: its batches end at offset %d, its footer says %d", s.Path, w.info.Next, s.Next)
	}
	_, err = w.f.Write(out)
	return err
}
