//go:build !linux

package physical

import (
	"errors"
	"os"
)

var errNotLinux = errors.New("physical: O_DIRECT measurements need Linux")

func openDirect(path string, flag int) (*os.File, error) { return nil, errNotLinux }

func alignedBuffer(size int) ([]byte, func(), error) { return nil, nil, errNotLinux }
