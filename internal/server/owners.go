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
	id, err := s.logID(ctx, name)
	if err != nil {
		return err
	}
	if s.serving(id) && n.Valid() {
		return nil
	}
	if m, ok := n.Owner(id); ok && m.ID != n.ID() {
		return &rpcerr.NotOwnerError{Log: name, Owner: m.Addr}
	}
	// Not served here: by the assignee, if that is another node. The view
	// may still show this node as the owner of a log it just gave up.
	if a, ok := cluster.Assign(id, n.Members()); ok && a.ID != n.ID() {
		return &rpcerr.NotOwnerError{Log: name, Owner: a.Addr}
	}
	err = n.Acquire(ctx, id)
	if oe, ok := errors.AsType[*cluster.OwnedError](err); ok {
		return &rpcerr.NotOwnerError{Log: name, Owner: oe.Owner.Addr}
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	fresh := s.served[id] == ""
	s.served[id] = name
	s.mu.Unlock()
	if fresh {
		// A handle from before, when another node served the log, is
		// stale: load it again.
		s.c.CloseLog(name)
		s.log.Info("serving log", "log", name, "id", id)
	}
	return nil
}

// serving reports whether this node has taken the log and not given it up.
func (s *Server) serving(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[id] != ""
}

// logID returns the named log's ID, from a cache: IDs never change.
func (s *Server) logID(ctx context.Context, name string) (uint64, error) {
	s.mu.Lock()
	id, ok := s.ids[name]
	s.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := s.c.LogID(ctx, name)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.ids[name] = id
	s.mu.Unlock()
	return id, nil
}

// forget drops the log's ID after it was deleted, and gives it up.
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
// serving the logs this node no longer owns, and gives up those that
// placement now assigns to another live node.
func (s *Server) balance() {
	n := s.node
	for {
		changed := n.Changed()
		s.mu.Lock()
		var lost, served []uint64
		for id := range s.served {
			served = append(served, id)
			// The view may not show an Acquire yet, so only another
			// owner says the log is gone; a lapsed lease loses the node.
			if m, ok := n.Owner(id); ok && m.ID != n.ID() {
				lost = append(lost, id)
			}
		}
		s.mu.Unlock()
		for _, id := range lost {
			s.unserve(id, "another node serves it")
		}
		_, release := cluster.Plan(n.Members(), served, n.Owners(), n.ID())
		for _, id := range release {
			if s.unserve(id, "it now belongs to another node") {
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
			for _, id := range served {
				s.unserve(id, "the node lost its lease")
			}
			<-s.ctx.Done()
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// releaseTimeout bounds a release.
const releaseTimeout = 5 * time.Second

// unserve ends the writers and streams of log id and forgets it. It
// reports whether this node served it.
func (s *Server) unserve(id uint64, why string) bool {
	s.mu.Lock()
	name := s.served[id]
	delete(s.served, id)
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
