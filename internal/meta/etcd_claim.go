package meta

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ClaimWriter implements Store. The claim's writer key is attached to the
// store's lease, which ClaimWriter grants if the store has none. If the lease
// is lost while ClaimWriter runs, the claim it returns is already lost.
func (e *Etcd) ClaimWriter(ctx context.Context, name string, o ClaimOptions) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	for retried := false; ; retried = true {
		l, err := e.currentLease(ctx)
		if err != nil {
			return nil, wrap("claim writer", name, e.classify(ctx, err))
		}
		c, err := e.claim(ctx, name, l, o)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && !retried {
			// Expired before its renewal could tell: take a new one.
			e.loseLease(l, "not found")
			continue
		}
		if err != nil {
			return nil, wrap("claim writer", name, e.classify(ctx, err))
		}
		return c, nil
	}
}

// claim opens the session o asks for, bumps the log's epoch and puts its
// writer key on lease l, in one transaction, and starts the claim's watch.
func (e *Etcd) claim(ctx context.Context, name string, l *lease, o ClaimOptions) (*etcdClaim, error) {
	var (
		stored Log
		epoch  uint64
		id     uint64
		refuse error
	)
	rev, err := e.update(ctx, name, func(lg *Log) []clientv3.Op {
		if refuse = openSession(lg, o); refuse != nil {
			return nil
		}
		stored = *lg
		epoch, id = lg.Epoch, lg.ID
		return []clientv3.Op{
			e.putLog(*lg),
			clientv3.OpPut(e.writerKey(id), strconv.FormatUint(epoch, 10), clientv3.WithLease(l.id)),
		}
	})
	if err == nil && refuse != nil {
		err = refuse
	}
	if err != nil {
		return nil, err
	}
	c := &etcdClaim{claim: newClaim(stored), e: e, lease: l, name: name, id: id}
	wctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone { // lost or closed since the transaction
		c.lose()
		stop()
		return c, nil
	}
	l.claims[c] = struct{}{}
	e.wg.Add(1)
	go c.watch(wctx, rev+1)
	return c, nil
}

// etcdClaim is an Etcd's Claim.
type etcdClaim struct {
	*claim
	e     *Etcd
	lease *lease
	name  string
	id    uint64             // the log's
	stop  context.CancelFunc // ends the watch
}

// Valid implements Claim: the claim is not lost and its lease is proven
// alive now.
func (c *etcdClaim) Valid() bool {
	return !c.lost.Load() && c.lease.valid()
}

// Release implements Claim. The claim is given up at once; then the writer
// key is deleted if it still holds the claim's epoch, and the error of that
// is returned. The lease, which the store's other claims share, stays. With
// a canceled ctx Release returns ctx's error and keeps the claim.
func (c *etcdClaim) Release(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.end()
	ctx, cancel := c.e.bound(ctx)
	defer cancel()
	c.e.mu.Lock()
	closed := c.e.closed
	c.e.mu.Unlock()
	if closed { // revoking the lease took the key
		return nil
	}
	key := c.e.writerKey(c.id)
	_, err := c.e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", strconv.FormatUint(c.epoch, 10))).
		Then(clientv3.OpDelete(key)).
		Commit()
	return wrap("release", c.name, c.e.classify(ctx, err))
}

// end loses the claim, stops its watch and takes it off its lease.
func (c *etcdClaim) end() {
	c.lose()
	c.stop()
	c.lease.mu.Lock()
	delete(c.lease.claims, c)
	c.lease.mu.Unlock()
}

// watch ends the claim when the log's record, from revision rev on, shows a
// newer epoch or is deleted. It returns when ctx ends.
func (c *etcdClaim) watch(ctx context.Context, rev int64) {
	defer c.e.wg.Done()
	key := c.e.nameKey(c.name)
	for ctx.Err() == nil {
		for wr := range c.e.cli.Watch(ctx, key, clientv3.WithRev(rev)) {
			if wr.Err() != nil { // compacted past rev, or canceled by the server
				break
			}
			for _, ev := range wr.Events {
				if !c.holds(ev.Type == clientv3.EventTypeDelete, ev.Kv.Value) {
					c.end()
					return
				}
				rev = ev.Kv.ModRevision + 1
			}
			if wr.IsProgressNotify() {
				rev = wr.Header.Revision + 1
			}
		}
		if ctx.Err() != nil {
			return
		}
		// Read the record as it is now and watch on from there.
		resp, err := c.e.cli.Get(ctx, key)
		if err != nil {
			sleep(ctx, resyncWait)
			continue
		}
		var v []byte
		if len(resp.Kvs) > 0 {
			v = resp.Kvs[0].Value
		}
		if !c.holds(v == nil, v) {
			c.end()
			return
		}
		rev = resp.Header.Revision + 1
	}
}

