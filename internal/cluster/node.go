package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of Options.
const (
	defaultRoot = "/tern/"
	defaultTTL  = 10 * time.Second
)

const (
	// revokeTimeout bounds the revocation of a lost lease, which expires on
	// its own anyway.
	revokeTimeout = time.Second
	// resyncWait is the pause before the view, after a failed read, reads
	// etcd again.
	resyncWait = 100 * time.Millisecond
)

var (
	// ErrDuplicateID is returned by Join when a live node already has the ID.
	// A node that restarts within its TTL after a crash gets it until its
	// old lease expires.
	ErrDuplicateID = errors.New("cluster: a live node already has this ID")
	// ErrLost is returned by Acquire once the node's lease is lost or not
	// proven alive.
	ErrLost = errors.New("cluster: node lost its lease")
)

// Member is a live node of the cluster.
type Member struct {
	ID   string
	Addr string // gRPC address, host:port
}

// Options configures Join. Client, ID and Addr are required.
type Options struct {
	// Client is the etcd client; the Node uses it and does not close it.
	Client *clientv3.Client
	// Root is the prefix of every key the node uses; default "/tern/". A
	// '/' is appended if it does not end in one. Nodes with different roots
	// do not see each other.
	Root string
	// ID names the node in the cluster: not empty, no '/'.
	ID string
	// Addr is the node's gRPC address, host:port, published to the others.
	Addr string
	// TTL is the lease's, rounded up to a whole second; default 10s. etcd may
	// raise it to its minimum. A node cut off from etcd stops being Valid
	// within TTL, and a dead node's keys stay this long.
	TTL time.Duration
	// Logger gets the node's state changes; default discard.
	Logger *slog.Logger
}

// Node is this process's membership of a cluster. Its methods are safe for
// concurrent use.
type Node struct {
	cli    *clientv3.Client
	root   string
	self   Member
	lease  clientv3.LeaseID
	ttl    time.Duration // as granted
	logger *slog.Logger

	base time.Time // monotonic origin of until
	// until is when, after base, the lease may first have expired.
	until    atomic.Int64
	lostFlag atomic.Bool
	lost     chan struct{}
	lostOnce sync.Once

	stop      context.CancelFunc // ends the renewals and the watch
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu      sync.Mutex
	view    view
	changed chan struct{} // closed and replaced on each change of view
	// refusing holds the members whose link Detect found down and whose
	// address refuses connections: dead, most likely, and about to be
	// evicted.
	refusing map[string]bool
}

// nodeRecord is the value of a nodes/ key.
type nodeRecord struct {
	Addr string `json:"addr"`
	// Leaving is set by Leave: the node is shutting down, and no other
	// node evicts it (it revokes its lease itself once its logs are
	// closed).
	Leaving bool `json:"leaving,omitempty"`
}

// Join makes this process a member of the cluster under opts.Root: it grants
// a lease, puts the node's key on it and starts renewing it, and reads and
// then watches the membership and ownership. It returns once the node's view
// holds at least itself. It fails with ErrDuplicateID if a live node already
// has opts.ID.
func Join(ctx context.Context, opts Options) (*Node, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cli:      opts.Client,
		root:     opts.Root,
		self:     Member{ID: opts.ID, Addr: opts.Addr},
		logger:   opts.Logger,
		lost:     make(chan struct{}),
		changed:  make(chan struct{}),
		refusing: map[string]bool{},
	}
	t0 := time.Now()
	grant, err := n.cli.Grant(ctx, int64(math.Ceil(opts.TTL.Seconds())))
	if err != nil {
		return nil, fmt.Errorf("cluster: join as %s: grant lease: %w", opts.ID, err)
	}
	n.lease = grant.ID
	n.ttl = time.Duration(grant.TTL) * time.Second
	n.base = t0
	n.extend(t0, n.ttl)
	joined := false
	defer func() {
		if !joined {
			n.revoke()
		}
	}()

	record, err := json.Marshal(nodeRecord{Addr: opts.Addr})
	if err != nil {
		return nil, fmt.Errorf("cluster: join as %s: %w", opts.ID, err)
	}
	key := n.nodeKey(opts.ID)
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(record), clientv3.WithLease(n.lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("cluster: join as %s: %w", opts.ID, err)
	}
	if !resp.Succeeded {
		addr := "an unknown address"
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			var r nodeRecord
			if json.Unmarshal(kvs[0].Value, &r) == nil {
				addr = r.Addr
			}
		}
		return nil, fmt.Errorf("%w: %s, at %s", ErrDuplicateID, opts.ID, addr)
	}

	// The view starts from a read after the put, so it holds the node.
	get, err := n.cli.Get(ctx, n.viewStart(), clientv3.WithRange(n.viewEnd()))
	if err != nil {
		return nil, fmt.Errorf("cluster: join as %s: read members: %w", opts.ID, err)
	}
	n.reset(get.Kvs)

	wctx, stop := context.WithCancel(context.Background())
	n.stop = stop
	n.wg.Add(2)
	go n.renew(wctx)
	go n.watch(wctx, get.Header.Revision+1)
	joined = true
	n.logger.Info("cluster: joined", "node", opts.ID, "addr", opts.Addr, "lease", int64(n.lease), "ttl", n.ttl)
	return n, nil
}

