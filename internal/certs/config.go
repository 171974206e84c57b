package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// ServerConfig returns a configuration for a listener of tern serve (gRPC,
// HTTP, the replica stream). Each handshake reads the Store's current
// certificate and client CAs, so a reload applies to the next connection
// without touching the open ones. TLS 1.2 is the least accepted, 1.3 is
// negotiated when the client has it, the cipher suites are Go's defaults.
// ALPN offers h2 (gRPC needs it); a client that offers no ALPN, or only
// http/1.1, still connects. With a client CA every client must present a
// certificate it issued.
//
// The Config is the caller's: fields it sets before the first handshake
// apply to every handshake (its VerifyConnection runs after the Store's
// checks), except Certificates, GetCertificate and ClientCAs, which the
// Store's material replaces, and GetConfigForClient, which must stay. With
// a client CA, ClientAuth may be lowered to tls.VerifyClientCertIfGiven: a
// certificate is then verified when a client gives one, and not asked of
// the others.
func (s *Store) ServerConfig() *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
	}
	if s.Mutual() {
		base.ClientAuth = tls.RequireAndVerifyClientCert
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return handshakeConfig(base, s.cur.Load()), nil
	}
	return base
}

// handshakeConfig returns the configuration of one handshake: base with
// the material m.
func handshakeConfig(base *tls.Config, m *material) *tls.Config {
	c := base.Clone()
	c.GetConfigForClient = nil
	c.GetCertificate = nil
	c.Certificates = []tls.Certificate{*m.cert}
	if m.pool == nil {
		return c
	}
	if c.ClientAuth != tls.VerifyClientCertIfGiven {
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	c.ClientCAs = m.pool
	next := base.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		// A resumed session's client certificate was verified against the
		// pool of the session's first handshake, which a reload may have
		// replaced since. Recent Go refuses such a resumption itself; this
		// check keeps the guarantee without relying on it. A client that
		// gave none, where none is required, has none to check.
		if cs.DidResume && (len(cs.PeerCertificates) > 0 || c.ClientAuth == tls.RequireAndVerifyClientCert) {
			if err := verifyPeer(cs, m.pool, "", x509.ExtKeyUsageClientAuth); err != nil {
				return err
			}
		}
		if next != nil {
			return next(cs)
		}
		return nil
	}
	return c
}

// ClientConfig returns a configuration for a node that dials another node:
// it presents the Store's current certificate as its client certificate,
// and accepts only a server whose certificate verifies against the current
// client CAs (the cluster's CA, which issues every node's certificate) for
// serverName, a host name or an IP address, the one dialed. An empty
// serverName takes the host name the connection sent as SNI (the one
// tls.Dial or gRPC's credentials set from the address dialed); an IP
// address is sent as none, so a node dialed by IP is refused unless
// serverName names it. Without a client CA
// the server's certificate is verified against the system's roots. Each
// handshake reads the current material, so a reloaded certificate or CA
// applies to the next connection. TLS 1.2 is the least accepted. ALPN is
// left to the caller (gRPC's credentials add h2).
func (s *Store) ClientConfig(serverName string) *tls.Config {
	if h, _, err := net.SplitHostPort(serverName); err == nil {
		serverName = h // a host:port, given by mistake
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
		// Go's own verification would read a fixed RootCAs pool, which a
		// reload would not reach: VerifyConnection does it in full instead,
		// on every handshake, resumed ones included.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			name := serverName
			if name == "" {
				name = cs.ServerName
			}
			if name == "" {
				return errors.New("certs: no server name to verify the server's certificate against: give ClientConfig the host name or IP address dialed")
			}
			return verifyPeer(cs, s.cur.Load().pool, name, x509.ExtKeyUsageServerAuth)
		},
	}
}

// verifyPeer verifies the peer's chain of cs against roots (nil: the
// system's), for name when it is not empty (a host name or an IP address),
// for the extended key usage.
func verifyPeer(cs tls.ConnectionState, roots *x509.CertPool, name string, usage x509.ExtKeyUsage) error {
	who := "client"
	if usage == x509.ExtKeyUsageServerAuth {
		who = "server"
	}
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("certs: the %s presented no certificate", who)
	}
	leaf := cs.PeerCertificates[0]
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: poolOf(cs.PeerCertificates[1:]),
		DNSName:       name,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return fmt.Errorf("certs: the %s's certificate (subject %q) is refused: %w", who, leaf.Subject, err)
	}
	return nil
}
