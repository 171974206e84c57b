package wal

import (
	"sync"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// LogicalBytes is engine.Engine's: the bytes of the segment files with each
// batch counted at its size uncompressed. A log without compression has
// no compressed batch, so that is its files' bytes; one with compression
// has its batch headers read, each once: the log remembers how far it has
// read each segment.
func (l *Log) LogicalBytes() int64 {
	l.mu.Lock()
	segs := l.segments()
	l.mu.Unlock()
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	if l.opts.Codec == record.None {
		return n
	}
	return n + l.logical.saved(l.opts.FS, segs)
}

// SavedBytes is what compression saved in the segment files of the log in
// dir, which is not open: the logical bytes of their batches less their
// stored bytes. ClosedExtent's Bytes plus SavedBytes is the log's
// LogicalBytes. It reads every batch header.
func SavedBytes(fs vfs.FS, dir string) (int64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return 0, err
	}
	var c logicalCache
	var n int64
	for _, name := range names {
		if _, ok := segment.ParseFileName(name); !ok {
			continue
		}
		info, err := segment.ReadSealed(fs, dir+"/"+name)
		if err != nil {
			continue // open: only recovery finds its end
		}
		n += c.saved(fs, []segment.Info{info})
	}
	return n, nil
}

// logicalCache remembers, for each segment file, the bytes compression
// saved in its batches up to a file position. Sealed segments never change
// and the active one only grows, so each header is read once. It is safe
// for concurrent use; the zero value is ready.
type logicalCache struct {
	mu sync.Mutex
	by map[string]hopped
}

type hopped struct {
	end   int64 // the file position read up to, a batch boundary
	saved int64 // logical less stored bytes of the batches before end
}

// saved reads the batch headers of segs it has not read and returns the
// bytes compression saved in all of segs. A segment it cannot read (deleted
// meanwhile, or damaged) counts as stored. It forgets the segments not in
// segs.
func (c *logicalCache) saved(fs vfs.FS, segs []segment.Info) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[string]hopped, len(segs))
	var n int64
	for _, s := range segs {
		h, ok := c.by[s.Path]
		if !ok {
			h.end = segment.HeaderBytes
		}
		if h.end < s.End {
			h = hop(fs, s.Path, h, s.End)
		}
		next[s.Path] = h
		n += h.saved
	}
	c.by = next
	return n
}

// hop reads the headers of the batches of the file at path from h.end to
// end, and returns h moved to end, or to where it stopped reading.
func hop(fs vfs.FS, path string, h hopped, end int64) hopped {
	f, err := fs.Open(path)
	if err != nil {
		return h
	}
	defer f.Close()
	var buf [record.HeaderBytes]byte
	for h.end+record.HeaderBytes <= end {
		if _, err := f.ReadAt(buf[:], h.end); err != nil {
			return h
		}
		bh, err := record.ParseHeader(buf[:])
		if err != nil || h.end+int64(bh.Length) > end {
			return h
		}
		h.saved += bh.LogicalBytes() - int64(bh.Length)
		h.end += int64(bh.Length)
	}
	return h
}
