package driver

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A fail-over that does not complete says how many appends failed by the
// deadline, not by the last acknowledgement before it.
func TestAckedAfterTellsFailuresAtDeadline(t *testing.T) {
	ap := &appender{changed: make(chan struct{}), done: make(chan struct{})}
	ap.add(timedAck{time.Now(), time.Now()}) // before the kill
	killed := time.Now().Add(time.Millisecond)
	go func() {
		time.Sleep(20 * time.Millisecond) // once ackedAfter waits
		ap.fail("append", context.DeadlineExceeded)
		ap.fail("open", context.DeadlineExceeded)
	}()
	_, err := ap.ackedAfter(killed, 1, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "0 appends acknowledged") ||
		!strings.Contains(err.Error(), "2 errors: 1 append_timeout, 1 open_timeout; the first error: context deadline exceeded") {
		t.Fatalf("ackedAfter with no acknowledgement and two failures: %v", err)
	}
}
