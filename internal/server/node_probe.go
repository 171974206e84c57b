package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/certs"
	"github.com/ternwal/tern/internal/cluster"
	"github.com/ternwal/tern/internal/replica"
)

// probeTimeout bounds the check of one live member before a node joins.
const probeTimeout = 5 * time.Second

// probeMembers checks, before a node joins, that the live members of the
// cluster and this node accept each other: the same transport (TLS or
// not), each other's certificates (the same cluster CA), and this node a
// node principal of theirs (their replica service admits it). A node they
// would refuse must not join: it would take logs that the clients and the
// other nodes cannot reach, and sit in ensembles without receiving their
// data. A member that does not answer at all (dead, its lease not yet
// lapsed, or on its way out with its listener still open) is passed over.
func probeMembers(ctx context.Context, cli *clientv3.Client, cfg Config, st *certs.Store, logger *slog.Logger) error {
	members, err := cluster.ReadMembers(ctx, cli, cfg.EtcdRoot)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.ID == cfg.NodeID {
			continue // this node's earlier run
		}
		err := probeMember(ctx, m, st)
		switch {
		case errors.Is(err, errUnreachable):
			logger.Info("a member did not answer; not checked", "node", m.ID, "addr", m.Addr, "err", err)
		case err != nil:
			return fmt.Errorf("node %s at %s and this node do not accept each other: %w. The nodes of a cluster must all serve TLS with certificates of the same CA (--tls-client-ca), listed as node principals in the same auth file, or all run without TLS", m.ID, m.Addr, err)
		}
	}
	return nil
}

// errUnreachable is a member that could not be connected to.
var errUnreachable = errors.New("unreachable")

// probeMember is probe within probeTimeout: a member that answers nothing
// in time is unreachable.
func probeMember(parent context.Context, m cluster.Member, st *certs.Store) error {
	ctx, cancel := context.WithTimeout(parent, probeTimeout)
	defer cancel()
	err := probe(ctx, m, st)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		// A member that accepts connections and then says nothing is hung,
		// not refusing: it must not keep nodes from joining.
		return fmt.Errorf("%w: no answer within %s: %v", errUnreachable, probeTimeout, err)
	}
	return err
}

// probe connects to m as a node would to send it replica data: a TCP
// connection (errUnreachable if none), a TLS handshake with the node's
// certificate when st is not nil (alone first, so that a refusal there is
// told as such), and a call of the replica service, which only nodes may
// make.
func probe(ctx context.Context, m cluster.Member, st *certs.Store) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return fmt.Errorf("%w: %v", errUnreachable, err)
	}
	conf := nodeTLS(st, m.Addr)
	if conf != nil {
		tc := tls.Client(c, conf)
		err := tc.HandshakeContext(ctx)
		if err == nil {
			err = firstRead(ctx, tc)
		}
		tc.Close()
		var alert *net.OpError
		switch {
		case errors.As(err, &alert) && alert.Op == "remote error":
			return fmt.Errorf("it refused this node's TLS certificate: %w", err)
		case err != nil && closedEarly(err):
			// A plaintext server answers a TLS hello with bytes that are
			// not TLS; one that closes without a word is on its way out.
			return fmt.Errorf("%w: TLS handshake: %v", errUnreachable, err)
		case err != nil:
			return fmt.Errorf("TLS handshake: %w", err)
		}
	} else {
		c.Close()
	}
	conn, err := replica.Dial(m.Addr, conf)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.List(ctx, replica.SegmentID{})
	switch {
	case err == nil, errors.Is(err, rpcerr.ErrSegmentNotFound), errors.Is(err, rpcerr.ErrInvalid):
		return nil // the replica service answered this node
	case errors.Is(err, rpcerr.ErrPermissionDenied), errors.Is(err, rpcerr.ErrUnauthenticated):
		return fmt.Errorf("its replica service refuses this node: %w", err)
	case noServer(err) && conf == nil && speaksTLS(ctx, m.Addr):
		return fmt.Errorf("it serves TLS and this node does not: %w", err)
	case noServer(err):
		// The transports agree (a TLS handshake went through, or neither
		// side speaks TLS), yet the call found no server: the member is
		// on its way out (a lost lease, a shutdown) with its listener not
		// yet closed.
		return fmt.Errorf("%w: its replica service did not answer: %v", errUnreachable, err)
	default:
		return fmt.Errorf("its replica service did not answer this node: %w", err)
	}
}

// firstRead reads the first byte a TLS member sends after the handshake:
// with TLS 1.3 a member checks this node's certificate after the handshake
// has ended here, and its refusal comes as an alert on this read, where a
// gRPC server would send its settings. A member that sends nothing within
// probeTimeout is left to the replica call.
func firstRead(ctx context.Context, tc *tls.Conn) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(probeTimeout)
	}
	tc.SetReadDeadline(deadline)
	_, err := tc.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil
	}
	return err
}

// closedEarly reports whether a connection was closed by the other end
// before it said anything.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// noServer reports whether a call failed for want of a server: none at the
// other end of the connection, or one shutting down.
func noServer(err error) bool {
	return status.Code(err) == codes.Unavailable || errors.Is(err, rpcerr.ErrUnavailable) || errors.Is(err, rpcerr.ErrClosed)
}

// speaksTLS reports whether the server at addr completes a TLS handshake,
// its certificate unchecked: it tells a TLS server reached without TLS
// (which closes the connection, as a dying server would) from a server
// that does not speak TLS.
func speaksTLS(ctx context.Context, addr string) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) // only whether it speaks TLS; nothing is sent
	defer tc.Close()
	return tc.HandshakeContext(ctx) == nil
}
