package engine

import (
	"testing"
	"time"
)

func TestRetentionExpired(t *testing.T) {
	now := time.Unix(1000, 0)
	old, fresh := now.Add(-time.Hour).UnixNano(), now.UnixNano()
	// Three sealed segments of 10 entries and 100 bytes, then an open one.
	segs := func(open bool) []Segment {
		return []Segment{
			{End: 10, Bytes: 100, MaxTime: old, Sealed: true},
			{End: 20, Bytes: 100, MaxTime: old, Sealed: true},
			{End: 30, Bytes: 100, MaxTime: fresh, Sealed: true},
			{End: 30, Bytes: 0, Sealed: !open},
		}
	}
	for _, tc := range []struct {
		name      string
		r         Retention
		start     uint64
		open      bool
		n         int
		wantStart uint64
	}{
		{"zero keeps all", Retention{}, 0, true, 0, 0},
		{"zero drops below the start", Retention{}, 15, true, 1, 15},
		{"below the start, all sealed, not the last", Retention{}, 30, false, 3, 30},
		{"age", Retention{Age: time.Minute, Keep: 30}, 0, true, 2, 20},
		{"keep pins", Retention{Age: time.Minute, Keep: 15}, 0, true, 1, 10},
		{"bytes keep at least the bound", Retention{Bytes: 150, Keep: 30}, 0, true, 1, 10},
		{"entries", Retention{Entries: 10, Keep: 30}, 0, true, 2, 20},
		{"entries, at least one kept", Retention{Entries: 1, Keep: 30}, 0, true, 2, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, start := tc.r.Expired(now, tc.start, 30, segs(tc.open))
			if n != tc.n || start != tc.wantStart {
				t.Fatalf("Expired = %d, start %d; want %d, start %d", n, start, tc.n, tc.wantStart)
			}
		})
	}
}
