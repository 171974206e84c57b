package engine

import (
	"fmt"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
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
	// not delete them. Truncation does. Zero pins everything, so the zero
	// Retention deletes only the segments wholly below the start.
	Keep uint64
}

// Segment is what the retention policy knows of a sealed segment.
type Segment struct {
	End     uint64 // the offset after its last entry
	Bytes   int64
	MaxTime int64 // its newest entry's time, in Unix nanoseconds
}

// Expired returns how many of segs, oldest first, go, and the log's start
// once they have: from the oldest on, a segment goes while it lies wholly
// below the start or r lets it go given the log as it would be without it.
// log gives the log's start, end and bytes (of every segment); segs are its
// sealed segments that may go, oldest first, which never include its last
// segment.
func (r Retention) Expired(now time.Time, log Stats, segs []Segment) (n int, start uint64) {
	st := log
	for ; n < len(segs); n++ {
		s := segs[n]
		rest := Stats{Start: max(st.Start, s.End), End: st.End, Bytes: st.Bytes - s.Bytes}
		if s.End > st.Start && !r.lets(now, s, rest) {
			break
		}
		st = rest
	}
	return n, st.Start
}

// lets reports whether r lets s go, given the log without it (rest).
func (r Retention) lets(now time.Time, s Segment, rest Stats) bool {
	if s.End > r.Keep {
		return false
	}
	return (r.Age > 0 && now.Sub(time.Unix(0, s.MaxTime)) > r.Age) ||
		(r.Bytes > 0 && rest.Bytes >= r.Bytes) ||
		(r.Entries > 0 && rest.End-rest.Start >= r.Entries)
}

// RaiseStart returns the start of a log that holds [start, end) once it is
// truncated before before: the start never moves back, and never past the
// end (an rpcerr.ErrOutOfRange).
func RaiseStart(start, end, before uint64) (uint64, error) {
	if before > end {
		return start, fmt.Errorf("%w: cannot truncate before offset %d, the log ends at %d", rpcerr.ErrOutOfRange, before, end)
	}
	return max(start, before), nil
}
