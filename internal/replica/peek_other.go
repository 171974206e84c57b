//go:build !unix

package replica

import "net"

// peekPreface reports false: without MSG_PEEK this port serves gRPC only,
// and add streams cannot reach it.
func peekPreface(c net.Conn) (bool, error) { return false, nil }
