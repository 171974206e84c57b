package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"

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
	if errors.Is(err, fs.ErrNotExist) {
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
	names, err := fs.List(dir)
	if err != nil {
		return false, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	newest := ""
	for _, name := range names {
		if _, ok := segment.ParseFileName(name); ok && name > newest {
			newest = name // names are zero-padded base offsets
		}
	}
	if newest == "" {
		return false, nil
	}
	_, err = segment.ReadSealed(fs, dir+"/"+newest)
	return err != nil, nil
}
