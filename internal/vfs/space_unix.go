//go:build unix

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

func (osFS) space(dir string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Space{}, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	bs := int64(st.Bsize) //nolint:unconvert // its type differs by platform
	return Space{Free: int64(st.Bavail) * bs, Total: int64(st.Blocks) * bs}, nil
}
