//go:build !linux

package vfs

// writeBuffers writes bufs one Write each: writev is used on Linux only.
func (f osFile) writeBuffers(bufs [][]byte) (int64, error) { return writeEach(f, bufs) }
