package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/auth"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/certs"
	"github.com/ternwal/tern/internal/cluster"
	"github.com/ternwal/tern/internal/replica"
	"github.com/ternwal/tern/internal/vfs"
)

// clusterNode is what a node of a cluster runs besides a standalone server:
// its membership, and the replica store that holds its share of the quorum
// logs' open segments.
type clusterNode struct {
	node   *cluster.Node
	store  *replica.Store
	bucket blob.Bucket
	set    *replicaSet

	logger     *slog.Logger
	stopDetect context.CancelFunc
	detecting  sync.WaitGroup
}

// startNode opens the replica store under data/replica and joins the
// cluster as id at addr. A node restarted at once after a crash finds its
// old lease still there: it waits up to ttl for it to lapse.
// It first checks that its certificate is one the other nodes accept, and
// that the live members and it accept each other (probeMembers). The
// requests of its offloads to the object store are reported to obs.
func startNode(ctx context.Context, cfg Config, cli *clientv3.Client, addr string, tlsCerts *certs.Store, policy *auth.Policy, logger *slog.Logger, obs tern.Observer) (*clusterNode, error) {
	if err := checkNodeCert(tlsCerts, policy); err != nil {
		return nil, fmt.Errorf("join the cluster as %s: %w", cfg.NodeID, err)
	}
	if err := probeMembers(ctx, cli, cfg, tlsCerts, logger); err != nil {
		return nil, fmt.Errorf("join the cluster as %s: %w", cfg.NodeID, err)
	}
	ttl := cfg.NodeTTL
	st := cfg.Storage
	bucket, err := blob.OpenURL(ctx, st.URL, blob.S3Options{
		AccessKey: st.AccessKey, SecretKey: st.SecretKey, SessionToken: st.SessionToken, SSECKey: st.SSECKey,
	})
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", st.URL, err)
	}
	bucket = obs.Bucket(bucket) // the uploads of sealed segments, as the object logs' requests
	dir := filepath.Join(cfg.Data, "replica")
	store, err := replica.Open(replica.Options{FS: vfs.OS, Dir: dir, Bucket: bucket, Logger: logger,
		MemBytes: budgetsOf(cfg.MemoryLimitBytes).replicaBytes, ZeroAhead: cfg.Limits.ZeroAheadBytes})
	if err != nil {
		bucket.Close()
		return nil, fmt.Errorf("open the replica store in %s: %w", dir, err)
	}
	deadline := time.Now().Add(ttl + time.Second)
	var node *cluster.Node
	for {
		node, err = cluster.Join(ctx, cluster.Options{Client: cli, Root: cfg.EtcdRoot, ID: cfg.NodeID, Addr: addr, TTL: ttl, Logger: logger})
		if !errors.Is(err, cluster.ErrDuplicateID) || time.Now().After(deadline) {
			break
		}
		logger.Info("waiting for the lease of this node's earlier run to lapse", "node", cfg.NodeID)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(ttl / 4):
			continue
		}
		break
	}
	if err != nil {
		store.Close()
		bucket.Close()
		if errors.Is(err, cluster.ErrDuplicateID) {
			return nil, fmt.Errorf("join the cluster as %s: %w: another live node has this ID; give each node its own --node-id", cfg.NodeID, err)
		}
		return nil, fmt.Errorf("join the cluster as %s: %w", cfg.NodeID, err)
	}
	cn := &clusterNode{node: node, store: store, bucket: bucket, logger: logger,
		set: &replicaSet{node: node, self: replica.NewLocal(store), certs: tlsCerts, conns: map[string]*replica.Conn{}}}
	cn.detect(tlsCerts)
	return cn, nil
}

// detect runs the failure detector (cluster.Node.Detect) until close: a
// member killed on a live host is evicted by a majority of the others
// well within a second, and its logs are taken over without waiting for
// its lease to lapse (docs/cluster.md).
func (n *clusterNode) detect(tlsCerts *certs.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	n.stopDetect = cancel
	n.detecting.Go(func() {
		n.node.Detect(ctx, cluster.DetectOptions{Dial: func(m cluster.Member) (cluster.Peer, error) {
			return dialPeer(m, nodeTLS(tlsCerts, m.Addr))
		}})
	})
}

// leave tells the others, at the start of a shutdown, that this node is
// leaving (cluster.Node.Leave): once its gRPC service stops, they would
// otherwise find it dead and evict it while it still closes its logs. Best
// effort: an eviction then costs only the logs' clean hand-over.
func (n *clusterNode) leave() error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdTimeout)
	defer cancel()
	if err := n.node.Leave(ctx); err != nil {
		n.logger.Warn("telling the other nodes that this one leaves failed", "err", err)
	}
	return nil
}

// close leaves the cluster, so that the others take its logs at once, and
// closes the replica store.
func (n *clusterNode) close() error {
	n.stopDetect()
	n.detecting.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), etcdTimeout)
	defer cancel()
	return errors.Join(n.node.Close(ctx), n.set.close(), n.store.Close(), n.bucket.Close())
}

// replicaSet is tern.Cluster on the cluster's membership: the node itself
// in process, the others over gRPC, one connection per address.
type replicaSet struct {
	node  *cluster.Node
	self  replica.Node
	certs *certs.Store // the node's TLS material; nil without TLS

	mu    sync.Mutex
	conns map[string]*replica.Conn
}

var _ tern.Cluster = (*replicaSet)(nil)

// Node returns the replica with the given ID.
func (r *replicaSet) Node(id string) (replica.Node, error) {
	if id == r.node.ID() {
		return r.self, nil
	}
	m, ok := r.node.Member(id)
	if !ok {
		return nil, fmt.Errorf("node %s is not a live member of the cluster", id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.conns[m.Addr]; ok {
		return c, nil
	}
	c, err := replica.Dial(m.Addr, nodeTLS(r.certs, m.Addr))
	if err != nil {
		return nil, fmt.Errorf("node %s at %s: %w", id, m.Addr, err)
	}
	r.conns[m.Addr] = c
	return c, nil
}

// Live lists the IDs of the live nodes.
func (r *replicaSet) Live() []string {
	ms := r.node.Members()
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// Serves reports whether this node owns the log, as its view of the
// cluster has it: a node that is not Valid owns none.
func (r *replicaSet) Serves(logID uint64) bool {
	m, ok := r.node.Owner(logID)
	return ok && m.ID == r.node.ID()
}

func (r *replicaSet) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	for _, c := range r.conns {
		err = errors.Join(err, c.Close())
	}
	r.conns = nil
	return err
}
