package vfs

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// maxIovecs is how many buffers one writev takes (IOV_MAX on Linux).
const maxIovecs = 1024

// writeBuffers writes bufs with writev, as many calls as they need.
func (f osFile) writeBuffers(bufs [][]byte) (int64, error) {
	rc, err := f.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var total int64
	for len(bufs) > 0 {
		iov := bufs[:min(len(bufs), maxIovecs)]
		bufs = bufs[len(iov):]
		want := 0
		for _, b := range iov {
			want += len(b)
		}
		if want == 0 {
			continue
		}
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			for {
				n, werr = unix.Writev(int(fd), iov)
				if werr != unix.EINTR {
					return true
				}
			}
		}); err != nil {
			return total, err
		}
		if werr != nil {
			return total, &os.PathError{Op: "writev", Path: f.f.Name(), Err: werr}
		}
		total += int64(n)
		if n == want {
			continue
		}
		if n == 0 {
			return total, &os.PathError{Op: "writev", Path: f.f.Name(), Err: io.ErrShortWrite}
		}
		// A short write: the rest of this call's buffers one by one
		// (Write retries until done or an error).
		for _, b := range iov {
			if n >= len(b) {
				n -= len(b)
				continue
			}
			k, err := f.f.Write(b[n:])
			total += int64(k)
			if err != nil {
				return total, err
			}
			n = 0
		}
	}
	return total, nil
}
