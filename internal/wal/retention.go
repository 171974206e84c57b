package wal

import (
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/segment"
)

// Truncate raises the start to before, which the caller has stored durably,
// and deletes the sealed segments wholly below it. The start never moves
// back: a lower before is a no-op.
func (l *Log) Truncate(before uint64) error {
	l.mu.Lock()
	start, err := engine.RaiseStart(l.start, l.end, before)
	l.start = start
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.ApplyRetention(time.Time{}, engine.Retention{})
}

// ApplyRetention deletes the oldest sealed segments that r lets go, and
// those wholly below the start; it keeps the last segment.
func (l *Log) ApplyRetention(now time.Time, r engine.Retention) error {
	l.commitMu.Lock() // no roll adds a sealed segment meanwhile
	defer l.commitMu.Unlock()
	l.mu.Lock()
	st := engine.Stats{Start: l.start, End: l.end}
	for _, s := range l.segments() {
		st.Bytes += s.Size
	}
	keep := len(l.sealed)
	if l.active.Path == "" {
		keep-- // the last sealed segment is the last segment
	}
	segs := make([]engine.Segment, max(keep, 0))
	for i := range segs {
		s := l.sealed[i]
		segs[i] = engine.Segment{End: s.Next, Bytes: s.Size, MaxTime: s.MaxTime}
	}
	n, start := r.Expired(now, st, segs)
	drop := l.sealed[:n:n]
	l.sealed = l.sealed[n:]
	l.start = start
	l.mu.Unlock()
	for _, s := range drop {
		// Oldest first, each removal synced: a crash leaves the remaining
		// segments contiguous.
		if err := segment.Remove(l.opts.FS, s.Path); err != nil {
			return err
		}
	}
	return nil
}
