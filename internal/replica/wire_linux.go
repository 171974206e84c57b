package replica

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// userTimeout sets TCP_USER_TIMEOUT on an add connection's socket.
func userTimeout(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(keepaliveTimeout/time.Millisecond))
	})
	return errors.Join(err, serr)
}
