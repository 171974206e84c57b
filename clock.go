package tern

import (
	"sync/atomic"
	"time"
)

// appendClockAnchor is how long the append clock reads the wall clock
// through the monotonic one before it reads the wall clock again.
const appendClockAnchor = 100 * time.Millisecond

// appendAnchor is the append clock's last reading of the wall clock.
var appendAnchor atomic.Pointer[time.Time]

// appendTime returns the time an append stamps on its entries that have
// none, in Unix nanoseconds. It is the wall clock read at most
// appendClockAnchor ago plus the monotonic time since: one clock read
// instead of time.Now's two, on the path of every append. Between two
// readings of the wall clock it does not go back, and it follows a step
// of the wall clock within appendClockAnchor. It is safe for concurrent
// use.
func appendTime() int64 {
	a := appendAnchor.Load()
	if a != nil {
		if d := time.Since(*a); d >= 0 && d < appendClockAnchor {
			return a.UnixNano() + int64(d)
		}
	}
	now := time.Now()
	appendAnchor.Store(&now)
	return now.UnixNano()
}
