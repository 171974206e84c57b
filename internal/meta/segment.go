package meta

// What both stores share about segments: the record (described at the top of
// bolt.go), the rules of SealSegment and ReplaceObjects, and the errors.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"
)

var (
	errSealed      = errors.New("segment to create is sealed")
	errNotSealed   = errors.New("segment is not sealed")
	errPendingBase = errors.New("a pending segment's base is not known: create it with base 0")
)

// The range of times that int64 nanoseconds since the Unix epoch hold.
var (
	minCreated = time.Unix(0, math.MinInt64)
	maxCreated = time.Unix(0, math.MaxInt64)
)

// segmentRecord is the persisted form of a Segment.
type segmentRecord struct {
	V         int    `json:"v"`
	Epoch     uint64 `json:"epoch"`
	Base      uint64 `json:"base"`
	CreatedNS *int64 `json:"created_ns"`
	Sealed    bool   `json:"sealed"`
	// Pending is left out unless set: records of other segments read as
	// they did before it existed.
	Pending   bool           `json:"pending,omitempty"`
	End       uint64         `json:"end"`
	Bytes     int64          `json:"bytes"`
	MaxTimeNS int64          `json:"max_time_ns"`
	Objects   []objectRecord `json:"objects"`
	Ensemble  []string       `json:"ensemble,omitempty"`
	AckQuorum int            `json:"ack_quorum,omitempty"`
	// LogicalBytes is left out where it is Bytes: records of segments
	// without compression stay as they were, and an absent one reads as
	// Bytes.
	LogicalBytes int64 `json:"logical_bytes,omitempty"`
}

// objectRecord is the persisted form of a SegmentObject.
type objectRecord struct {
	Key   string `json:"key"`
	Base  uint64 `json:"base"`
	Bytes int64  `json:"bytes"`
}

// encodeSegment returns the segment record for s; s.Seq is the key and is
// not encoded. It refuses a Created that nanoseconds cannot hold and an
// object key that is not UTF-8, which would not read back as they are.
func encodeSegment(s Segment) ([]byte, error) {
	r := segmentRecord{
		V:         recordVersion,
		Epoch:     s.Epoch,
		Base:      s.Base,
		Sealed:    s.Sealed,
		Pending:   s.Pending,
		End:       s.End,
		Bytes:     s.Bytes,
		MaxTimeNS: s.MaxTime,
		Ensemble:  s.Ensemble,
		AckQuorum: s.AckQuorum,
	}
	if lb := logicalOf(s); lb != s.Bytes {
		r.LogicalBytes = lb
	}
	if !s.Created.IsZero() {
		if s.Created.Before(minCreated) || s.Created.After(maxCreated) {
			return nil, fmt.Errorf("encode segment record: created %v out of range", s.Created)
		}
		ns := s.Created.UnixNano()
		r.CreatedNS = &ns
	}
	if s.Objects != nil {
		r.Objects = make([]objectRecord, len(s.Objects))
	}
	for i, o := range s.Objects {
		if !utf8.ValidString(o.Key) {
			return nil, fmt.Errorf("encode segment record: object key %q is not UTF-8", o.Key)
		}
		r.Objects[i] = objectRecord(o)
	}
	return json.Marshal(r)
}

// decodeSegment parses a segment record into a Segment without its Seq. The
// result does not alias v.
func decodeSegment(v []byte) (Segment, error) {
	var r segmentRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return Segment{}, fmt.Errorf("decode segment record: %w", err)
	}
	if r.V != recordVersion {
		return Segment{}, fmt.Errorf("decode segment record: unsupported version %d", r.V)
	}
	s := Segment{
		Epoch:     r.Epoch,
		Base:      r.Base,
		Sealed:    r.Sealed,
		Pending:   r.Pending,
		End:       r.End,
		Bytes:     r.Bytes,
		MaxTime:   r.MaxTimeNS,
		AckQuorum: r.AckQuorum,
	}
	s.LogicalBytes = max(r.LogicalBytes, r.Bytes)
	if len(r.Ensemble) > 0 { // "ensemble":[] is none, as encodeSegment leaves it out
		s.Ensemble = r.Ensemble
	}
	if r.CreatedNS != nil {
		s.Created = time.Unix(0, *r.CreatedNS).UTC()
	}
	if r.Objects != nil {
		s.Objects = make([]SegmentObject, len(r.Objects))
	}
	for i, o := range r.Objects {
		s.Objects[i] = SegmentObject(o)
	}
	return s, nil
}

