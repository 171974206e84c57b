package cluster

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// view is a Node's copy of the nodes/ and owners/ keys at one revision.
type view struct {
	members map[string]Member
	leases  map[string]clientv3.LeaseID // of the members' nodes/ keys
	owners  map[uint64]owner
}

func newView() view {
	return view{members: map[string]Member{}, leases: map[string]clientv3.LeaseID{}, owners: map[uint64]owner{}}
}

// owner is an owners/ key's value and lease.
type owner struct {
	node  string
	lease clientv3.LeaseID
}

// Changed returns a channel that is closed at the next change of the node's
// view of membership or ownership, of the members it finds refusing
// connections (Refusing), or when the node is lost. Call it again
// for the change after that; read the view after taking the channel, so that
// no change is missed.
func (n *Node) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

// Members returns the live members, sorted by ID, as the view has them; the
// node itself is among them until it is lost.
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.SortedFunc(maps.Values(n.view.members), func(a, b Member) int {
		return strings.Compare(a.ID, b.ID)
	})
}

// Member returns the live member id, as the view has it.
func (n *Node) Member(id string) (Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.view.members[id]
	return m, ok
}

// Owner returns the owner of logID as the view has it, without I/O: a hint,
// which may lag etcd. It reports this node as owner only while the node is
// Valid. If the owner's own key is missing from the view, the Member has an
// empty Addr.
func (n *Node) Owner(logID uint64) (Member, bool) {
	valid := n.Valid()
	n.mu.Lock()
	defer n.mu.Unlock()
	o, ok := n.view.owners[logID]
	if !ok {
		return Member{}, false
	}
	if o.node == n.self.ID && !valid {
		return Member{}, false
	}
	if m, ok := n.view.members[o.node]; ok {
		return m, true
	}
	return Member{ID: o.node}, true
}

// Owned returns the logs this node owns, in increasing order, as the view has
// them: none once the node is not Valid. An Acquire or Release shows here
// once the watch has delivered it, normally within milliseconds.
func (n *Node) Owned() []uint64 {
	if !n.Valid() {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ownedLocked()
}

func (n *Node) ownedLocked() []uint64 {
	var ids []uint64
	for id, o := range n.view.owners {
		if n.ours(o) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// ours reports whether an owners/ value is this node's, on its lease: a key
// left by an earlier node with the same ID is not.
func (n *Node) ours(o owner) bool { return o.node == n.self.ID && o.lease == n.lease }

// notifyLocked wakes the waiters on Changed.
func (n *Node) notifyLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// watch keeps the view up to date from revision rev on, until ctx ends.
func (n *Node) watch(ctx context.Context, rev int64) {
	defer n.wg.Done()
	for {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range n.cli.Watch(wctx, n.viewStart(), clientv3.WithRange(n.viewEnd()), clientv3.WithRev(rev)) {
			if err := wr.Err(); err != nil { // compacted past rev, no leader, or canceled by the server
				n.logger.Debug("cluster: watch broken, reading again", "node", n.self.ID, "error", err)
				break
			}
			if len(wr.Events) > 0 {
				n.apply(wr.Events)
			}
		}
		cancel()
		// Read the keys as they are now and watch on from there.
		for {
			if ctx.Err() != nil {
				return
			}
			resp, err := n.cli.Get(ctx, n.viewStart(), clientv3.WithRange(n.viewEnd()))
			if err == nil {
				n.reset(resp.Kvs)
				rev = resp.Header.Revision + 1
				break
			}
			n.logger.Debug("cluster: reading members failed", "node", n.self.ID, "error", err)
			sleep(ctx, resyncWait)
		}
	}
}

// reset replaces the view with kvs, as read.
func (n *Node) reset(kvs []*mvccpb.KeyValue) {
	v := newView()
	for _, kv := range kvs {
		n.put(&v, kv)
	}
	n.mu.Lock()
	old := n.view
	n.view = v
	same := maps.Equal(old.members, v.members) && maps.Equal(old.leases, v.leases) && maps.Equal(old.owners, v.owners)
	if !same {
		n.notifyLocked()
	}
	_, had := old.members[n.self.ID]
	_, has := v.members[n.self.ID]
	n.mu.Unlock()
	if had && !has {
		n.lose("node key deleted")
	}
}

// apply applies the events of one watch response to the view.
func (n *Node) apply(events []*clientv3.Event) {
	n.mu.Lock()
	v := &n.view
	changed := false
	selfDeleted := false
	for _, ev := range events {
		switch ev.Type {
		case clientv3.EventTypePut:
			changed = n.put(v, ev.Kv) || changed
		case clientv3.EventTypeDelete:
			key := string(ev.Kv.Key)
			if id, ok := strings.CutPrefix(key, n.nodePrefix()); ok {
				if _, had := v.members[id]; had {
					delete(v.members, id)
					delete(v.leases, id)
					changed = true
					selfDeleted = selfDeleted || id == n.self.ID
				}
			} else if logID, ok := n.parseOwnerKey(key); ok {
				if _, had := v.owners[logID]; had {
					delete(v.owners, logID)
					changed = true
				}
			}
		}
	}
	if changed {
		n.notifyLocked()
	}
	n.mu.Unlock()
	if selfDeleted {
		n.lose("node key deleted")
	}
}

// put applies one key's new value to v and reports whether v changed.
func (n *Node) put(v *view, kv *mvccpb.KeyValue) bool {
	key := string(kv.Key)
	if id, ok := strings.CutPrefix(key, n.nodePrefix()); ok {
		var r nodeRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil || id == "" || strings.Contains(id, "/") {
			n.logger.Warn("cluster: ignoring a malformed node key", "key", key, "value", string(kv.Value))
			return false
		}
		m := Member{ID: id, Addr: r.Addr}
		lease := clientv3.LeaseID(kv.Lease)
		if old, ok := v.members[id]; ok && old == m && v.leases[id] == lease {
			return false
		}
		v.members[id], v.leases[id] = m, lease
		return true
	}
	if logID, ok := n.parseOwnerKey(key); ok {
		o := owner{node: string(kv.Value), lease: clientv3.LeaseID(kv.Lease)}
		if old, ok := v.owners[logID]; ok && old == o {
			return false
		}
		v.owners[logID] = o
		return true
	}
	return false // in the watched range, under neither prefix
}

// parseOwnerKey returns the log ID of an owners/ key. Only the key ownerKey
// writes counts: "owners/007" is not log 7's, whose key it would otherwise
// shadow in the view, and whose entry its deletion would remove.
func (n *Node) parseOwnerKey(key string) (uint64, bool) {
	s, ok := strings.CutPrefix(key, n.ownerPrefix())
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return id, err == nil && strconv.FormatUint(id, 10) == s
}

// sleep waits for d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
