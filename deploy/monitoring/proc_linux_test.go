package monitoring

import "syscall"

// dieWithParent makes a child process end with the test binary, were it
// killed before its cleanups ran.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
