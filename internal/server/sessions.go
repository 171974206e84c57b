package server

// The writer sessions the Server holds for its clients: opened by
// OpenWriter, reopened by the first append that names one the Server does
// not hold (after a restart, or on the node a log moved to), ended by
// CloseWriter; and the log's shared producer, under epoch 0.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
	"github.com/ternwal/tern/internal/engine"
)

// writer is a tern.Writer the Server opened and holds: an exclusive
// writer's session, or the log's shared producer (epoch 0).
type writer struct {
	*tern.Writer
	log string

	mu      sync.Mutex
	dropped error // why the Server let the writer go; nil while held
}

// drop records why the Server let the writer go: its appends fail with
// cause rather than with the ErrClosed of the closed tern.Writer.
func (w *writer) drop(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped == nil {
		w.dropped = cause
	}
}

// fail is the error to answer for err from the writer. A writer the Server
// still holds that fails with ErrFenced lost its claim without a newer
// session opening through this Server: another node reopened the session
// (the log moved), or the claim's lease lapsed. One whose log failed
// (engine.ErrNeedsWriter) needs its session reopened to recover it. The
// Server lets either go, and the client, told to try again, reopens the
// session, here or where the log is now.
func (s *Server) fail(w *writer, err error) error {
	w.mu.Lock()
	dropped := w.dropped
	w.mu.Unlock()
	switch {
	case dropped != nil && (errors.Is(err, tern.ErrClosed) || errors.Is(err, tern.ErrFenced)):
		return dropped
	case dropped == nil && errors.Is(err, engine.ErrNeedsWriter):
		// An object or quorum log whose uploads or replicas failed: the
		// session reopened by the client's retry recovers it.
		s.dropWriter(w, err)
		return fmt.Errorf("%w: log %q failed under the writer of epoch %d (%v); try again: reopening the session recovers it", rpcerr.ErrUnavailable, w.log, w.Epoch(), err)
	case dropped == nil && errors.Is(err, tern.ErrFenced):
		s.dropWriter(w, err)
		return fmt.Errorf("%w: the writer of log %q, epoch %d, lost its claim here (%v); try again", rpcerr.ErrUnavailable, w.log, w.Epoch(), err)
	}
	return err
}

// detach lets the writer go for cause, leaving its session open.
func (w *writer) detach(cause error) error {
	w.drop(cause)
	if err := w.Detach(); err != nil {
		return fmt.Errorf("close writer of %q, epoch %d: %w", w.log, w.Epoch(), err)
	}
	return nil
}

// detachInBackground detaches ws, which the Server no longer holds. The
// caller holds s.mu, and the Server is not closed.
func (s *Server) detachInBackground(ws []*writer) {
	for _, w := range ws {
		s.closing.Go(func() {
			if err := w.Detach(); err != nil {
				s.log.Warn("closing a writer failed", "log", w.log, "epoch", w.Epoch(), "err", err)
			}
		})
	}
}

// fenceMsg is why a writer of epoch was fenced by newer.
func fenceMsg(name string, epoch, newer uint64) error {
	return fmt.Errorf("%w: epoch %d of log %q was fenced by epoch %d; open a new writer", tern.ErrFenced, epoch, name, newer)
}

// OpenWriter opens a writer session: a new epoch, fencing the older ones, or
// the one the request chose. A session the Server holds is not opened again.
func (s *Server) OpenWriter(ctx context.Context, req *ternpb.OpenWriterRequest) (*ternpb.OpenWriterResponse, error) {
	name, epoch := req.GetLog(), req.GetEpoch()
	l, err := s.open(ctx, name)
	if err != nil {
		return nil, wire(err)
	}
	if epoch != 0 {
		if w := s.held(name, epoch); w != nil {
			return &ternpb.OpenWriterResponse{Epoch: epoch}, nil
		}
	}
	opts := []tern.WriterOption{}
	if epoch != 0 {
		opts = append(opts, tern.WithEpoch(epoch))
		if req.GetReopen() {
			opts = append(opts, tern.OnlyReopen())
		}
	}
	tw, err := l.OpenWriter(ctx, opts...)
	if err != nil {
		return nil, wire(err)
	}
	epoch = tw.Epoch()
	if _, err := s.hold(name, &writer{Writer: tw, log: name}); err != nil {
		return nil, wire(err)
	}
	s.log.Info("writer opened", "log", name, "epoch", epoch)
	return &ternpb.OpenWriterResponse{Epoch: epoch}, nil
}

// held returns the writer of the log's epoch that the Server holds, or nil.
func (s *Server) held(name string, epoch uint64) *writer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writers[name][epoch]
}

