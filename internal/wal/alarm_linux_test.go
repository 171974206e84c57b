package wal

import (
	"os"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/vfs"
)

// The alarm rings once per set, not after stop, and close ends its
// goroutine and gives its file back.
func TestAlarm(t *testing.T) {
	fds := openFiles(t)
	wake := make(chan struct{}, 1)
	a, err := newAlarm(wake)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		a.set(100 * time.Microsecond)
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatal("the alarm set for 100µs did not ring in 10s")
		}
	}
	a.set(20 * time.Millisecond)
	a.stop()
	select {
	case <-wake:
		t.Fatal("the alarm rang after stop")
	case <-time.After(100 * time.Millisecond):
	}
	a.close()
	if n := openFiles(t); n != fds {
		t.Fatalf("%d files open after close, %d before the alarm", n, fds)
	}
}

// A log's Close closes the alarm its gathers made.
func TestCloseClosesAlarm(t *testing.T) {
	l := openTestLog(t, vfs.NewMem())
	fds := openFiles(t)
	l.commitMu.Lock()
	ok := l.ringAlarm(time.Hour)
	l.commitMu.Unlock()
	if !ok {
		t.Fatal("no alarm made")
	}
	if n := openFiles(t); n != fds+1 {
		t.Fatalf("%d files open with the alarm, %d before", n, fds)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openFiles(t); n >= fds+1 {
		t.Fatalf("%d files open after Close, %d before the alarm", n, fds)
	}
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}
