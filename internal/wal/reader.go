package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// Entry is an entry read from the log.
type Entry struct {
	Offset uint64
	record.Entry
}

// Reader reads a log in offset order from a starting offset, and waits at the
// tail for new acknowledged entries. It never returns an entry that was not
// acknowledged. A Reader is not safe for concurrent use.
//
// The bytes of returned entries are the Reader's to give away: they are never
// reused or modified.
type Reader struct {
	l    *Log
	next uint64 // offset of the next entry to return
	buf  []Entry
	seg  segment.Info // the segment the scanner reads
	f    vfs.File
	sc   *segment.Scanner
}

// NewReader returns a Reader positioned at from, which must lie between the
// log's start and end (inclusive: a Reader at the end waits for the next
// append).
func (l *Log) NewReader(from uint64) (*Reader, error) {
	l.mu.Lock()
	start, end, closed := l.start, l.end, l.closed
	l.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case from < start:
		return nil, &TruncatedError{Offset: from, Start: start}
	case from > end:
		return nil, fmt.Errorf("%w: offset %d, end %d", ErrOutOfRange, from, end)
	}
	return &Reader{l: l, next: from}, nil
}

// Next returns the next entry, waiting for it at the tail until ctx ends.
func (r *Reader) Next(ctx context.Context) (Entry, error) {
	for len(r.buf) == 0 {
		if err := r.fill(ctx, true); err != nil {
			return Entry{}, err
		}
	}
	e := r.buf[0]
	r.buf = r.buf[1:]
	return e, nil
}

// NextBatch returns up to max entries (at least one), waiting at the tail for
// the first one until ctx ends but not for the others.
func (r *Reader) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	if max <= 0 {
		return nil, errors.New("wal: NextBatch of no entries")
	}
	var out []Entry
	for len(out) < max {
		if len(r.buf) == 0 {
			err := r.fill(ctx, len(out) == 0)
			if err == errWouldWait || (err != nil && len(out) > 0) {
				break
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		n := min(max-len(out), len(r.buf))
		out = append(out, r.buf[:n]...)
		r.buf = r.buf[n:]
	}
	return out, nil
}

var errWouldWait = errors.New("wal: reader would wait")

// fill decodes the batch holding the next offset into buf.
func (r *Reader) fill(ctx context.Context, wait bool) error {
	for retried := false; ; {
		l := r.l
		l.mu.Lock()
		start, end, advanced, closed := l.start, l.end, l.advanced, l.closed
		seg, found := l.locate(r.next)
		l.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case r.next < start:
			return &TruncatedError{Offset: r.next, Start: start}
		case r.next >= end || !found:
			if !wait {
				return errWouldWait
			}
			select {
			case <-advanced:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := r.scan(seg); err != nil {
			if errors.Is(err, fs.ErrNotExist) && !retried {
				retried = true
				continue // deleted by truncation or retention: the start has moved
			}
			return err
		}
		b, pos, err := r.sc.Next()
		if err != nil {
			if errors.Is(err, record.ErrCorrupt) || errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
				return &segment.CorruptError{Path: r.seg.Path, Pos: pos, Err: fmt.Errorf("reading offset %d: %w", r.next, err)}
			}
			return err
		}
		r.buf = r.buf[:0]
		err = b.Each(func(off uint64, e record.Entry) error {
			if off >= r.next {
				r.buf = append(r.buf, Entry{Offset: off, Entry: e})
			}
			return nil
		})
		if err != nil {
			return &segment.CorruptError{Path: r.seg.Path, Pos: pos, Err: err}
		}
		if len(r.buf) > 0 {
			r.next = b.NextOffset()
			return nil
		}
	}
}

// scan points the scanner at seg, reusing the open file if seg is the one
// already being read (it may have been sealed since).
func (r *Reader) scan(seg segment.Info) error {
	if r.f != nil && r.seg.Path == seg.Path {
		r.seg = seg
		r.sc.SetLimit(seg.End)
		return nil
	}
	r.closeFile()
	f, err := r.l.opts.FS.Open(seg.Path)
	if err != nil {
		return err
	}
	r.f, r.seg = f, seg
	r.sc = segment.NewScanner(f, seg.Find(r.next), seg.End)
	return nil
}

// locate returns the segment holding off, as acknowledged. The caller holds mu.
func (l *Log) locate(off uint64) (segment.Info, bool) {
	if l.active.Path != "" && off >= l.active.Base {
		return l.active, off < l.active.Next
	}
	k := sort.Search(len(l.sealed), func(i int) bool { return l.sealed[i].Next > off })
	if k == len(l.sealed) || off < l.sealed[k].Base {
		return segment.Info{}, false
	}
	return l.sealed[k], true
}

func (r *Reader) closeFile() {
	if r.f != nil {
		r.f.Close()
		r.f, r.sc = nil, nil
	}
}

// Close releases the Reader's file.
func (r *Reader) Close() error {
	r.closeFile()
	r.buf = nil
	return nil
}
