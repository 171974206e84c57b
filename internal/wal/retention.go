package wal

import (
	"time"

	"github.com/ternwal/tern/internal/engine"
)

// ApplyRetention is engine.Engine's. It removes segment files oldest first,
// each removal synced, so a crash leaves the remaining ones contiguous; up
// to Options.ReuseSegments of the files go to the free directory, to be
// written over by new segments (dropSegment).
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
		if err := l.dropSegment(s); err != nil {
			return err
		}
	}
	return nil
}
