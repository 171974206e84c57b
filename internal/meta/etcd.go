package meta

// The etcd key space
//
// OpenEtcd keeps the store under one key prefix, Root (default "/tern/").
// Log names may contain '/', so names and IDs live under separate prefixes:
//
//	<root>names/<name>             the log's record (bolt.go): ID, Created,
//	                               Options, Epoch, Start, Installation;
//	                               <name> as is, so a prefix range is
//	                               ListLogs
//	<root>ids                      the last log ID given out, decimal; IDs
//	                               start at 1, increase and are never reused
//	<root>installation             the store's install record
//	                               (bolt_install.go), put once, by the first
//	                               Installation, if absent
//	<root>logs/<id>/writer         the epoch of the newest ClaimWriter,
//	                               decimal, attached to the claiming store's
//	                               lease: it names the epoch some process
//	                               holds, and is gone once that process is
//	                               (the record's epoch stays)
//	<root>logs/<id>/subs/<sub>     a subscription's sub record (bolt.go);
//	                               keyed by ID, so a log created again under
//	                               a deleted one's name starts with none
//	<root>logs/<id>/segments/<seq> a segment's segment record (bolt.go);
//	                               <seq> is its Seq in decimal, zero-padded
//	                               to 20 digits so that keys sort by Seq
//	<root>logs/<id>/segtail        the Seq of the segment CreateSegment
//	                               stored last, decimal, kept when that
//	                               segment is deleted: the only segment that
//	                               can be open (etcd_segment.go)
//
// <id> is the log ID in decimal. DeleteLog deletes the record and everything
// under logs/<id>/ in one transaction.
//
// Every change is one transaction that compares the revision of what it read
// (the record's mod revision, or its create revision to check that the same
// log still exists) and is retried on a mismatch, so concurrent changes are
// never lost.
//
// Claims
//
// A store holds at most one lease at a time, granted with the first
// ClaimWriter and renewed by the store itself every TTL/3 with KeepAliveOnce.
// A renewal sent at t0 that comes back with TTL proves that the lease lives
// until at least t0+TTL (the server measures from a later instant), so until
// then the claims on it are Valid without any I/O. A lease that is not
// renewed by that bound, or that the server no longer has, is given up with
// all its claims; the next ClaimWriter grants a new one. Each claim also
// watches its log's record from the revision of its claiming transaction: a
// newer epoch or a deleted log loses it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/ternwal/tern/client/rpcerr"
)

// Defaults of EtcdOptions.
const (
	defaultEtcdRoot        = "/tern/"
	defaultEtcdLeaseTTL    = 10 * time.Second
	defaultEtcdDialTimeout = 5 * time.Second
)

const (
	// revokeTimeout bounds Close's revocation of the lease, which expires on
	// its own anyway.
	revokeTimeout = time.Second
	// resyncWait is the pause before a claim's watch, broken by the server,
	// reads the record again after a failed read.
	resyncWait = 100 * time.Millisecond
)

// kv is a key and its value and revisions, as etcd returns them.
type kv = mvccpb.KeyValue

// EtcdOptions configures OpenEtcd. Only Endpoints is required.
type EtcdOptions struct {
	Endpoints []string // etcd members' client endpoints, as clientv3 dials them: host:port, unix:///PATH
	// Root is the prefix of every key the store uses; default "/tern/". A
	// '/' is appended if it does not end in one. Stores with different roots
	// on one etcd do not see each other.
	Root string
	// LeaseTTL is the TTL of the lease behind writer claims, rounded up to a
	// whole second; default 10s. etcd may raise it to its minimum. A process
	// cut off from etcd sees its claims turn invalid within this long, and
	// a dead process's writer keys stay this long.
	LeaseTTL time.Duration
	// DialTimeout bounds OpenEtcd's wait for etcd to answer; default 5s.
	DialTimeout time.Duration
	// RequestTimeout bounds each call of the store, its retries included;
	// default 10s. A call that runs out of it fails with
	// rpcerr.ErrUnavailable.
	RequestTimeout time.Duration
	// Logger gets the state changes of the lease; default discard.
	Logger *slog.Logger
}

