package cluster

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// FuzzView applies an arbitrary key and value, as a read or a watch would
// deliver them, to a node's view, then deletes the key. Nothing may panic;
// the view takes a nodes/ key only as a member whose ID is the rest of the
// key, not empty and without '/', and whose address is the record's, and an
// owners/ key only if it is the key Node writes for that log ID (decimal, as
// ownerKey formats it); anything else leaves the view as it was. Applying
// the same put again changes nothing, and deleting the key empties the view
// again.
func FuzzView(f *testing.F) {
	rec, err := json.Marshal(nodeRecord{Addr: "10.0.0.1:7070"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("/tern/nodes/n1", rec, int64(5))
	f.Add("/tern/nodes/self", rec, int64(5))
	f.Add("/tern/nodes/a/b", rec, int64(5))
	f.Add("/tern/nodes/", []byte(`null`), int64(0))
	f.Add("/tern/owners/7", []byte("n1"), int64(5))
	f.Add("/tern/owners/007", []byte("n1"), int64(5))
	f.Add("/tern/owners/18446744073709551616", []byte("n1"), int64(5))
	f.Add("/tern/ownersx", []byte("n1"), int64(5))
	f.Fuzz(func(t *testing.T, key string, value []byte, lease int64) {
		n := &Node{
			root:    "/tern/",
			self:    Member{ID: "self", Addr: "127.0.0.1:1"},
			logger:  slog.New(slog.DiscardHandler),
			lost:    make(chan struct{}),
			changed: make(chan struct{}),
		}
		n.reset(nil)
		kv := &mvccpb.KeyValue{Key: []byte(key), Value: value, Lease: lease}
		n.apply([]*clientv3.Event{{Type: clientv3.EventTypePut, Kv: kv}})

		members, owners := n.view.members, n.view.owners
		if len(members)+len(owners) > 1 {
			t.Fatalf("one key gave members %v and owners %v", members, owners)
		}
		for id, m := range members {
			var r nodeRecord
			if n.nodeKey(id) != key || m.ID != id || id == "" || strings.Contains(id, "/") ||
				json.Unmarshal(value, &r) != nil || m.Addr != r.Addr {
				t.Fatalf("key %q, value %q: member %q = %+v", key, value, id, m)
			}
		}
		for id, o := range owners {
			if n.ownerKey(id) != key || o.node != string(value) || o.lease != clientv3.LeaseID(lease) {
				t.Fatalf("key %q, value %q: owner of log %d = %+v, whose key is %q", key, value, id, o, n.ownerKey(id))
			}
		}
		if n.put(&n.view, kv) {
			t.Fatalf("putting key %q again changed the view", key)
		}
		n.apply([]*clientv3.Event{{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(key)}}})
		if len(n.view.members)+len(n.view.owners) != 0 {
			t.Fatalf("after deleting key %q the view holds members %v and owners %v", key, n.view.members, n.view.owners)
		}
	})
}