// validate checks opts and fills in its defaults.
func (opts *Options) validate() error {
	switch {
	case opts.Client == nil:
		return errors.New("cluster: join: no etcd client")
	case opts.ID == "" || strings.Contains(opts.ID, "/"):
		return fmt.Errorf("cluster: join: node ID %q: want a non-empty name without '/'", opts.ID)
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return fmt.Errorf("cluster: join as %s: address %q: want host:port", opts.ID, opts.Addr)
	}
	if opts.Root == "" {
		opts.Root = defaultRoot
	}
	if !strings.HasSuffix(opts.Root, "/") {
		opts.Root += "/"
	}
	if opts.TTL <= 0 {
		opts.TTL = defaultTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (n *Node) nodeKey(id string) string { return n.root + "nodes/" + id }
func (n *Node) ownerKey(logID uint64) string {
	return n.root + "owners/" + strconv.FormatUint(logID, 10)
}
func (n *Node) nodePrefix() string                     { return n.root + "nodes/" }
func (n *Node) ownerPrefix() string                    { return n.root + "owners/" }
func (n *Node) viewStart() string                      { return n.nodePrefix() }
func (n *Node) viewEnd() string                        { return clientv3.GetPrefixRangeEnd(n.ownerPrefix()) }
func (n *Node) extend(t0 time.Time, ttl time.Duration) { n.until.Store(int64(t0.Sub(n.base) + ttl)) }

// ID returns the node's ID.
func (n *Node) ID() string { return n.self.ID }

// Self returns the node as a Member.
func (n *Node) Self() Member { return n.self }

// TTL returns the lease's TTL as etcd granted it.
func (n *Node) TTL() time.Duration { return n.ttl }

// Valid reports whether the node's lease is proven alive now: the node is not
// lost, and its last successful renewal was sent less than TTL ago. Once
// false, it stays false: a Valid that finds the proof run out loses the node,
// even if a renewal is on its way back.
func (n *Node) Valid() bool {
	if n.lostFlag.Load() {
		return false
	}
	if n.left() > 0 {
		return true
	}
	n.lose(reasonExpired)
	return false
}

// left returns how long the lease is proven to live on.
func (n *Node) left() time.Duration {
	return time.Duration(n.until.Load()) - time.Since(n.base)
}

// Lost returns a channel that is closed once the node has given up its lease
// for good (see the package doc), Close and abandon included.
func (n *Node) Lost() <-chan struct{} { return n.lost }

// lose gives the lease up: the node is no longer Valid, Lost is closed and
// Changed fires, as Owned is now empty.
func (n *Node) lose(reason string) {
	n.lostOnce.Do(func() {
		n.lostFlag.Store(true)
		close(n.lost)
		n.mu.Lock()
		n.notifyLocked()
		owned := len(n.ownedLocked())
		n.mu.Unlock()
		level := slog.LevelWarn
		if reason == reasonClosed {
			level = slog.LevelInfo
		}
		n.logger.Log(context.Background(), level, "cluster: lease lost", "node", n.self.ID, "lease", int64(n.lease), "reason", reason, "owned", owned)
	})
}

// Reasons for lose that Valid and Close give.
const (
	reasonClosed  = "closed"
	reasonExpired = "not renewed in time"
	// reasonGone is a lease etcd no longer has: it expired, or the other
	// members revoked it (Suspect).
	reasonGone = "expired, or revoked by the other members"
)

// renew keeps the lease alive until ctx ends or it is lost; if the node loses
// it while etcd may still have it, renew revokes it, so that the node's keys
// go at once.
func (n *Node) renew(ctx context.Context) {
	defer n.wg.Done()
	var failing error // since the last renewal
	wait := n.ttl / 3
	for {
		left := n.left()
		if left <= 0 {
			n.lose(reasonExpired)
			break
		}
		if !n.pause(ctx, min(wait, left)) {
			break
		}
		if n.left() <= 0 {
			continue
		}
		t0 := time.Now()
		rctx, cancel := context.WithDeadline(ctx, t0.Add(n.left()))
		resp, err := n.cli.KeepAliveOnce(rctx, n.lease)
		cancel()
		switch {
		case err == nil:
			ttl := time.Duration(resp.TTL) * time.Second
			n.extend(t0, ttl)
			wait = ttl / 3
			if failing != nil {
				n.logger.Info("cluster: lease renewed after failure", "node", n.self.ID, "lease", int64(n.lease), "error", failing)
				failing = nil
			}
		case ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			n.lose(reasonGone)
			return
		default:
			if failing == nil {
				n.logger.Warn("cluster: lease renewal failed", "node", n.self.ID, "lease", int64(n.lease), "error", err)
			}
			failing = err
			wait = n.ttl / 10
		}
	}
	if ctx.Err() == nil { // not Close or abandon, which see to the lease
		n.revoke()
	}
}

// pause waits for d, and reports false instead if ctx ends or the node is
// lost first.
func (n *Node) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-n.lost:
		return false
	}
}

