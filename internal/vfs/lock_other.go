//go:build !unix

package vfs

import (
	"errors"
	"io"
	"os"
)

func lockFile(name string) (io.Closer, error) {
	return nil, &os.PathError{Op: "lock", Path: name, Err: errors.ErrUnsupported}
}
