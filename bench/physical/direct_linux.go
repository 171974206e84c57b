package physical

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// openDirect opens path for O_DIRECT I/O: reads and writes skip the page
// cache, so buffers, sizes and offsets must be multiples of blockBytes.
func openDirect(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_DIRECT, 0o644)
	if errors.Is(err, syscall.EINVAL) {
		return nil, fmt.Errorf("physical: the file system of %s does not support O_DIRECT (tmpfs does not): measure a directory on the disk itself", path)
	}
	return f, err
}

// alignedBuffer returns size bytes aligned to the page size, as O_DIRECT
// needs, and the function that frees them.
func alignedBuffer(size int) ([]byte, func(), error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("physical: allocate %d aligned bytes: %w", size, err)
	}
	return b, func() { syscall.Munmap(b) }, nil
}
