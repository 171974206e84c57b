package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Wire-format constants: changing any of them changes the bytes on disk.
const (
	HeaderBytes  = 40
	Version      = 1
	indexEntry   = 16
	trailerBytes = 48
	headerMagic  = "TRNS"
	footerMagic  = "TRNF"
	suffix       = ".seg"
)

// IndexIntervalBytes is how many bytes of batches lie between two entries of
// the sparse index.
const IndexIntervalBytes = 64 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// IndexEntry locates a batch: the offset of its first entry and its position
// in the file.
type IndexEntry struct {
	Offset uint64
	Pos    int64
}

// Info describes a segment.
type Info struct {
	Path    string
	Base    uint64    // offset of the first entry
	Next    uint64    // offset after the last entry; Base if empty
	Epoch   uint64    // epoch of the writer that created it
	Created time.Time // when it was created
	MaxTime int64     // newest entry time, Unix nanoseconds; 0 if empty
	End     int64     // file position where the batches end
	Size    int64     // file size, footer included
	Sealed  bool
	Index   []IndexEntry
}

// Entries is the number of entries in the segment.
func (i Info) Entries() uint64 { return i.Next - i.Base }

// Find returns the file position of the last indexed batch whose first offset
// is at most off: a reader looking for off starts scanning there.
func (i Info) Find(off uint64) int64 {
	n := sort.Search(len(i.Index), func(k int) bool { return i.Index[k].Offset > off })
	if n == 0 {
		return HeaderBytes
	}
	return i.Index[n-1].Pos
}

// FileName returns the name of the segment file whose first offset is base.
func FileName(base uint64) string { return fmt.Sprintf("%020d%s", base, suffix) }

// ParseFileName returns the base offset a segment file name encodes.
func ParseFileName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(filepath.Base(name), suffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	base, err := strconv.ParseUint(s, 10, 64)
	return base, err == nil
}

func encodeHeader(base, epoch uint64, created time.Time) []byte {
	h := make([]byte, HeaderBytes)
	copy(h, headerMagic)
	h[4] = Version
	binary.LittleEndian.PutUint64(h[8:], base)
	binary.LittleEndian.PutUint64(h[16:], epoch)
	binary.LittleEndian.PutUint64(h[24:], uint64(created.UnixNano()))
	binary.LittleEndian.PutUint32(h[32:], crc32.Checksum(h[:32], castagnoli))
	return h
}

func decodeHeader(h []byte) (base, epoch uint64, created time.Time, err error) {
	switch {
	case len(h) < HeaderBytes:
		return 0, 0, time.Time{}, errors.New("short header")
	case string(h[:4]) != headerMagic:
		return 0, 0, time.Time{}, errors.New("bad header magic")
	case h[4] != Version:
		return 0, 0, time.Time{}, fmt.Errorf("unknown segment version %d", h[4])
	case binary.LittleEndian.Uint32(h[32:]) != crc32.Checksum(h[:32], castagnoli):
		return 0, 0, time.Time{}, errors.New("header checksum mismatch")
	}
	base = binary.LittleEndian.Uint64(h[8:])
	epoch = binary.LittleEndian.Uint64(h[16:])
	created = time.Unix(0, int64(binary.LittleEndian.Uint64(h[24:])))
	return base, epoch, created, nil
}

func encodeFooter(info Info) []byte {
	n := len(info.Index)
	b := make([]byte, n*indexEntry+trailerBytes)
	for k, e := range info.Index {
		binary.LittleEndian.PutUint64(b[k*indexEntry:], e.Offset)
		binary.LittleEndian.PutUint64(b[k*indexEntry+8:], uint64(e.Pos))
	}
	t := b[n*indexEntry:]
	binary.LittleEndian.PutUint64(t[0:], uint64(info.End))
	binary.LittleEndian.PutUint32(t[8:], uint32(n))
	binary.LittleEndian.PutUint64(t[16:], info.Next)
	binary.LittleEndian.PutUint64(t[24:], uint64(info.MaxTime))
	binary.LittleEndian.PutUint64(t[32:], uint64(info.End-HeaderBytes))
	binary.LittleEndian.PutUint32(t[40:], crc32.Checksum(b[:n*indexEntry+40], castagnoli))
	copy(t[44:], footerMagic)
	return b
}
