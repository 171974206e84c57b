package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeUnread is how many bytes written to pipe f its reader has not taken.
func pipeUnread(f *os.File) (int, error) {
	return unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ) // FIONREAD
}

// pipeClosed reports whether the reading end of pipe f is closed.
func pipeClosed(f *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLOUT}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&unix.POLLERR != 0
}