// revoke revokes the lease, best effort: it expires anyway.
func (n *Node) revoke() {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	_, _ = n.cli.Revoke(ctx, n.lease)
}

// Leave tells the other members that the node is shutting down, before it
// stops answering them: they do not evict it (Suspect), and leave its logs
// to it until Close revokes its lease, once it has closed them. It stays a
// member, and Valid, until Close.
func (n *Node) Leave(ctx context.Context) error {
	record, err := json.Marshal(nodeRecord{Addr: n.self.Addr, Leaving: true})
	if err != nil {
		return fmt.Errorf("cluster: leave as %s: %w", n.self.ID, err)
	}
	key := n.nodeKey(n.self.ID)
	_, err = n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", n.lease)).
		Then(clientv3.OpPut(key, string(record), clientv3.WithLease(n.lease))).
		Commit()
	if err != nil {
		return fmt.Errorf("cluster: leave as %s: %w", n.self.ID, err)
	}
	return nil
}

// Close leaves the cluster: the node is lost at once, its renewals and watch
// stop, and its lease is revoked, which deletes its key and all its
// ownerships, so that the others see it leave at once. ctx bounds the
// revocation; if it fails, Close returns its error, and the keys go when the
// lease expires.
// Close after Close or abandon does nothing.
func (n *Node) Close(ctx context.Context) error {
	var err error
	n.closeOnce.Do(func() {
		n.stop()
		n.lose(reasonClosed)
		n.wg.Wait()
		_, err = n.cli.Revoke(ctx, n.lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("cluster: close %s: revoke lease: %w", n.self.ID, err)
		}
	})
	return err
}

// abandon stops the node as a crash would: its renewals and watch stop, and
// its lease is left to expire, with the node's keys. The node stays Valid
// until the lease could have expired; then Lost is closed. For tests.
func (n *Node) abandon() {
	n.closeOnce.Do(func() {
		n.stop()
		n.wg.Wait()
		time.AfterFunc(max(n.left(), 0), func() { n.lose("abandoned") })
	})
}