// encodeNewSegment is encodeSegment for CreateSegment, which refuses a
// sealed segment.
func encodeNewSegment(s Segment) ([]byte, error) {
	if s.Sealed {
		return nil, errSealed
	}
	if s.Pending && s.Base != 0 {
		return nil, errPendingBase
	}
	return encodeSegment(s)
}

// checkNewAfter applies CreateSegment's rule on the newest stored segment
// last (nil if there is none) to s.
func checkNewAfter(last *Segment, s Segment) error {
	switch {
	case last != nil && last.Seq >= s.Seq:
		return ErrSegmentExist
	case s.Pending:
		if last == nil || last.Sealed || last.Pending || last.Seq+1 != s.Seq {
			return ErrPending
		}
	case last != nil && !last.Sealed:
		return ErrSegmentExist
	}
	return nil
}

// activate gives the pending segment next, which follows the segment just
// sealed at end, its Base. It reports whether next changed.
func activate(next *Segment, end uint64) bool {
	if !next.Pending {
		return false
	}
	next.Base, next.Pending = end, false
	return true
}

// seal applies SealSegment's rule to the stored segment cur: a sealed one
// stays as it is, an open one becomes s if s has its Epoch and Base, with
// the Ensemble it was created with. It
// reports whether cur changed.
func seal(cur *Segment, s Segment) (bool, error) {
	if cur.Sealed {
		return false, nil
	}
	if cur.Pending {
		return false, ErrPending
	}
	if s.Epoch != cur.Epoch || s.Base != cur.Base {
		return false, fmt.Errorf("epoch %d and base %d are not the stored %d and %d",
			s.Epoch, s.Base, cur.Epoch, cur.Base)
	}
	s.Ensemble, s.AckQuorum = cur.Ensemble, cur.AckQuorum // fixed at creation
	s.LogicalBytes = logicalOf(s)
	*cur = s
	return true, nil
}

// logicalOf is s.LogicalBytes as it is stored: at least s.Bytes.
func logicalOf(s Segment) int64 {
	return max(s.LogicalBytes, s.Bytes)
}

// replaceObjects applies ReplaceObjects' rule to the stored segment cur.
// No objects, nil or empty, are the same.
func replaceObjects(cur *Segment, old, new []SegmentObject) error {
	if !cur.Sealed {
		return errNotSealed
	}
	if !slices.Equal(cur.Objects, old) {
		return ErrConflict
	}
	cur.Objects = new
	cur.Ensemble, cur.AckQuorum = nil, 0
	uncompressed := logicalOf(*cur) == cur.Bytes
	cur.Bytes = 0
	for _, o := range new {
		cur.Bytes += o.Bytes
	}
	// The objects hold the same batches: the bytes appended do not change.
	if uncompressed {
		cur.LogicalBytes = cur.Bytes
	}
	cur.LogicalBytes = logicalOf(*cur)
	return nil
}

// wrapSegment is wrap for an operation on segment seq of log.
func wrapSegment(op, log string, seq uint64, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return wrap(op, log, err)
	case errors.Is(err, ErrSegmentNotFound), errors.Is(err, ErrSegmentExist),
		errors.Is(err, ErrStaleEpoch), errors.Is(err, ErrConflict), errors.Is(err, ErrPending):
		return fmt.Errorf("%w: segment %d of log %q", err, seq, log)
	default:
		return fmt.Errorf("meta: %s %d of log %q: %w", op, seq, log, err)
	}
}
