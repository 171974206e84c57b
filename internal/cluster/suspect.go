package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Evicted reports whether suspecters of a member, among the other
// live members (the suspect left out), are a majority of them: then the
// member is evicted. A member suspected by one other of three is not; by
// two of three, it is; the only other of two members evicts it alone.
func Evicted(suspecters, others int) bool {
	return others > 0 && 2*suspecters > others
}

func (n *Node) suspectPrefix(id string) string  { return n.root + "suspects/" + id + "/" }
func (n *Node) suspectKey(id, by string) string { return n.suspectPrefix(id) + by }

// Suspect records in etcd that this node suspects the member id, on its
// lease lease (as the view had it), to be dead, and evicts the member if a
// majority of the other live members suspect it now: it revokes the
// member's lease, so that its nodes/ and owners/ keys vanish at once and
// the other nodes take its logs over. It reports whether this call evicted
// it. A member that no longer holds lease (gone, or back with a new
// lease) is left alone, and so is one that is leaving (Leave); and this
// node suspects nobody once it is not Valid: a node that cannot prove its
// own lease has no say. Calling it again is harmless, and counts the
// suspicions again.
//
// Eviction is safe whatever the suspicions' worth: an evicted member that
// is alive finds itself Lost, and the logs it served are fenced by their
// new owner's epoch before that owner serves them (docs/cluster.md).
func (n *Node) Suspect(ctx context.Context, id string, lease clientv3.LeaseID) (bool, error) {
	if id == n.self.ID || lease == 0 {
		return false, nil
	}
	if !n.Valid() {
		return false, fmt.Errorf("cluster: suspect %s: %w", id, ErrLost)
	}
	key, want := n.suspectKey(id, n.self.ID), strconv.FormatInt(int64(lease), 10)
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(n.nodeKey(id)), "=", lease),
			clientv3.Compare(clientv3.LeaseValue(n.nodeKey(n.self.ID)), "=", n.lease)).
		Then(
			// Put only if it is not there yet: a suspicion counted again
			// every Recheck writes nothing.
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", want)}, nil,
				[]clientv3.Op{clientv3.OpPut(key, want, clientv3.WithLease(n.lease))}),
			clientv3.OpGet(n.suspectPrefix(id), clientv3.WithPrefix()),
			clientv3.OpGet(n.nodePrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			clientv3.OpGet(n.nodeKey(id))).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		n.lose(reasonGone)
		return false, fmt.Errorf("cluster: suspect %s: %w", id, ErrLost)
	}
	if err != nil {
		return false, fmt.Errorf("cluster: suspect %s: %w", id, err)
	}
	if !resp.Succeeded {
		return false, nil // the suspect is gone, or this node's key is
	}
	live := map[string]bool{}
	for _, kv := range resp.Responses[2].GetResponseRange().GetKvs() {
		live[strings.TrimPrefix(string(kv.Key), n.nodePrefix())] = true
	}
	suspecters := 0
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		by := strings.TrimPrefix(string(kv.Key), n.suspectPrefix(id))
		if string(kv.Value) == want && live[by] && by != id {
			suspecters++
		}
	}
	others := len(live) - 1 // the suspect is live: the compare saw its key
	if kvs := resp.Responses[3].GetResponseRange().GetKvs(); len(kvs) == 1 {
		var r nodeRecord
		if json.Unmarshal(kvs[0].Value, &r) == nil && r.Leaving {
			n.logger.Debug("cluster: suspected member is leaving; not evicted", "node", n.self.ID, "suspect", id)
			return false, nil
		}
	}
	if !Evicted(suspecters, others) {
		n.logger.Info("cluster: member suspected", "node", n.self.ID, "suspect", id, "suspecters", suspecters, "others", others)
		return false, nil
	}
	if _, err := n.cli.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false, fmt.Errorf("cluster: evict %s: revoke its lease: %w", id, err)
	}
	n.logger.Warn("cluster: member evicted", "node", n.self.ID, "evicted", id, "lease", int64(lease), "suspecters", suspecters, "others", others)
	return true, nil
}

// Unsuspect withdraws this node's suspicion of the member id, if it
// recorded one.
func (n *Node) Unsuspect(ctx context.Context, id string) error {
	if _, err := n.cli.Delete(ctx, n.suspectKey(id, n.self.ID)); err != nil {
		return fmt.Errorf("cluster: withdraw the suspicion of %s: %w", id, err)
	}
	return nil
}

// Lease returns the lease of the live member id as the view has it, and
// false if the view does not have the member.
func (n *Node) Lease(id string) (clientv3.LeaseID, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.view.leases[id]
	return l, ok
}
