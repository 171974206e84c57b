package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"syscall"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/ternwal/tern/internal/certs"
	"github.com/ternwal/tern/internal/replica"
)

// handshakeTimeout bounds a TLS handshake on a server's listener.
const handshakeTimeout = 10 * time.Second

// maxHandshakes bounds the TLS handshakes a listener runs at once: a client
// opening connections and sending nothing holds one each, for
// handshakeTimeout at most, and past the bound new connections wait in
// the kernel's backlog.
const maxHandshakes = 256

// tlsListener is a listener whose connections come out of Accept as
// *tls.Conn with their handshake done, so that what sits on top (the
// replica listener, which sorts them by the protocol their client chose,
// and gRPC, through handshakenCreds) sees the client's identity. Handshakes
// run in goroutines of their own: a slow client does not hold the others
// up.
type tlsListener struct {
	net.Listener
	conf   *tls.Config
	logger *slog.Logger
	failed func() // counts a failed handshake

	conns chan *tls.Conn
	slots chan struct{} // maxHandshakes
	done  chan struct{} // closed once the inner listener failed; err is set before
	err   error
}

func newTLSListener(l net.Listener, conf *tls.Config, logger *slog.Logger, failed func()) *tlsListener {
	tl := &tlsListener{Listener: l, conf: conf, logger: logger, failed: failed,
		conns: make(chan *tls.Conn), slots: make(chan struct{}, maxHandshakes), done: make(chan struct{})}
	go tl.run()
	return tl
}

func (tl *tlsListener) run() {
	defer close(tl.done)
	for {
		tl.slots <- struct{}{}
		c, err := tl.Listener.Accept()
		if err != nil {
			<-tl.slots
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			tl.err = err
			return
		}
		go tl.handshake(c)
	}
}

func (tl *tlsListener) handshake(c net.Conn) {
	tc := tls.Server(c, tl.conf)
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	<-tl.slots
	if err != nil {
		tl.failed()
		tl.logger.Debug("tls handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	select {
	case tl.conns <- tc:
	case <-tl.done:
		tc.Close()
	}
}

func (tl *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-tl.conns:
		return c, nil
	case <-tl.done:
		return nil, tl.err
	}
}

// handshakenCreds are gRPC's server credentials for the connections of a
// tlsListener: their handshake is done, and the credentials only report
// the TLS state, so that handlers find the client's certificate in
// peer.AuthInfo as gRPC's own TLS credentials would put it.
type handshakenCreds struct{}

func (handshakenCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil, nil, fmt.Errorf("server: a connection without TLS reached a TLS listener")
	}
	st := tc.ConnectionState()
	return c, credentials.TLSInfo{State: st, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (handshakenCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("server: handshakenCreds are a server's")
}

func (handshakenCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c handshakenCreds) Clone() credentials.TransportCredentials { return c }

func (handshakenCreds) OverrideServerName(string) error { return nil }

// serverTLS is st's server configuration offering the application
// protocols protos; under mTLS with optional, a client certificate is
// verified when one is given and not required.
func serverTLS(st *certs.Store, optional bool, protos ...string) *tls.Config {
	c := st.ServerConfig()
	c.NextProtos = protos
	if optional && st.Mutual() {
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}

// listenerTLS is the TLS configuration of the gRPC listener: clients speak
// h2, and the other nodes of a cluster open their replica add streams with
// their own protocol. Under mTLS, a client certificate is required, unless
// an auth file lets clients prove who they are with a token instead
// (optional is true); the replica service then requires one itself.
func listenerTLS(st *certs.Store, optional bool) *tls.Config {
	return serverTLS(st, optional, "h2", replica.AddProtocol)
}

// httpTLS is the TLS configuration of the HTTP listener: under mTLS a
// client certificate is verified when one is given, but not required, so
// that health probes need none; /metrics and /debug/pprof/ ask for an
// identity themselves (httpGuard).
func httpTLS(st *certs.Store) *tls.Config {
	return serverTLS(st, true, "h2", "http/1.1")
}
