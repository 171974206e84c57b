package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// Reader is the Source of a log's readers: it reads the segment files,
// keeping the one it reads open.
type Reader struct {
	l   *Log
	seg segment.Info // the segment the scanner reads
	gen uint64       // the log's merges when seg was looked up
	f   vfs.File
	sc  *segment.Scanner
}

// NewReader returns a Reader positioned at from, which must lie between the
// log's start and end (inclusive: a Reader at the end waits for the next
// append). With ticks, the Reader also returns the time ticks appended from
// now on, in their places between the entries.
func (l *Log) NewReader(from uint64, ticks bool) (engine.Reader, error) {
	return l.readers.Start(from, ticks, l.view, &Reader{l: l})
}

// view is the log as readers see it. The caller holds mu.
func (l *Log) view() engine.View {
	return engine.View{Start: l.start, End: l.end, Closed: l.closed, Advanced: l.advanced}
}

// Fill decodes the batch holding c's next offset into c. It returns with
// nothing taken when a tick at the next offset has arrived.
func (r *Reader) Fill(ctx context.Context, c *engine.Cursor, wait bool) error {
	var gone string // the file found gone, and when
	var goneGen uint64
	for {
		l := r.l
		var seg segment.Info
		var gen uint64
		ready, err := c.Await(ctx, wait, func() engine.View {
			v := l.view()
			var found bool
			seg, found = l.locate(c.Pos())
			gen = l.merges
			v.NotYet = !found
			return v
		})
		if !ready {
			return err
		}
		if err := r.scan(seg, gen, c.Pos()); err != nil {
			if errors.Is(err, fs.ErrNotExist) && (gone != seg.Path || goneGen != gen) {
				// Deleted by truncation or retention (the start has
				// moved), or merged into the segment before it: look
				// it up again.
				gone, goneGen = seg.Path, gen
				continue
			}
			return err
		}
		b, pos, err := r.sc.Next()
		if err != nil {
			if errors.Is(err, record.ErrCorrupt) || errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
				return &rpcerr.CorruptError{Path: r.seg.Path, Pos: pos, Err: fmt.Errorf("reading offset %d: %w", c.Pos(), err)}
			}
			return err
		}
		took, err := c.Take(b)
		if err != nil {
			return &rpcerr.CorruptError{Path: r.seg.Path, Pos: pos, Err: err}
		}
		if took {
			return nil
		}
	}
}

// scan points the scanner at seg, looked up when the log had made gen
// merges, reusing the open file if seg is the one already being read (it
// may have been sealed since). After a merge, the file under a segment's
// name may be another (the merged one, holding more): it is opened again.
func (r *Reader) scan(seg segment.Info, gen, pos uint64) error {
	if r.f != nil && r.seg.Path == seg.Path && r.gen == gen {
		r.seg = seg
		r.sc.SetLimit(seg.End)
		return nil
	}
	r.Close()
	f, err := r.l.opts.FS.Open(seg.Path)
	if err != nil {
		return err
	}
	r.f, r.seg, r.gen = f, seg, gen
	r.sc = segment.NewScanner(f, seg.Find(pos), seg.End)
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

// Close releases the Reader's file.
func (r *Reader) Close() {
	if r.f != nil {
		r.f.Close()
		r.f, r.sc = nil, nil
	}
}