// holds reports whether a version of the log's record leaves the claim
// standing: the log exists, with the same ID, at the claimed epoch.
func (c *etcdClaim) holds(deleted bool, record []byte) bool {
	if deleted {
		return false
	}
	l, err := decodeLog(record)
	return err == nil && l.ID == c.id && l.Epoch == c.epoch
}

// lease is the etcd lease behind a store's claims.
type lease struct {
	id   clientv3.LeaseID
	ttl  time.Duration // as granted
	base time.Time     // monotonic origin of until
	// until is when, after base, the lease may first have expired: the
	// claims on it are valid before then.
	until atomic.Int64
	stop  context.CancelFunc // ends the renewals

	mu     sync.Mutex
	gone   bool // lost or closed: takes no more claims
	claims map[*etcdClaim]struct{}
}

func (l *lease) valid() bool { return l.left() > 0 }

// left returns how long the lease is proven to live on.
func (l *lease) left() time.Duration {
	return time.Duration(l.until.Load()) - time.Since(l.base)
}

// extend records a renewal sent at t0 that returned ttl.
func (l *lease) extend(t0 time.Time, ttl time.Duration) {
	l.until.Store(int64(t0.Sub(l.base) + ttl))
}

// end stops the renewals and loses every claim on l.
func (l *lease) end() {
	l.stop()
	l.mu.Lock()
	l.gone = true
	claims := l.claims
	l.claims = nil
	l.mu.Unlock()
	for c := range claims {
		c.lose()
		c.stop()
	}
}

// currentLease returns the store's lease, granting one if it has none.
func (e *Etcd) currentLease(ctx context.Context) (*lease, error) {
	e.grantMu.Lock()
	defer e.grantMu.Unlock()
	e.mu.Lock()
	l, closed := e.lease, e.closed
	e.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if l != nil {
		return l, nil
	}
	t0 := time.Now()
	resp, err := e.cli.Grant(ctx, int64(math.Ceil(e.ttl.Seconds())))
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(context.Background())
	ttl := time.Duration(resp.TTL) * time.Second
	l = &lease{id: resp.ID, ttl: ttl, base: t0, stop: stop, claims: map[*etcdClaim]struct{}{}}
	l.extend(t0, ttl)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		stop()
		ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
		defer cancel()
		_, _ = e.cli.Revoke(ctx, l.id) // best effort: it expires anyway
		return nil, errClosed
	}
	e.lease = l
	e.wg.Add(1)
	go e.renew(rctx, l)
	e.logger.Debug("meta: lease granted", "lease", int64(l.id), "ttl", resp.TTL)
	return l, nil
}

// renew keeps l alive until ctx ends, or gives it up when it cannot prove it
// alive any longer.
func (e *Etcd) renew(ctx context.Context, l *lease) {
	defer e.wg.Done()
	var failing error // since the last renewal
	wait := l.ttl / 3
	for {
		left := l.left()
		if left <= 0 {
			e.loseLease(l, "not renewed in time")
			return
		}
		if !sleep(ctx, min(wait, left)) {
			return
		}
		if l.left() <= 0 {
			continue
		}
		t0 := time.Now()
		rctx, cancel := context.WithDeadline(ctx, t0.Add(l.left()))
		resp, err := e.cli.KeepAliveOnce(rctx, l.id)
		cancel()
		switch {
		case err == nil:
			ttl := time.Duration(resp.TTL) * time.Second
			l.extend(t0, ttl)
			wait = ttl / 3
			if failing != nil {
				e.logger.Info("meta: lease renewed after failure", "lease", int64(l.id), "error", failing)
				failing = nil
			}
		case ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			e.loseLease(l, "expired")
			return
		default:
			if failing == nil {
				e.logger.Warn("meta: lease renewal failed", "lease", int64(l.id), "error", err)
			}
			failing = err
			wait = l.ttl / 10
		}
	}
}

// loseLease gives up l and every claim on it; the next ClaimWriter grants a
// new lease.
func (e *Etcd) loseLease(l *lease, reason string) {
	e.mu.Lock()
	current := e.lease == l
	if current {
		e.lease = nil
	}
	e.mu.Unlock()
	l.mu.Lock()
	n := len(l.claims)
	l.mu.Unlock()
	// Logged before the claims see Lost, which a reader of the log may
	// wait for.
	if current {
		e.logger.Warn("meta: lease lost", "lease", int64(l.id), "reason", reason, "claims", n)
	}
	l.end()
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

// EndSession implements Store.
func (e *Etcd) EndSession(ctx context.Context, name string, epoch uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	_, err := e.update(ctx, name, func(l *Log) []clientv3.Op {
		if !endSession(l, epoch) {
			return nil
		}
		return []clientv3.Op{e.putLog(*l)}
	})
	return wrap("end session", name, e.classify(ctx, err))
}
