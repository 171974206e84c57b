//go:build !linux

package vfs

import "os"

// Datasync falls back to fsync where fdatasync is not available.
func Datasync(f *os.File) error { return f.Sync() }