// Etcd is a Store on etcd, for servers: any number of processes may share
// it, and a claim made through one is lost when another claims the log. It
// is safe for concurrent use.
type Etcd struct {
	cli       *clientv3.Client
	endpoints []string
	root      string
	ttl       time.Duration
	timeout   time.Duration // of each call
	logger    *slog.Logger
	requests  atomic.Uint64

	grantMu sync.Mutex // serializes lease grants
	mu      sync.Mutex
	closed  bool
	lease   *lease // nil before the first claim and after losing it

	wg sync.WaitGroup // renewal and watch goroutines
}

var _ Store = (*Etcd)(nil)

// Reconnect is how a client of etcd (the store's, the server's) dials it
// again after losing it: gRPC's default backoff grows to two minutes, so a
// store whose etcd was down for a while kept failing calls long after etcd
// was back. A second between attempts at most costs a dial a second while
// etcd is down.
var Reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// OpenEtcd connects to etcd and returns the store under opts.Root. It fails
// with an error that names the endpoints if etcd does not answer within
// opts.DialTimeout, or with ctx's error if ctx ends first.
func OpenEtcd(ctx context.Context, opts EtcdOptions) (*Etcd, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("meta: open etcd: no endpoints")
	}
	if opts.Root == "" {
		opts.Root = defaultEtcdRoot
	}
	if !strings.HasSuffix(opts.Root, "/") {
		opts.Root += "/"
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = defaultEtcdLeaseTTL
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = defaultEtcdDialTimeout
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = defaultEtcdRequestTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Etcd{
		endpoints: opts.Endpoints,
		root:      opts.Root,
		ttl:       opts.LeaseTTL,
		timeout:   opts.RequestTimeout,
		logger:    opts.Logger,
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   opts.Endpoints,
		DialTimeout: opts.DialTimeout,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(e.count), grpc.WithConnectParams(Reconnect)},
	})
	if err != nil {
		return nil, fmt.Errorf("meta: open etcd at %s: %w", strings.Join(opts.Endpoints, ","), err)
	}
	// The client connects lazily; ask something that is not metadata, so
	// that an unreachable etcd fails here and Requests stays 0.
	pctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	_, err = cli.MemberList(pctx, clientv3.WithSerializable())
	cancel()
	if err != nil {
		cli.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("meta: cannot reach etcd at %s: %v (%w)", strings.Join(opts.Endpoints, ","), err, rpcerr.ErrUnavailable)
	}
	e.cli = cli
	return e, nil
}

