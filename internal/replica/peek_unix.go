//go:build unix

package replica

import (
	"net"
	"syscall"
)

// peekPreface waits until c has sent as many bytes as addPreface, or ended,
// and reports whether they are addPreface. The bytes stay in the socket,
// for whoever reads c next. c's read deadline applies.
func peekPreface(c net.Conn) (bool, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, err
	}
	var (
		b    [len(addPreface)]byte
		n    int
		perr error
	)
	err = rc.Read(func(fd uintptr) bool {
		n, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if perr == syscall.EAGAIN || perr == syscall.EINTR {
			perr = nil
			return false // wait until it is readable
		}
		// Fewer bytes than the preface: wait for more.
		return perr != nil || n <= 0 || n == len(b)
	})
	if err == nil {
		err = perr
	}
	return err == nil && n == len(b) && b == addPreface, err
}
