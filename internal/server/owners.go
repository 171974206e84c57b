package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/cluster"
)

// In a cluster each log is served by one node at a time, its owner (package
// cluster). A call about a log that this node does not serve fails with a
// *rpcerr.NotOwnerError naming the node that does, and the client goes
// there; while this node's failure detector finds that node refusing
// connections (dead, about to be evicted), the call waits for the
// eviction instead. A log that no live node serves is taken by the node that placement
// assigns it to: at the first call about it, or before, when that node sees
// the cluster change (adopt); it fences the old writer and recovers the
// log's open segment when a writer opens. When this node stops serving a
// log (its lease lapsed, or a node joined that the log now belongs to), it
// ends the log's writers and streams and forgets the log, so that serving
// it again starts from the metadata store.

// open returns the named log once this node serves it.
func (s *Server) open(ctx context.Context, name string) (*tern.Log, error) {
	if err := s.route(ctx, name); err != nil {
		return nil, err
	}
	return s.c.OpenLog(ctx, name)
}

// route returns nil if this node serves the named log, taking it if no
// live node does and placement assigns it here, and otherwise a
// *rpcerr.NotOwnerError naming the node that serves it or should.
func (s *Server) route(ctx context.Context, name string) error {
	n := s.node
	if n == nil {
		return nil
	}
	if s.serves(name) && n.Valid() {
		return nil
	}
	// Not served here. The ID is read each time: a log deleted and created
	// again under its name has a new one.
	id, err := s.c.LogID(ctx, name)
	if err != nil {
		return err
	}
	if m, ok := n.Owner(id); ok && m.ID != n.ID() {
		if n.Refusing(m.ID) && s.awaitEviction(ctx, m.ID) {
			return s.route(ctx, name)
		}
		return &rpcerr.NotOwnerError{Log: name, Owner: m.Addr}
	}
	// By the assignee, if that is another node. The view may still show
	// this node as the owner of a log it just gave up.
	if a, ok := cluster.Assign(id, n.Members()); ok && a.ID != n.ID() {
		return &rpcerr.NotOwnerError{Log: name, Owner: a.Addr}
	}
	return s.take(ctx, name, id)
}

// evictionWait bounds how long a call about a log whose owner refuses
// connections waits for the owner's eviction (cluster.Node.Detect), which
// takes a fraction of a second when a majority of the nodes agree.
const evictionWait = 2 * time.Second

// awaitEviction waits while member id, which this node's detector finds
// refusing connections, is still a member, for at most evictionWait or
// until ctx ends. It reports whether the member is gone, or no longer
// refusing: then the call is routed again, rather than sent to a node
// that is dead, most likely, and that the client would try again and
// again with pauses.
func (s *Server) awaitEviction(ctx context.Context, id string) bool {
	n := s.node
	timeout := time.NewTimer(evictionWait)
	defer timeout.Stop()
	for {
		changed := n.Changed()
		if _, ok := n.Member(id); !ok || !n.Refusing(id) {
			return true
		}
		select {
		case <-changed:
		case <-timeout.C:
			return false
		case <-ctx.Done():
			return false
		case <-n.Lost():
			return false
		}
	}
}

// take makes this node the server of the named log, whose ID is id, unless
// it serves it already. The caller has seen that no other live node owns it
// and that placement assigns it here; if another node acquired it since,
// take fails with a *rpcerr.NotOwnerError naming that node.
func (s *Server) take(ctx context.Context, name string, id uint64) error {
	// One taker at a time: the handle left from before, when another node
	// served the log, is stale and goes before anyone is served from here.
	s.takeMu.Lock()
	defer s.takeMu.Unlock()
	if s.serves(name) {
		return nil
	}
	err := s.node.Acquire(ctx, id)
	if oe, ok := errors.AsType[*cluster.OwnedError](err); ok {
		return &rpcerr.NotOwnerError{Log: name, Owner: oe.Owner.Addr}
	}
	if errors.Is(err, cluster.ErrLost) {
		// The node is on its way out: the client tries another.
		return fmt.Errorf("%w: this node lost its cluster lease and is stopping; another node takes log %q (%v)", rpcerr.ErrUnavailable, name, err)
	}
	if err != nil {
		return err
	}
	s.c.CloseLog(name)
	s.mu.Lock()
	s.served[id], s.ids[name] = name, id
	s.mu.Unlock()
	s.log.Info("serving log", "log", name, "id", id)
	return nil
}

// serves reports whether this node serves the named log.
func (s *Server) serves(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[name]
	return ok
}

// servesID reports whether this node serves the log with ID id.
func (s *Server) servesID(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.served[id]
	return ok
}

// forget gives up a log after it was deleted.
func (s *Server) forget(ctx context.Context, name string) {
	s.mu.Lock()
	id, ok := s.ids[name]
	delete(s.ids, name)
	delete(s.served, id)
	s.mu.Unlock()
	if ok && s.node != nil {
		if err := s.node.Release(ctx, id); err != nil {
			s.log.Warn("release of a deleted log failed", "log", name, "err", err)
		}
	}
}

