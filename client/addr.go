package client

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// DefaultPort is the port of tern serve's gRPC address by default
// (--listen 127.0.0.1:7070), and of an address given without one.
const DefaultPort = "7070"

// ParseServer reads one server address as people write it, for Options.Server
// and Options.Nodes: host:port; host alone (DefaultPort); :port (loopback);
// an IPv6 address, bracketed or not; http://host[:port] (plaintext) and
// https://host[:port], for which tls is true: the caller should use TLS
// (Options.TLS, the system's CAs if it has no other). Another scheme, a
// path, a query, a user or a port that is not 1 to 65535 is an error,
// matching ErrInvalid, that shows the forms accepted.
func ParseServer(s string) (addr string, tls bool, err error) {
	orig := s
	s = strings.TrimSpace(s)
	bad := func(why string) error {
		return fmt.Errorf("%w: server address %q: %s: use host:port (port %s when left out), or https://host:port for TLS", ErrInvalid, orig, why, DefaultPort)
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https":
			tls = true
		case "http":
		default:
			return "", false, bad(fmt.Sprintf("the scheme %s:// is not tern serve's", scheme))
		}
		s = strings.TrimSuffix(rest, "/")
	}
	if s == "" {
		return "", false, bad("no address")
	}
	if strings.ContainsAny(s, "/?#@ ") {
		return "", false, bad("an address is host:port, with no path, query or user")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: host alone, or an IPv6 address, bracketed or not.
		h := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if strings.Contains(h, ":") && net.ParseIP(h) == nil {
			return "", false, bad(strings.TrimPrefix(err.Error(), "address "+s+": "))
		}
		host, port = h, DefaultPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", false, bad(fmt.Sprintf("port %q is not a number from 1 to 65535", port))
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), tls, nil
}
