//go:build !linux

package replica

import "syscall"

// userTimeout leaves the socket as it is: TCP_USER_TIMEOUT is Linux's, and
// the pings find a dead peer within addKeepalive.after everywhere.
func userTimeout(network, address string, c syscall.RawConn) error { return nil }
