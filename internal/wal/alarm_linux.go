package wal

import (
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ternwal/tern/internal/engine"
)

// alarm wakes a committer at a time it sets. Its timer is a timerfd read
// through the runtime's poller, which wakes within microseconds even when
// nothing else runs: the runtime's own timers can then be a millisecond
// late, and a goroutine sleeping in a system call can keep one of the
// process's Ps meanwhile.
type alarm struct {
	f    *os.File
	done chan struct{}
}

// newAlarm starts an alarm that wakes wake (engine.Wake) each time it
// rings.
func newAlarm(wake chan struct{}) (*alarm, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("timerfd_create", err)
	}
	a := &alarm{f: os.NewFile(uintptr(fd), "timerfd"), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		var expirations [8]byte
		for {
			if _, err := a.f.Read(expirations[:]); err != nil {
				return // closed (or broken: the gather's runtime timer still ends its waits)
			}
			engine.Wake(wake)
		}
	}()
	return a, nil
}

// set has the alarm ring once, after d (at once if d is not positive),
// instead of when it was set to.
func (a *alarm) set(d time.Duration) { a.settime(max(d, time.Nanosecond)) }

// stop has the alarm not ring until set again.
func (a *alarm) stop() { a.settime(0) }

func (a *alarm) settime(d time.Duration) {
	rc, err := a.f.SyscallConn()
	if err != nil {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
	rc.Control(func(fd uintptr) { unix.TimerfdSettime(int(fd), 0, &spec, nil) })
}

// close stops the alarm and waits for its goroutine to end.
func (a *alarm) close() {
	a.f.Close()
	<-a.done
}