// hold keeps w, a writer just opened, and lets go of the writers it fenced.
// If a newer session was opened meanwhile, w is fenced already: hold lets it
// go and returns the writer held for its epoch, nil if none. Epoch 0 is the
// shared producer, which fences no session and no session fences here: the
// metadata store fenced it when a session opened.
func (s *Server) hold(name string, w *writer) (*writer, error) {
	epoch := w.Epoch()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		w.detach(errShutdown)
		return nil, errShutdown
	}
	held := s.writers[name]
	if held == nil {
		held = map[uint64]*writer{}
		s.writers[name] = held
	}
	var fenced []*writer
	newest := true
	for e, old := range held {
		switch {
		case e == 0 || epoch == 0:
			if e == epoch { // a shared producer opened concurrently
				newest = false
			}
			continue
		case e > epoch: // a concurrent OpenWriter won: this writer is fenced already
			newest = false
			continue
		}
		old.drop(fenceMsg(name, e, epoch))
		delete(held, e)
		fenced = append(fenced, old)
	}
	kept := w
	if newest {
		held[epoch] = w
	} else {
		if epoch == 0 {
			w.drop(fmt.Errorf("%w: another shared producer was opened", tern.ErrClosed))
		} else {
			w.drop(fmt.Errorf("%w: epoch %d of log %q was fenced by a newer writer; open a new writer", tern.ErrFenced, epoch, name))
		}
		fenced = append(fenced, w)
		kept = held[epoch]
	}
	s.detachInBackground(fenced)
	for _, old := range fenced {
		if old != w {
			s.log.Info("writer fenced", "log", name, "epoch", old.Epoch())
		}
	}
	return kept, nil
}

// CloseWriter ends a writer session that is still the log's newest, and
// lets go of the Server's writer of it.
func (s *Server) CloseWriter(ctx context.Context, req *ternpb.CloseWriterRequest) (*ternpb.CloseWriterResponse, error) {
	name, epoch := req.GetLog(), req.GetEpoch()
	if epoch == 0 {
		return nil, wire(errInvalid("CloseWriter of log %q names no epoch", name))
	}
	w, err := s.writer(ctx, name, epoch, false)
	if err != nil {
		return nil, wire(err)
	}
	s.mu.Lock()
	if s.writers[name][epoch] == w {
		delete(s.writers[name], epoch)
	}
	s.mu.Unlock()
	w.drop(fmt.Errorf("%w: the writer of log %q, epoch %d, was closed", tern.ErrClosed, name, epoch))
	if err := w.Close(); err != nil {
		return nil, wire(err)
	}
	s.log.Info("writer closed", "log", name, "epoch", epoch)
	return &ternpb.CloseWriterResponse{}, nil
}

// dropWriters lets go of every writer the Server holds for the log.
func (s *Server) dropWriters(name string, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ws []*writer
	for _, w := range s.writers[name] {
		w.drop(cause)
		ws = append(ws, w)
	}
	delete(s.writers, name)
	s.detachInBackground(ws)
}

// dropWriter lets go of w, if the Server still holds it.
func (s *Server) dropWriter(w *writer, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.writers[w.log][w.Epoch()] != w {
		return
	}
	w.drop(cause)
	delete(s.writers[w.log], w.Epoch())
	s.detachInBackground([]*writer{w})
}

// writer returns the writer of the log's epoch, or its shared producer. A
// session the Server does not hold, since it restarted or the log moved to
// it, is reopened if it is still the log's newest; an older one is fenced.
func (s *Server) writer(ctx context.Context, name string, epoch uint64, shared bool) (*writer, error) {
	if shared {
		epoch = 0
	} else if epoch == 0 {
		return nil, fmt.Errorf("%w: an append to log %q names no writer epoch: open a writer, or append as a shared producer", tern.ErrFenced, name)
	}
	if w := s.held(name, epoch); w != nil {
		return w, nil
	}
	l, err := s.open(ctx, name)
	if err != nil {
		return nil, err
	}
	// One reopening per log at a time: two would fence each other.
	unlock, err := s.reopening.lock(ctx, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if w := s.held(name, epoch); w != nil {
		return w, nil
	}
	opts := []tern.WriterOption{tern.Shared()}
	if !shared {
		opts = []tern.WriterOption{tern.WithEpoch(epoch), tern.OnlyReopen()}
	}
	tw, err := l.OpenWriter(ctx, opts...)
	if err != nil {
		return nil, err
	}
	w, err := s.hold(name, &writer{Writer: tw, log: name})
	if err != nil {
		return nil, err
	}
	if w == nil {
		return nil, fmt.Errorf("%w: epoch %d is not the writer of log %q; open a new writer", tern.ErrFenced, epoch, name)
	}
	if !shared {
		s.log.Info("writer session reopened", "log", name, "epoch", epoch)
	}
	return w, nil
}

// keyLocks is a mutex per key, held across I/O: a lock waits for its
// holder or its context. The zero value is ready to use.
type keyLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when its holder unlocks
}

// lock takes key's lock and returns its unlock.
func (k *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	for {
		k.mu.Lock()
		c, busy := k.held[key]
		if !busy {
			if k.held == nil {
				k.held = map[string]chan struct{}{}
			}
			c = make(chan struct{})
			k.held[key] = c
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.held, key)
				k.mu.Unlock()
				close(c)
			}, nil
		}
		k.mu.Unlock()
		select {
		case <-c:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
