package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrRefused is wrapped by a Peer's Probe error when the member's host
// refused or reset the connection: no process listens at its address, so
// the member is dead (or gone elsewhere). Only such failures make a
// member suspected; a probe that gets no answer in time says nothing (a
// paused process, a slow or black-holed network), and leaves the member
// to its lease.
var ErrRefused = errors.New("cluster: connection refused")

// Peer is this node's link to another member, as Detect watches it. Its
// methods are called from one goroutine.
type Peer interface {
	// WaitDown returns once the connection to the member is not up: at
	// once if it is down now, else when it is lost, or when ctx ends. It
	// may connect to the member.
	WaitDown(ctx context.Context)
	// Probe asks whether the member is there, within ctx: nil if it
	// answered, an error wrapping ErrRefused if its address refused the
	// connection, any other error if it is not known.
	Probe(ctx context.Context) error
	// Close ends the link.
	Close() error
}

// DetectOptions configures Detect. Dial is required; the zero value of
// the others is their default.
type DetectOptions struct {
	// Dial links this node to a member.
	Dial func(Member) (Peer, error)
	// Probes is how many probes in a row must be refused, ProbeInterval
	// apart, before the member is suspected; default 3, 100ms apart.
	Probes        int
	ProbeInterval time.Duration
	// ProbeTimeout bounds each probe; default 1s.
	ProbeTimeout time.Duration
	// Recheck is how often a suspected member is probed again and its
	// suspicions counted again, and how long an unanswered probe waits
	// for the next; default 1s.
	Recheck time.Duration
}

func (o *DetectOptions) defaults() {
	if o.Probes <= 0 {
		o.Probes = 3
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 100 * time.Millisecond
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = time.Second
	}
	if o.Recheck <= 0 {
		o.Recheck = time.Second
	}
}

// Detect runs the failure detector until ctx ends or the node is lost: it
// links this node to every other live member of its view (opts.Dial), and
// suspects a member whose connection is lost and whose address then
// refuses opts.Probes probes in a row (see Suspect: a majority of the
// others evicts it). A suspected member that answers again is no longer
// suspected. A member that leaves the view, or comes back on a new lease,
// is unlinked and its suspicion withdrawn. Detect blocks: run it once per
// Node, in a goroutine of its own.
func (n *Node) Detect(ctx context.Context, opts DetectOptions) {
	opts.defaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type watched struct {
		m      Member
		lease  clientv3.LeaseID
		cancel context.CancelFunc
		done   chan struct{}
	}
	peers := map[string]*watched{}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		for _, w := range peers {
			w.cancel()
		}
	}()
	for {
		changed := n.Changed()
		members := n.Members()
		live := map[string]bool{}
		for _, m := range members {
			if m.ID == n.self.ID {
				continue
			}
			live[m.ID] = true
			lease, _ := n.Lease(m.ID)
			if w, ok := peers[m.ID]; ok && w.m == m && w.lease == lease {
				continue
			}
			if w, ok := peers[m.ID]; ok {
				w.cancel() // back on a new lease or address
				<-w.done
			}
			wctx, wcancel := context.WithCancel(ctx)
			w := &watched{m: m, lease: lease, cancel: wcancel, done: make(chan struct{})}
			peers[m.ID] = w
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(w.done)
				n.watchPeer(wctx, w.m, w.lease, opts)
			}()
		}
		for id, w := range peers {
			if !live[id] {
				w.cancel()
				delete(peers, id)
			}
		}
		select {
		case <-changed:
		case <-n.lost:
			return
		case <-ctx.Done():
			return
		}
	}
}

// watchPeer watches member m, on lease, until ctx ends; then it withdraws
// its suspicion, if it had recorded one.
func (n *Node) watchPeer(ctx context.Context, m Member, lease clientv3.LeaseID, opts DetectOptions) {
	p, err := opts.Dial(m)
	if err != nil {
		n.logger.Warn("cluster: cannot watch a member", "node", n.self.ID, "member", m.ID, "addr", m.Addr, "error", err)
		return
	}
	defer p.Close()
	suspected := false
	defer func() {
		n.setRefusing(m.ID, false)
		if suspected {
			uctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
			defer cancel()
			if err := n.Unsuspect(uctx, m.ID); err != nil {
				n.logger.Debug("cluster: withdrawing a suspicion failed", "node", n.self.ID, "member", m.ID, "error", err)
			}
		}
	}()
	for {
		if !suspected {
			p.WaitDown(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		v := n.probe(ctx, p, opts, func() { n.setRefusing(m.ID, true) })
		if v != verdictRefused {
			n.setRefusing(m.ID, false)
		}
		switch {
		case ctx.Err() != nil:
			return
		case v == verdictAlive:
			if suspected {
				n.logger.Info("cluster: suspected member answers again", "node", n.self.ID, "member", m.ID)
				uctx, cancel := context.WithTimeout(ctx, opts.Recheck)
				err := n.Unsuspect(uctx, m.ID)
				cancel()
				suspected = err != nil // try again at the next recheck
			}
			if !sleep(ctx, opts.ProbeInterval) { // no faster than this, whatever WaitDown says
				return
			}
		case v == verdictRefused:
			if !suspected {
				n.logger.Warn("cluster: member suspected dead: its connection was lost and its address refuses new ones", "node", n.self.ID, "member", m.ID, "addr", m.Addr)
			}
			suspected = true
			// Not ctx: an eviction ends this watch, and must not cut short
			// the call that makes it.
			sctx, cancel := context.WithTimeout(context.Background(), opts.Recheck)
			evicted, err := n.Suspect(sctx, m.ID, lease)
			cancel()
			switch {
			case errors.Is(err, ErrLost), ctx.Err() != nil: // lost, or the member left (evicted)
				return
			case err != nil:
				n.logger.Warn("cluster: recording a suspicion failed", "node", n.self.ID, "member", m.ID, "error", err)
			case evicted:
				// The view loses the member, and Detect ends this watch.
			}
			if !sleep(ctx, opts.Recheck) {
				return
			}
		default: // unknown: the lease decides, or a later loss
			if !sleep(ctx, opts.Recheck) {
				return
			}
		}
	}
}

type verdict int

const (
	verdictAlive verdict = iota
	verdictRefused
	verdictUnknown
)

// probe probes p up to opts.Probes times, opts.ProbeInterval apart, until
// it answers: alive if it did, refused if every probe was refused, unknown
// otherwise. It calls refused at the first refusal.
func (n *Node) probe(ctx context.Context, p Peer, opts DetectOptions, refused func()) verdict {
	for i := range opts.Probes {
		if i > 0 && !sleep(ctx, opts.ProbeInterval) {
			return verdictUnknown
		}
		pctx, cancel := context.WithTimeout(ctx, opts.ProbeTimeout)
		err := p.Probe(pctx)
		cancel()
		switch {
		case err == nil:
			return verdictAlive
		case !errors.Is(err, ErrRefused):
			return verdictUnknown
		case i == 0:
			refused()
		}
	}
	return verdictRefused
}

// Refusing reports whether this node's detector finds the member id
// unreachable: its link went down and its address refuses connections.
// Such a member is dead, most likely, and its eviction is under way (if a
// majority of the others agree); a call for it may rather wait on Changed
// than go there.
func (n *Node) Refusing(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.refusing[id]
}

// setRefusing records whether member id refuses connections; a change
// fires Changed.
func (n *Node) setRefusing(id string, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.refusing[id] == on {
		return
	}
	if on {
		n.refusing[id] = true
	} else {
		delete(n.refusing, id)
	}
	n.notifyLocked()
}
