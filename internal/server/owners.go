package server

import (
	"context"
	"errors"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/cluster"
	"github.com/ternwal/tern/internal/rpcerr"
)

// In a cluster each log is served by one node at a time, its owner (package
// cluster). A call about a log that this node does not serve fails with a
// *rpcerr.NotOwnerError naming the node that does, and the client goes
// there. A log that no live node serves is taken by the node that placement
// assigns it to, at the first call about it: that node fences the old
// writer and recovers the log when a writer opens. When this node stops
// serving a log (its lease lapsed, or a node joined that the log now
// belongs to), it ends the log's writers and streams and forgets the log,
// so that serving it again starts from the metadata store.

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
	s.mu.Lock()
	_, serving := s.ids[name]
	s.mu.Unlock()
	if serving && n.Valid() {
		return nil
	}
	// Not served here. The ID is read each time: a log deleted and created
	// again under its name has a new one.
	id, err := s.c.LogID(ctx, name)
	if err != nil {
		return err
	}
	if m, ok := n.Owner(id); ok && m.ID != n.ID() {
		return &rpcerr.NotOwnerError{Log: name, Owner: m.Addr}
	}
	// By the assignee, if that is another node. The view may still show
	// this node as the owner of a log it just gave up.
	if a, ok := cluster.Assign(id, n.Members()); ok && a.ID != n.ID() {
		return &rpcerr.NotOwnerError{Log: name, Owner: a.Addr}
	}
	// One taker at a time: the handle left from before, when another node
	// served the log, is stale and goes before anyone is served from here.
	s.takeMu.Lock()
	defer s.takeMu.Unlock()
	s.mu.Lock()
	_, serving = s.ids[name]
	s.mu.Unlock()
	if serving {
		return nil
	}
	err = n.Acquire(ctx, id)
	if oe, ok := errors.AsType[*cluster.OwnedError](err); ok {
		return &rpcerr.NotOwnerError{Log: name, Owner: oe.Owner.Addr}
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

// balance follows the cluster's changes until the Server closes: it stops
// serving the logs another node owns, and gives up those that placement
// now assigns to another live node.
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
			if a, ok := cluster.Assign(id, members); ok && a.ID != n.ID() && s.unserve(id, "it now belongs to another node") {
				ctx, cancel := context.WithTimeout(s.ctx, releaseTimeout)
				if err := n.Release(ctx, id); err != nil {
					s.log.Warn("release failed", "id", id, "err", err)
				}
				cancel()
			}
		}
		select {
		case <-changed:
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

// releaseTimeout bounds a release.
const releaseTimeout = 5 * time.Second

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
