package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
)

// dedupReach is engine.DedupReachBytes, which tests lower.
var dedupReach int64 = engine.DedupReachBytes

// loadDedup rebuilds the log's deduplication table, the first time an
// append with a producer needs it, from its newest batches: dedupReach
// bytes of them or more, the oldest segment read from its indexed batch at
// or before where the reach begins. Appends of producers wait for it (they
// call it first); the committer goes on meanwhile, and what it commits
// after the segments were looked at holds no append of a producer.
func (l *Log) loadDedup() error {
	return l.dedupLoad.Ensure(engine.DedupDeep, func(int) error {
		for {
			l.mu.Lock()
			all, gen := l.segments(), l.merges
			l.mu.Unlock()
			found, gone, err := l.readApplied(all)
			if err != nil {
				return err
			}
			l.mu.Lock()
			if gone && l.merges != gen {
				// A file was merged into another meanwhile, not
				// truncated away: read the segments as they are now.
				l.mu.Unlock()
				continue
			}
			l.queue.Dedup.RestoreAll(found)
			l.mu.Unlock()
			return nil
		}
	})
}

// readApplied returns the appends of producers in the newest batches of
// segs, as acknowledged, oldest first, and whether the file of one of segs
// was gone (it is left out).
func (l *Log) readApplied(segs []segment.Info) (found []engine.Applied, gone bool, _ error) {
	type part struct {
		seg segment.Info
		pos int64
	}
	var parts []part
	reach := dedupReach
	for i := len(segs) - 1; i >= 0 && reach > 0; i-- {
		s := segs[i]
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
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		f, err := l.opts.FS.Open(p.seg.Path)
		if errors.Is(err, fs.ErrNotExist) {
			gone = true
			continue // deleted by a truncation since (below the start), or merged
		}
		if err != nil {
			return nil, false, fmt.Errorf("wal: read %s for deduplication: %w", p.seg.Path, err)
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
					return nil, false, &rpcerr.CorruptError{Path: p.seg.Path, Pos: pos, Err: fmt.Errorf("reading back the appends to deduplicate: %w", err)}
				}
				return nil, false, fmt.Errorf("wal: read %s for deduplication: %w", p.seg.Path, err)
			}
			found = engine.AppliedIn(b, found)
		}
		f.Close()
	}
	return found, gone, nil
}
