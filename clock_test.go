package tern

import (
	"testing"
	"time"
)

// The append clock reads the wall clock: an entry appended without a time
// is stamped with the time of its append.
func TestAppendTimeFollowsTheWallClock(t *testing.T) {
	// Slack for the wall clock's slewing between two of its readings
	// (at most 500 ppm of appendClockAnchor), not for speed.
	const slack = int64(time.Millisecond)
	for i := range 1000 {
		before := time.Now().UnixNano()
		got := appendTime()
		after := time.Now().UnixNano()
		if got < before-slack || got > after+slack {
			t.Fatalf("append %d: stamped %d, outside the wall clock's [%d, %d]", i, got, before, after)
		}
	}
}
