package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/ternwal/tern/internal/cluster"
	"github.com/ternwal/tern/internal/meta"
)

// nodeLink is the failure detector's link to another node (cluster.Peer): an
// idle gRPC connection, which the other node's death ends at once (its
// host resets it), and probes that dial its address afresh, which a host
// without the process refuses at once. The connection makes no call, so
// the node-only guard of the replica service has nothing to check; it
// dials with the node's certificate all the same, as the replica traffic
// does.
type nodeLink struct {
	addr string
	conf *tls.Config // nil without TLS
	cc   *grpc.ClientConn
}

var _ cluster.Peer = (*nodeLink)(nil)

// Keepalive of the detector's connections: as the replica connections',
// within the replica service's enforcement (replica.ServerOptions).
const (
	peerKeepaliveTime    = 10 * time.Second
	peerKeepaliveTimeout = 3 * time.Second
)

// dialPeer links this node to m, over TLS with conf when not nil.
func dialPeer(m cluster.Member, conf *tls.Config) (cluster.Peer, error) {
	creds := insecure.NewCredentials()
	if conf != nil {
		creds = credentials.NewTLS(conf)
	}
	cc, err := grpc.NewClient(m.Addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(meta.Reconnect),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: peerKeepaliveTime, Timeout: peerKeepaliveTimeout, PermitWithoutStream: true}),
	)
	if err != nil {
		return nil, fmt.Errorf("link to node %s at %s: %w", m.ID, m.Addr, err)
	}
	return &nodeLink{addr: m.Addr, conf: conf, cc: cc}, nil
}

// WaitDown returns once the connection is down: it failed to connect, or
// it was up and was lost (gRPC then makes it idle).
func (p *nodeLink) WaitDown(ctx context.Context) {
	wasUp := false
	for {
		switch s := p.cc.GetState(); s {
		case connectivity.TransientFailure, connectivity.Shutdown:
			return
		case connectivity.Idle:
			if wasUp {
				return
			}
			p.cc.Connect()
		case connectivity.Ready:
			wasUp = true
		}
		if !p.cc.WaitForStateChange(ctx, p.cc.GetState()) {
			return
		}
	}
}

// Probe connects to the node's address: a connection accepted is a node
// that lives (if perhaps paused or slow); one refused or reset is none.
// Under TLS it completes the handshake, so that the node does not count a
// failed one.
func (p *nodeLink) Probe(ctx context.Context) error {
	if p.cc.GetState() == connectivity.Ready {
		return nil
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("%w: %v", cluster.ErrRefused, err)
	}
	if err != nil {
		return err
	}
	if p.conf != nil {
		conf := p.conf.Clone()
		conf.NextProtos = []string{"h2"} // as gRPC's, which the listener expects
		tc := tls.Client(c, conf)
		_ = tc.HandshakeContext(ctx) // accepted is enough: a refusal here is no death
		c = tc
	}
	c.Close()
	return nil
}

func (p *nodeLink) Close() error { return p.cc.Close() }
