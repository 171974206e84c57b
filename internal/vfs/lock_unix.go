//go:build unix

package vfs

import (
	"io"
	"os"
	"syscall"
)

// lockFile takes flock(2) on the open file. The lock belongs to the open file
// description, so a second lockFile of the same path in this process fails
// too, and closing the file releases it.
func lockFile(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if lerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case lerr == syscall.EWOULDBLOCK:
		f.Close()
		return nil, &os.PathError{Op: "lock", Path: name, Err: ErrLocked}
	case lerr != nil:
		f.Close()
		return nil, &os.PathError{Op: "lock", Path: name, Err: lerr}
	}
	return f, nil
}