// balance follows the cluster's changes until the Server closes: at start
// and at each change it stops serving the logs another node owns, gives up
// those that placement now assigns to another live node, and takes those
// that no live node serves and placement assigns here (adopt).
func (s *Server) balance() {
	n := s.node
	for {
		changed := n.Changed()
		members := n.Members()
		for _, id := range s.servedIDs() {
			// The view may not show an Acquire yet, so only another
			// owner says the log is gone; a lapsed lease loses the node.
			if m, ok := n.Owner(id); ok && m.ID != n.ID() {
				s.unserve(id, "another node serves it")
				continue
			}
			if a, ok := cluster.Assign(id, members); ok && a.ID != n.ID() {
				s.unserve(id, "it now belongs to another node")
			}
		}
		// A pass that failed on etcd is tried again after a while: the
		// change it missed may be the last for long.
		var retry <-chan time.Time
		if released := s.releaseUnserved(); !s.adopt(members) || !released {
			retry = time.After(adoptRetry)
		}
		select {
		case <-changed:
		case <-retry:
		case <-n.Lost():
			for _, id := range s.servedIDs() {
				s.unserve(id, "the node lost its lease")
			}
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// releaseUnserved releases the logs this node owns and does not serve:
// those it just gave up, and those whose release failed before (their
// owner key, on this node's lease, would keep the others from taking them
// for as long as the node lives). It reports false if a release failed.
func (s *Server) releaseUnserved() bool {
	n := s.node
	s.takeMu.Lock() // a take has acquired what it has not recorded yet
	var ids []uint64
	for _, id := range n.Owned() {
		if !s.servesID(id) {
			ids = append(ids, id)
		}
	}
	s.takeMu.Unlock()
	ok := true
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(s.ctx, etcdTimeout)
		if err := n.Release(ctx, id); err != nil && s.ctx.Err() == nil {
			s.log.Warn("release failed; trying again", "id", id, "err", err)
			ok = false
		}
		cancel()
	}
	return ok
}

// adopt takes the logs in object storage (object and quorum mode) that no
// live node serves and that placement assigns to this node among members,
// and opens them in the background (warm): a log whose owner died, or that
// a node gave up to this one, is served again without waiting for a call
// about it. A local log, whose data is on one node's disk, is left to the
// first call about it. adopt reports false if the logs could not be listed
// or one could not be taken for a reason that may pass.
//
// adopt runs in balance's goroutine, so that the next pass sees what it
// took. It reads the list of logs from metadata, and makes one etcd call
// per log it takes.
func (s *Server) adopt(members []cluster.Member) bool {
	n := s.node
	if !n.Valid() {
		return true // balance sees the node lost
	}
	ctx, cancel := context.WithTimeout(s.ctx, etcdTimeout)
	logs, err := s.c.ListLogsMeta(ctx, "")
	cancel()
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("listing the logs to take over failed", "err", err)
		}
		return false
	}
	ok := true
	var taken []string
	for _, l := range logs {
		if mode := l.Options.Mode; mode != tern.ModeObject && mode != tern.ModeQuorum {
			continue
		}
		if s.servesID(l.ID) {
			continue
		}
		if m, owned := n.Owner(l.ID); owned && m.ID != n.ID() {
			continue
		}
		if a, _ := cluster.Assign(l.ID, members); a.ID != n.ID() {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, etcdTimeout)
		err := s.take(ctx, l.Name, l.ID)
		cancel()
		switch {
		case err == nil:
			taken = append(taken, l.Name)
		case errors.Is(err, rpcerr.ErrNotOwner):
			// Another node took it since the view was read.
		case errors.Is(err, cluster.ErrLost) || s.ctx.Err() != nil:
			// balance sees the node lost, or the Server closed.
			return true
		default:
			s.log.Warn("taking over a log failed", "log", l.Name, "id", l.ID, "err", err)
			ok = false
		}
	}
	if len(taken) > 0 {
		s.warm(taken)
	}
	return ok
}

// warm opens the named logs, just taken, in the background, so that the
// first call about each does not wait for its segments to be read (for a
// quorum log, the open segment's fragments that AckQuorum replicas hold).
// A log left by a dead writer is recovered when the next writer opens, not
// here. A log that fails to open is logged, and opened again by the next
// call about it.
func (s *Server) warm(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.warming.Add(1)
	go func() {
		defer s.warming.Done()
		for _, name := range names {
			if !s.serves(name) {
				continue // given up meanwhile
			}
			ctx, cancel := context.WithTimeout(s.ctx, openTimeout)
			_, err := s.c.OpenLog(ctx, name)
			cancel()
			if err != nil && s.ctx.Err() == nil {
				s.log.Warn("opening a log taken over failed; the next call about it opens it", "log", name, "err", err)
			}
		}
	}()
}

// servedIDs lists the logs this node serves.
func (s *Server) servedIDs() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]uint64, 0, len(s.served))
	for id := range s.served {
		ids = append(ids, id)
	}
	return ids
}

const (
	// etcdTimeout bounds each etcd call of balance: a release, the listing
	// of the logs, an acquire.
	etcdTimeout = 5 * time.Second
	// adoptRetry is how long after a failed adopt the next one runs, if no
	// change comes first.
	adoptRetry = 2 * time.Second
	// openTimeout bounds the open of a log taken over.
	openTimeout = 30 * time.Second
)

// unserve ends the writers and streams of log id and forgets it. It
// reports whether this node served it.
func (s *Server) unserve(id uint64, why string) bool {
	s.mu.Lock()
	name := s.served[id]
	delete(s.served, id)
	delete(s.ids, name)
	s.mu.Unlock()
	if name == "" {
		return false
	}
	s.log.Info("no longer serving log", "log", name, "id", id, "why", why)
	s.dropWriters(name, &rpcerr.NotOwnerError{Log: name})
	if err := s.c.CloseLog(name); err != nil {
		s.log.Warn("closing a log given up failed", "log", name, "err", err)
	}
	return true
}