// count is a gRPC interceptor that counts the KV requests sent (each retry
// is one); leases and watches are other services.
func (e *Etcd) count(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if strings.HasPrefix(method, "/etcdserverpb.KV/") {
		e.requests.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Requests returns how many KV requests (reads and transactions) the store
// has sent to etcd. Lease grants and renewals and watch events are not
// counted, so an idle store with open claims does not add to it.
func (e *Etcd) Requests() uint64 { return e.requests.Load() }

func (e *Etcd) nameKey(name string) string { return e.root + "names/" + name }
func (e *Etcd) idsKey() string             { return e.root + "ids" }
func (e *Etcd) logPrefix(id uint64) string {
	return e.root + "logs/" + strconv.FormatUint(id, 10) + "/"
}
func (e *Etcd) writerKey(id uint64) string          { return e.logPrefix(id) + "writer" }
func (e *Etcd) subPrefix(id uint64) string          { return e.logPrefix(id) + "subs/" }
func (e *Etcd) subKey(id uint64, sub string) string { return e.subPrefix(id) + sub }
func (e *Etcd) segPrefix(id uint64) string          { return e.logPrefix(id) + "segments/" }
func (e *Etcd) segKey(id, seq uint64) string        { return e.segPrefix(id) + fmt.Sprintf("%020d", seq) }
func (e *Etcd) segTailKey(id uint64) string         { return e.logPrefix(id) + "segtail" }

// CreateLog implements Store. Only l.Name, l.Options and l.Installation are
// used. Created is
// this process's clock, truncated to microseconds.
func (e *Etcd) CreateLog(ctx context.Context, l Log) (Log, error) {
	if err := ctx.Err(); err != nil {
		return Log{}, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	l = Log{
		Name:         l.Name,
		Created:      time.Now().UTC().Truncate(time.Microsecond),
		Options:      l.Options,
		Installation: l.Installation,
	}
	key, ids := e.nameKey(l.Name), e.idsKey()
	resp, err := e.cli.Txn(ctx).Then(clientv3.OpGet(ids), clientv3.OpGet(key)).Commit()
	for err == nil {
		idKV, logKV := first(resp, 0), first(resp, 1)
		if logKV != nil {
			err = ErrExist
			break
		}
		var last uint64
		if idKV != nil {
			if last, err = strconv.ParseUint(string(idKV.Value), 10, 64); err != nil {
				err = fmt.Errorf("%s: %w", ids, err)
				break
			}
		}
		l.ID = last + 1
		resp, err = e.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(ids), "=", modRev(idKV)),
				clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(ids, strconv.FormatUint(l.ID, 10)), e.putLog(l)).
			Else(clientv3.OpGet(ids), clientv3.OpGet(key)).
			Commit()
		if err == nil && resp.Succeeded {
			return l, nil
		}
	}
	return Log{}, wrap("create", l.Name, e.classify(ctx, err))
}

// Log implements Store.
func (e *Etcd) Log(ctx context.Context, name string) (Log, error) {
	if err := ctx.Err(); err != nil {
		return Log{}, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	l, _, err := e.getLog(ctx, name)
	if err != nil {
		return Log{}, wrap("get", name, e.classify(ctx, err))
	}
	return l, nil
}

// ListLogs implements Store. It returns nil if no name starts with prefix.
func (e *Etcd) ListLogs(ctx context.Context, prefix string) ([]Log, error) {
	return e.ListLogsPage(ctx, prefix, "", 0)
}

// ListLogsPage implements Store: one range read from after's successor to
// the end of the prefix. It returns nil if no name is left.
func (e *Etcd) ListLogsPage(ctx context.Context, prefix, after string, limit int) ([]Log, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	from := e.nameKey(prefix)
	end := clientv3.GetPrefixRangeEnd(from)
	if after != "" && after >= prefix {
		from = e.nameKey(after) + "\x00" // the first key after after
	}
	opts := []clientv3.OpOption{clientv3.WithRange(end)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	resp, err := e.cli.Get(ctx, from, opts...)
	if err != nil {
		return nil, fmt.Errorf("meta: list %q: %w", prefix, e.classify(ctx, err))
	}
	var logs []Log
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), e.nameKey(""))
		if !strings.HasPrefix(name, prefix) {
			break // after sorts past the prefix
		}
		l, err := decodeLog(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("meta: list %q: log %q: %w", prefix, name, err)
		}
		l.Name = name
		logs = append(logs, l)
	}
	return logs, nil
}

// CountLogs implements Store with a count-only range read.
func (e *Etcd) CountLogs(ctx context.Context, prefix string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	resp, err := e.cli.Get(ctx, e.nameKey(prefix), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("meta: count %q: %w", prefix, e.classify(ctx, err))
	}
	return int(resp.Count), nil
}

// DeleteLog implements Store. The log's ID is not reused. Its subscriptions,
// segments and writer key go with it, and claims on it are lost.
func (e *Etcd) DeleteLog(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	_, err := e.update(ctx, name, func(l *Log) []clientv3.Op {
		return []clientv3.Op{
			clientv3.OpDelete(e.nameKey(name)),
			clientv3.OpDelete(e.logPrefix(l.ID), clientv3.WithPrefix()),
		}
	})
	return wrap("delete", name, e.classify(ctx, err))
}

