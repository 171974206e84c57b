//go:build !linux

package monitoring

import "syscall"

// dieWithParent is nil where Pdeathsig does not exist: the cleanups stop
// the children.
func dieWithParent() *syscall.SysProcAttr { return nil }
