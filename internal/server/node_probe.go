package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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
// lapsed) is passed over.
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
		tc.Close()
		if err != nil {
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
	default:
		return fmt.Errorf("its replica service did not answer this node (a TLS server reached without TLS, or the reverse?): %w", err)
	}
}
