package engine

import (
	"fmt"
	"sync"
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

// Segment is what the retention policy knows of a segment.
type Segment struct {
	End     uint64 // the offset after its last entry
	Bytes   int64
	MaxTime int64 // its newest entry's time, in Unix nanoseconds
	Sealed  bool
}

// Expired returns how many of a log's segments, oldest first, go, and the
// log's start once they have. segs are all the log's segments, oldest
// first, and start and end its extent. From the oldest on, a sealed
// segment goes while it lies wholly below the start or r lets it go given
// the log as it would be without it; the first open segment and the last
// segment stop it.
func (r Retention) Expired(now time.Time, start, end uint64, segs []Segment) (n int, newStart uint64) {
	st := Stats{Start: start, End: end}
	for _, s := range segs {
		st.Bytes += s.Bytes
	}
	for ; n < len(segs)-1 && segs[n].Sealed; n++ {
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

// Truncate is Engine.Truncate for an engine whose mutex mu guards its start
// and end: it raises *start to before, which the caller has stored durably
// (never back, and never past *end: that is an rpcerr.ErrOutOfRange), then
// has apply delete the sealed segments wholly below the start, which is
// what the zero Retention lets go.
func Truncate(mu *sync.Mutex, start, end *uint64, before uint64, apply func(time.Time, Retention) error) error {
	mu.Lock()
	if before > *end {
		defer mu.Unlock()
		return fmt.Errorf("%w: cannot truncate before offset %d, the log ends at %d", rpcerr.ErrOutOfRange, before, *end)
	}
	*start = max(*start, before)
	mu.Unlock()
	return apply(time.Time{}, Retention{})
}
