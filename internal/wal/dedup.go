package wal

import (
	"errors"
	"fmt"
	"io"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
)

// restoreDedup rebuilds the log's deduplication table from its newest
// batches, engine.DedupReachBytes of them or more: the newest segments,
// the oldest of them read from the indexed batch at or before where the
// reach begins. Open calls it once the segments are known.
func (l *Log) restoreDedup() error {
	type part struct {
		seg segment.Info
		pos int64
	}
	var parts []part
	all := l.segments()
	reach := int64(engine.DedupReachBytes)
	for i := len(all) - 1; i >= 0 && reach > 0; i-- {
		s := all[i]
		pos := int64(segment.HeaderBytes)
		if s.End-pos > reach {
			for _, ie := range s.Index {
				if ie.Pos > s.End-reach {
					break
				}
				pos = ie.Pos
			}
		}
		if s.End > pos {
			parts = append(parts, part{s, pos})
			reach -= s.End - pos
		}
	}
	var scratch []record.Append
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		f, err := l.opts.FS.Open(p.seg.Path)
		if err != nil {
			return fmt.Errorf("wal: read %s for deduplication: %w", p.seg.Path, err)
		}
		sc := segment.NewScanner(f, p.pos, p.seg.End)
		for {
			b, pos, err := sc.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				if errors.Is(err, record.ErrCorrupt) || errors.Is(err, io.ErrUnexpectedEOF) {
					return &rpcerr.CorruptError{Path: p.seg.Path, Pos: pos, Err: fmt.Errorf("reading back the appends to deduplicate: %w", err)}
				}
				return fmt.Errorf("wal: read %s for deduplication: %w", p.seg.Path, err)
			}
			scratch = l.queue.Dedup.RestoreBatch(b, scratch)
		}
		f.Close()
	}
	l.queue.SetEnd(l.tail)
	return nil
}
