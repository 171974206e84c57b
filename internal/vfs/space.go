package vfs

import (
	"errors"
	"syscall"
)

// Space is what a filesystem reports of its size: the bytes an unprivileged
// process may still write (Free), and the filesystem's size (Total).
type Space struct {
	Free, Total int64
}

// spaceFS is an FS that can report its free space: the OS one (statfs(2)).
type spaceFS interface {
	space(dir string) (Space, error)
}

// SpaceOf reports the space of the filesystem that holds dir. ok is false
// for a filesystem that cannot tell (MemFS): it has no size.
func SpaceOf(fs FS, dir string) (s Space, ok bool, err error) {
	sf, ok := fs.(spaceFS)
	if !ok {
		return Space{}, false, nil
	}
	s, err = sf.space(dir)
	if errors.Is(err, errors.ErrUnsupported) {
		return Space{}, false, nil // a wrapper of a filesystem that cannot tell
	}
	return s, err == nil, err
}

// IsNoSpace reports whether err says a disk is full or a disk quota is
// used up: ENOSPC or EDQUOT.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
