package wal

import (
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/segment"
)

// ApplyRetention is engine.Engine's. It removes segment files oldest first,
// each removal synced, so a crash leaves the remaining ones contiguous.
func (l *Log) ApplyRetention(now time.Time, r engine.Retention) error {
	l.commitMu.Lock() // no roll adds a sealed segment meanwhile
	defer l.commitMu.Unlock()
	l.mu.Lock()
	all := l.segments()
	segs := make([]engine.Segment, len(all))
	for i, s := range all {
		segs[i] = engine.Segment{End: s.Next, Bytes: s.Size, MaxTime: s.MaxTime, Sealed: i < len(l.sealed)}
	}
	n, start := r.Expired(now, l.start, l.end, segs)
	drop := l.sealed[:n:n]
	l.sealed = l.sealed[n:]
	l.start = start
	l.mu.Unlock()
	for _, s := range drop {
		if err := segment.Remove(l.opts.FS, s.Path); err != nil {
			return err
		}
	}
	return nil
}
