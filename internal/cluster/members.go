package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ReadMembers reads the live members of the cluster under root (as
// Options.Root) from etcd, without joining it: what a node checks before
// it joins. Malformed keys are left out, as a Node's view leaves them.
func ReadMembers(ctx context.Context, cli *clientv3.Client, root string) ([]Member, error) {
	if root == "" {
		root = defaultRoot
	}
	if !strings.HasSuffix(root, "/") {
		root += "/"
	}
	prefix := root + "nodes/"
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: read the members: %w", err)
	}
	var ms []Member
	for _, kv := range resp.Kvs {
		id := strings.TrimPrefix(string(kv.Key), prefix)
		var r nodeRecord
		if json.Unmarshal(kv.Value, &r) != nil || id == "" || strings.Contains(id, "/") {
			continue
		}
		ms = append(ms, Member{ID: id, Addr: r.Addr})
	}
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return ms, nil
}
