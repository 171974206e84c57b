//go:build unix

package loadgen

import "syscall"

func syncAll() { syscall.Sync() }
