//go:build !linux

package physical

import (
	"errors"
	"os"
)

var errNotLinux = errors.New("physical: O_DIRECT measurements need Linux")

func openDirect(path string, flag int) (*os.File, error) { return nil, errNotLinux }

// fdatasync falls back to fsync, which also flushes timestamps.
func fdatasync(f *os.File) error { return f.Sync() }

func alignedBuffer(size int) ([]byte, func(), error) { return nil, nil, errNotLinux }
