package wal

import (
	"fmt"
	"time"

	"github.com/ternwal/tern/client/rpcerr"

	"github.com/ternwal/tern/internal/segment"
)

// Retention bounds what a log keeps. Zero fields do not bound anything.
// Space is reclaimed by deleting whole sealed segments, oldest first, and a
// segment goes only if what remains without it still meets the bound, so a
// log keeps at least Bytes and Entries and up to one segment more; the last
// segment is never deleted.
type Retention struct {
	Age     time.Duration // delete segments whose newest entry is older
	Bytes   int64         // delete the oldest segment while the rest hold at least this many bytes
	Entries uint64        // delete the oldest segment while the rest hold at least this many entries
	// Keep pins the segments holding offsets at or above it (the lowest
	// cursor of the subscriptions that pin retention): the bounds above do
	// not delete them. Truncation does. Zero pins everything.
	Keep uint64
}

// Truncate raises the start to before, which the caller has stored durably,
// and deletes the sealed segments wholly below it. The start never moves
// back: a lower before is a no-op.
func (l *Log) Truncate(before uint64) error {
	l.mu.Lock()
	if before > l.end {
		end := l.end
		l.mu.Unlock()
		return fmt.Errorf("%w: cannot truncate before offset %d, the log ends at %d", rpcerr.ErrOutOfRange, before, end)
	}
	l.start = max(l.start, before)
	l.mu.Unlock()
	return l.deleteSealed(func(segment.Info, Stats) bool { return false })
}

// ApplyRetention deletes the oldest sealed segments that r says may go, and
// those wholly below the start.
func (l *Log) ApplyRetention(now time.Time, r Retention) error {
	return l.deleteSealed(func(s segment.Info, rest Stats) bool {
		if s.Next > r.Keep {
			return false
		}
		return (r.Age > 0 && now.Sub(time.Unix(0, s.MaxTime)) > r.Age) ||
			(r.Bytes > 0 && rest.Bytes >= r.Bytes) ||
			(r.Entries > 0 && rest.End-rest.Start >= r.Entries)
	})
}

// deleteSealed deletes sealed segments from the oldest on while they lie
// wholly below the start or expired says they may go, given the log's stats
// as they would be without them (rest). It keeps the last segment.
func (l *Log) deleteSealed(expired func(segment.Info, Stats) bool) error {
	l.commitMu.Lock() // no roll adds a sealed segment meanwhile
	defer l.commitMu.Unlock()
	l.mu.Lock()
	st := Stats{Start: l.start, End: l.end}
	for _, s := range l.segments() {
		st.Bytes += s.Size
	}
	keep := len(l.sealed)
	if l.active.Path == "" {
		keep-- // the last sealed segment is the last segment
	}
	n := 0
	for ; n < keep; n++ {
		s := l.sealed[n]
		rest := Stats{Start: max(st.Start, s.Next), End: st.End, Bytes: st.Bytes - s.Size}
		if s.Next > st.Start && !expired(s, rest) {
			break
		}
		st = rest
	}
	drop := l.sealed[:n:n]
	l.sealed = l.sealed[n:]
	l.start = st.Start
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
