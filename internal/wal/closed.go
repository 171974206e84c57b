package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"

	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// closedName is the file that records where the log ended when it was last
// closed cleanly (see the package doc).
const closedName = "closed"

const (
	closedMagic = "TRNC"
	closedBytes = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeClosed returns the content of the closed file for a log that ends
// at end.
func encodeClosed(end uint64) []byte {
	b := make([]byte, closedBytes)
	copy(b, closedMagic)
	binary.LittleEndian.PutUint64(b[4:], end)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	return b
}

// decodeClosed parses the content of the closed file.
func decodeClosed(b []byte) (uint64, error) {
	if len(b) != closedBytes || string(b[:4]) != closedMagic ||
		crc32.Checksum(b[:12], castagnoli) != binary.LittleEndian.Uint32(b[12:]) {
		return 0, errors.New("not a valid closed record")
	}
	return binary.LittleEndian.Uint64(b[4:]), nil
}

func (l *Log) closedPath() string { return l.opts.Dir + "/" + closedName }

// readClosed returns where the log in dir ended at its last clean close, or
// 0 if the file is missing. A damaged file is logged and read as missing: it
// only serves to detect damage elsewhere.
func (l *Log) readClosed() (uint64, error) {
	path := l.closedPath()
	b, err := vfs.ReadFile(l.opts.FS, path)
	if errors.Is(err, iofs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("wal: read %s: %w", path, err)
	}
	end, err := decodeClosed(b)
	if err != nil {
		l.opts.Logger.Warn("ignoring a damaged record of the log's last clean close", "path", path, "err", err)
		return 0, nil
	}
	return end, nil
}

// writeClosed records that the log ends at end, atomically: a crash leaves
// the old record or the new one.
func (l *Log) writeClosed(end uint64) error {
	path := l.closedPath()
	if err := vfs.ReplaceFile(l.opts.FS, path, encodeClosed(end)); err != nil {
		return fmt.Errorf("wal: write %s: %w", path, err)
	}
	return nil
}

// Unclean reports whether the log in dir was being written when its process
// stopped without closing it (a crash, kill -9): its newest segment is open,
// while a clean close seals every segment. A directory with no segment is
// clean. It reads the newest segment's footer only, so that a client can
// find the logs to recover among many at start.
func Unclean(fs vfs.FS, dir string) (bool, error) {
	newest, _, err := scanSegments(fs, dir, false)
	if err != nil || newest == "" {
		return false, err
	}
	_, err = segment.ReadSealed(fs, dir+"/"+newest)
	return err != nil, nil
}

// scanSegments returns the name of the newest segment file in dir ("" for
// none) and, if sizes, the count and bytes of them all. Only a missing dir
// fails with fs.ErrNotExist: a file removed meanwhile (by retention) is
// left out.
func scanSegments(fs vfs.FS, dir string, sizes bool) (newest string, x Extent, _ error) {
	names, err := fs.List(dir)
	if err != nil {
		return "", Extent{}, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	for _, name := range names {
		if _, ok := segment.ParseFileName(name); !ok {
			continue
		}
		newest = max(newest, name) // names are zero-padded base offsets
		if !sizes {
			continue
		}
		st, err := fs.Stat(dir + "/" + name)
		if errors.Is(err, iofs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", Extent{}, fmt.Errorf("wal: %w", err)
		}
		x.Bytes += st.Size()
		x.Segments++
	}
	return newest, x, nil
}

// Extent is a log's extent as its files tell it without opening the log.
type Extent struct {
	End      uint64 // the offset after the last entry
	Bytes    int64  // of its segment files
	Segments int
}

// ClosedExtent reads the extent of the log in dir from its files, if it was
// closed cleanly: its newest segment is sealed, and that segment's footer
// says where the log ends. ok is false for a log with no segment, or one
// whose newest segment is open (it was being written when its process
// stopped: only recovery, at its next open, finds its end). It costs a
// directory listing, a stat per segment and one footer read, so that a
// listing of many logs need open none.
func ClosedExtent(fs vfs.FS, dir string) (_ Extent, ok bool, _ error) {
	newest, x, err := scanSegments(fs, dir, true)
	if err != nil || newest == "" {
		return Extent{}, false, err
	}
	info, err := segment.ReadSealed(fs, dir+"/"+newest)
	if err != nil {
		return Extent{}, false, nil // open: a crash left it so
	}
	x.End = info.Next
	return x, true, nil
}
