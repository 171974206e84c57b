package cluster

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrOwned is wrapped by every *OwnedError.
var ErrOwned = errors.New("cluster: log owned by another node")

// OwnedError is returned by Acquire for a log that another node owns.
type OwnedError struct {
	LogID uint64
	// Owner is the node that owns the log; Addr is empty if its node key
	// was not found.
	Owner Member
}

func (e *OwnedError) Error() string {
	if e.Owner.Addr == "" {
		return fmt.Sprintf("cluster: log %d is owned by node %s", e.LogID, e.Owner.ID)
	}
	return fmt.Sprintf("cluster: log %d is owned by node %s at %s", e.LogID, e.Owner.ID, e.Owner.Addr)
}

// Is makes errors.Is(err, ErrOwned) hold.
func (e *OwnedError) Is(target error) bool { return target == ErrOwned }

// Acquire makes this node the owner of logID: it creates the log's owner key
// on the node's lease if there is none. It succeeds if the node already owns
// the log, and fails with an *OwnedError if another node does, or with
// ErrLost if the node is not Valid. The node's view shows the new owner once
// the watch delivers it.
//
// Owning a log is no promise of exclusivity: an old owner, evicted by the
// others (Suspect) or with a lease about to lapse, may not yet know that it
// has lost the log. The log's writer must be fenced with an epoch.
func (n *Node) Acquire(ctx context.Context, logID uint64) error {
	if !n.Valid() {
		return fmt.Errorf("cluster: acquire log %d: %w", logID, ErrLost)
	}
	key := n.ownerKey(logID)
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, n.self.ID, clientv3.WithLease(n.lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		n.lose(reasonGone)
		return fmt.Errorf("cluster: acquire log %d: %w", logID, ErrLost)
	}
	if err != nil {
		return fmt.Errorf("cluster: acquire log %d: %w", logID, err)
	}
	if resp.Succeeded {
		n.logger.Debug("cluster: log acquired", "node", n.self.ID, "log", logID)
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 { // cannot be: the compare saw the key
		return fmt.Errorf("cluster: acquire log %d: owner key vanished inside a transaction", logID)
	}
	o := owner{node: string(kvs[0].Value), lease: clientv3.LeaseID(kvs[0].Lease)}
	if n.ours(o) {
		return nil
	}
	// The owner's address from the view: a hint for the caller, empty if
	// the view does not have the node yet.
	m, _ := n.Member(o.node)
	m.ID = o.node
	return &OwnedError{LogID: logID, Owner: m}
}

// Release gives up the ownership of logID: it deletes the log's owner key if
// it is this node's, on this node's lease, and does nothing otherwise. Its
// assignee (see Assign) takes the log once it sees the key go.
func (n *Node) Release(ctx context.Context, logID uint64) error {
	key := n.ownerKey(logID)
	_, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", n.self.ID),
			clientv3.Compare(clientv3.LeaseValue(key), "=", n.lease)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("cluster: release log %d: %w", logID, err)
	}
	n.logger.Debug("cluster: log released", "node", n.self.ID, "log", logID)
	return nil
}