// BumpEpoch implements Store.
func (e *Etcd) BumpEpoch(ctx context.Context, name string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	var epoch uint64
	_, err := e.update(ctx, name, func(l *Log) []clientv3.Op {
		l.Epoch++
		epoch = l.Epoch
		return []clientv3.Op{e.putLog(*l)}
	})
	if err != nil {
		return 0, wrap("bump epoch", name, e.classify(ctx, err))
	}
	return epoch, nil
}

// AdvanceStart implements Store. It does not write if Start is already at
// least start.
func (e *Etcd) AdvanceStart(ctx context.Context, name string, start uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	var cur uint64
	_, err := e.update(ctx, name, func(l *Log) []clientv3.Op {
		cur = max(l.Start, start)
		if cur == l.Start {
			return nil
		}
		l.Start = cur
		return []clientv3.Op{e.putLog(*l)}
	})
	if err != nil {
		return 0, wrap("advance start", name, e.classify(ctx, err))
	}
	return cur, nil
}

// getLog reads the named log and returns it with its create revision, which
// changes only if the log is deleted and created again.
func (e *Etcd) getLog(ctx context.Context, name string) (Log, int64, error) {
	resp, err := e.cli.Get(ctx, e.nameKey(name))
	if err != nil {
		return Log{}, 0, err
	}
	if len(resp.Kvs) == 0 {
		return Log{}, 0, ErrNotFound
	}
	kv := resp.Kvs[0]
	l, err := decodeLog(kv.Value)
	if err != nil {
		return Log{}, 0, err
	}
	l.Name = name
	return l, kv.CreateRevision, nil
}

// update reads the named log and lets fn change it and say which operations
// store the change; they are committed if the log's record has not changed
// since it was read, and otherwise the whole is retried. fn returning no
// operation ends update without a write. update returns the revision of the
// write, or of the last read.
func (e *Etcd) update(ctx context.Context, name string, fn func(*Log) []clientv3.Op) (int64, error) {
	key := e.nameKey(name)
	resp, err := e.cli.Txn(ctx).Then(clientv3.OpGet(key)).Commit()
	for err == nil {
		kv := first(resp, 0)
		if kv == nil {
			return 0, ErrNotFound
		}
		var l Log
		if l, err = decodeLog(kv.Value); err != nil {
			return 0, err
		}
		l.Name = name
		ops := fn(&l)
		if len(ops) == 0 {
			return resp.Header.Revision, nil
		}
		resp, err = e.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(ops...).
			Else(clientv3.OpGet(key)).
			Commit()
		if err == nil && resp.Succeeded {
			return resp.Header.Revision, nil
		}
	}
	return 0, err
}

// putLog is the operation that stores l's record.
func (e *Etcd) putLog(l Log) clientv3.Op {
	v, err := encodeLog(l)
	if err != nil {
		panic(fmt.Sprintf("meta: encode log %q: %v", l.Name, err)) // plain fields always encode
	}
	return clientv3.OpPut(e.nameKey(l.Name), string(v))
}

// first returns the first key of the i-th response of a transaction, or nil.
func first(resp *clientv3.TxnResponse, i int) *kv {
	r := resp.Responses[i].GetResponseRange()
	if r == nil || len(r.Kvs) == 0 {
		return nil
	}
	return r.Kvs[0]
}

// modRev is the mod revision of kv, 0 (what etcd compares a missing key as)
// if it is nil.
func modRev(kv *kv) int64 {
	if kv == nil {
		return 0
	}
	return kv.ModRevision
}

// Close implements Store. Claims made through e are lost; the lease behind
// them is revoked if etcd answers within a second, so that other processes
// see the writer keys go at once. Close is idempotent.
func (e *Etcd) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	l := e.lease
	e.lease = nil
	e.mu.Unlock()
	if l != nil {
		l.end()
		ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
		_, _ = e.cli.Revoke(ctx, l.id) // best effort: it expires anyway
		cancel()
	}
	e.wg.Wait()
	if err := e.cli.Close(); err != nil {
		return fmt.Errorf("meta: close: %w", err)
	}
	return nil
}
