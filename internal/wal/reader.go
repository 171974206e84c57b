package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/ternwal/tern/client/rpcerr"

	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// Entry is an entry read from the log, or a time tick.
type Entry struct {
	Offset uint64
	record.Entry
	// IsTick marks a time tick, which is not an entry: Tick is its time and
	// Offset its position (every entry below it comes before it).
	IsTick bool
	Tick   uint64
}

// Tick is a time tick at a position in the log.
type Tick struct {
	Time   uint64
	Offset uint64 // every entry below Offset comes before the tick
}

// Reader reads a log in offset order from a starting offset, and waits at the
// tail for new acknowledged entries. It never returns an entry that was not
// acknowledged. A Reader is not safe for concurrent use.
//
// The bytes of returned entries are the Reader's to give away: they are never
// reused or modified.
type Reader struct {
	Cursor
	l   *Log
	seg segment.Info // the segment the scanner reads
	f   vfs.File
	sc  *segment.Scanner
}

// NewReader returns a Reader positioned at from, which must lie between the
// log's start and end (inclusive: a Reader at the end waits for the next
// append). With ticks, the Reader also returns the time ticks appended from
// now on, in their places between the entries.
func (l *Log) NewReader(from uint64, ticks bool) (*Reader, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, rpcerr.ErrClosed
	case from < l.start:
		return nil, &rpcerr.TruncatedError{Offset: from, Start: l.start}
	case from > l.end:
		return nil, fmt.Errorf("%w: offset %d, end %d", rpcerr.ErrOutOfRange, from, l.end)
	}
	r := &Reader{Cursor: NewCursor(&l.mu, from), l: l}
	if ticks {
		l.tickReaders[r] = struct{}{}
	}
	return r, nil
}

// Next returns the next entry or tick, waiting for one at the tail until ctx
// ends.
func (r *Reader) Next(ctx context.Context) (Entry, error) { return r.Cursor.Next(ctx, r.fill) }

// NextBatch returns up to max entries (at least one), waiting at the tail for
// the first one until ctx ends but not for the others.
func (r *Reader) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	return r.Cursor.NextBatch(ctx, max, r.fill)
}

// fill decodes the batch holding the next offset into buf. It returns with
// buf empty when a tick at the next offset has arrived.
func (r *Reader) fill(ctx context.Context, wait bool) error {
	for retried := false; ; {
		l := r.l
		l.mu.Lock()
		start, end, advanced, closed := l.start, l.end, l.advanced, l.closed
		seg, found := l.locate(r.Pos())
		tick := r.TickDue()
		l.mu.Unlock()
		switch {
		case closed:
			return rpcerr.ErrClosed
		case tick:
			return nil
		case r.Pos() < start:
			return &rpcerr.TruncatedError{Offset: r.Pos(), Start: start}
		case r.Pos() >= end || !found:
			if !wait {
				return ErrWouldWait
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
				return &rpcerr.CorruptError{Path: r.seg.Path, Pos: pos, Err: fmt.Errorf("reading offset %d: %w", r.Pos(), err)}
			}
			return err
		}
		took, err := r.Take(b)
		if err != nil {
			return &rpcerr.CorruptError{Path: r.seg.Path, Pos: pos, Err: err}
		}
		if took {
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
	r.sc = segment.NewScanner(f, seg.Find(r.Pos()), seg.End)
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

// Close releases the Reader's file and stops its ticks.
func (r *Reader) Close() error {
	r.closeFile()
	r.l.mu.Lock()
	delete(r.l.tickReaders, r)
	r.l.mu.Unlock()
	r.Drop()
	return nil
}
