package tern

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
)

// subState is what the process knows of one subscription. Its fields are
// guarded by the log's subsMu, but for commitMu.
type subState struct {
	// commitMu is held across every write of the cursor to metadata, taken
	// before subsMu: a commit in flight must not land after a Seek.
	commitMu  sync.Mutex
	meta      meta.Sub
	committed uint64 // the cursor stored in metadata
	acked     uint64 // the cursor as acknowledged; at least committed
	gen       uint64 // raised by Seek: acknowledgements of an older generation are ignored
	active    *embeddedSubscriber
	timer     *time.Timer // a pending commit, or nil
	deleted   bool
}

// loadSubs reads the log's subscriptions, which pinning retention needs.
func (l *embeddedLog) loadSubs(ctx context.Context) error {
	subs, err := l.c.meta.ListSubs(ctx, l.name)
	if err != nil {
		return l.c.metaErr(l.name, err)
	}
	l.subs = map[string]*subState{}
	for _, s := range subs {
		l.subs[s.Name] = &subState{meta: s, committed: s.Cursor, acked: s.Cursor}
	}
	return nil
}

// pinnedFrom is the lowest committed cursor of the subscriptions that pin
// retention, or the largest offset if none does.
func (l *embeddedLog) pinnedFrom() uint64 {
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	keep := uint64(math.MaxUint64)
	for _, s := range l.subs {
		if s.meta.Pin {
			keep = min(keep, s.committed)
		}
	}
	return keep
}

func (l *embeddedLog) subErr(name string, err error) error {
	switch {
	case errors.Is(err, meta.ErrSubNotFound):
		return fmt.Errorf("%w: %q on log %q", ErrSubNotFound, name, l.name)
	case errors.Is(err, meta.ErrSubExist):
		return fmt.Errorf("%w: %q on log %q", ErrSubExist, name, l.name)
	}
	return l.c.metaErr(l.name, err)
}

func (l *embeddedLog) CreateSubscription(ctx context.Context, name string, opts SubOptions) (SubInfo, error) {
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return SubInfo{}, err
	}
	defer release()
	st := eng.Stats()
	from := uint64(opts.From)
	if opts.FromEnd {
		from = st.End
	}
	switch {
	case from < st.Start:
		return SubInfo{}, &TruncatedError{Offset: from, Start: st.Start}
	case from > st.End:
		return SubInfo{}, fmt.Errorf("%w: subscription %q cannot start at %d, the log ends at %d", ErrOutOfRange, name, from, st.End)
	}
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	if limit := l.c.opts.MaxSubscriptionsPerLog; limit > 0 && len(l.subs) >= limit {
		if _, ok := l.subs[name]; !ok {
			return SubInfo{}, fmt.Errorf("%w: log %q has %d subscriptions, the most a log may have (Options.MaxSubscriptionsPerLog, tern serve --max-subscriptions-per-log): delete one, or raise the limit", ErrLimit, l.name, len(l.subs))
		}
	}
	s, err := l.c.meta.CreateSub(ctx, l.name, meta.Sub{Name: name, Cursor: from, Pin: opts.Pin})
	if err != nil {
		return SubInfo{}, l.subErr(name, err)
	}
	state := &subState{meta: s, committed: s.Cursor, acked: s.Cursor}
	l.subs[name] = state
	return l.subInfo(state, st.End), nil
}

// subInfo describes state; the caller holds subsMu.
func (l *embeddedLog) subInfo(s *subState, end uint64) SubInfo {
	info := SubInfo{Log: l.name, Name: s.meta.Name, Created: s.meta.Created, Cursor: Offset(s.acked), Pin: s.meta.Pin}
	if end > s.acked {
		info.Lag = end - s.acked
	}
	return info
}

func (l *embeddedLog) Subscription(ctx context.Context, name string) (SubInfo, error) {
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return SubInfo{}, err
	}
	defer release()
	end := eng.Stats().End
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	s, ok := l.subs[name]
	if !ok {
		return SubInfo{}, l.subErr(name, meta.ErrSubNotFound)
	}
	return l.subInfo(s, end), nil
}

func (l *embeddedLog) Subscriptions(ctx context.Context) ([]SubInfo, error) {
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	end := eng.Stats().End
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	infos := make([]SubInfo, 0, len(l.subs))
	for _, s := range l.subs {
		infos = append(infos, l.subInfo(s, end))
	}
	slices.SortFunc(infos, func(a, b SubInfo) int { return strings.Compare(a.Name, b.Name) })
	return infos, nil
}

func (l *embeddedLog) DeleteSubscription(ctx context.Context, name string) error {
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	if err := l.c.meta.DeleteSub(ctx, l.name, name); err != nil {
		return l.subErr(name, err)
	}
	if s, ok := l.subs[name]; ok {
		s.deleted = true
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.active != nil {
			s.active.supersede(fmt.Errorf("%w: subscription %q was deleted", ErrClosed, name))
		}
		delete(l.subs, name)
	}
	return nil
}

func (l *embeddedLog) Seek(ctx context.Context, name string, to Offset) error {
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	st := eng.Stats()
	switch {
	case uint64(to) < st.Start:
		return &TruncatedError{Offset: uint64(to), Start: st.Start}
	case uint64(to) > st.End:
		return fmt.Errorf("%w: cannot seek %q to %d, the log ends at %d", ErrOutOfRange, name, to, st.End)
	}
	l.subsMu.Lock()
	s, ok := l.subs[name]
	l.subsMu.Unlock()
	if !ok {
		return l.subErr(name, meta.ErrSubNotFound)
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	if s.deleted {
		return l.subErr(name, meta.ErrSubNotFound)
	}
	if err := l.c.meta.SeekCursor(ctx, l.name, name, uint64(to)); err != nil {
		return l.subErr(name, err)
	}
	s.committed, s.acked = uint64(to), uint64(to)
	s.gen++
	if s.active != nil {
		s.active.seekCancel()
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	return nil
}

// embeddedSubscriber is the Subscriber of a subscription of an embedded log:
// a reader of the log's engine from the subscription's cursor, whose
// acknowledgements the log commits to the metadata store in batches.
type embeddedSubscriber struct {
	l     *embeddedLog
	state *subState
	name  string
	ticks bool
	// maxBytes bounds one NextBatch (WithMaxBatchBytes); 0 is no bound.
	maxBytes int

	eng     engine.Engine // the log's, held open until Close
	release func()
	r       engine.Reader
	gen     uint64 // the generation r reads for

	done   context.Context // canceled when the embeddedSubscriber is superseded or closed
	cancel context.CancelFunc
	// seeked is canceled by Seek, to wake a NextBatch waiting at the old
	// position; guarded by the log's subsMu.
	seeked     context.Context
	seekCancel context.CancelFunc

	mu        sync.Mutex
	delivered uint64 // the offset after the last entry returned
	err       error  // set when the embeddedSubscriber is closed or superseded
}

func (l *embeddedLog) Subscribe(ctx context.Context, name string, opts ...ReadOption) (subscriberImpl, error) {
	o := client.NewReadOptions(opts...)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	eng, release, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	s, ok := l.subs[name]
	if !ok {
		release()
		return nil, l.subErr(name, meta.ErrSubNotFound)
	}
	r, err := eng.NewReader(s.acked, o.Ticks)
	if err != nil {
		release()
		return nil, err
	}
	if s.active != nil {
		s.active.supersede(fmt.Errorf("%w: subscription %q has a newer subscriber", ErrTakenOver, name))
	}
	sub := &embeddedSubscriber{l: l, state: s, name: name, ticks: o.Ticks, maxBytes: o.MaxBatchBytes, eng: eng, release: release, r: r, gen: s.gen, delivered: s.acked}
	sub.done, sub.cancel = context.WithCancel(context.Background())
	sub.seeked, sub.seekCancel = context.WithCancel(context.Background())
	s.active = sub
	return sub, nil
}

func (s *embeddedSubscriber) Next(ctx context.Context) (Entry, error) {
	es, err := s.NextBatch(ctx, 1)
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

func (s *embeddedSubscriber) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	var es []engine.Entry
	for {
		seeked, err := s.reposition()
		if err != nil {
			return nil, err
		}
		es, err = s.nextBatch(ctx, seeked, max)
		if err == nil {
			break
		}
		if serr := s.closedErr(); serr != nil {
			return nil, serr
		}
		if ctx.Err() == nil && seeked.Err() != nil {
			continue // a Seek woke the wait: go on from the new cursor
		}
		return nil, err
	}
	out := entries(es)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	for _, e := range es {
		if !e.IsTick {
			s.delivered = e.Offset + 1
		}
	}
	return out, nil
}

// nextBatch reads from the reader, waking when ctx ends, the Subscriber
// ends, or a Seek cancels seeked.
func (s *embeddedSubscriber) nextBatch(ctx, seeked context.Context, max int) ([]engine.Entry, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.done, cancel)()
	defer context.AfterFunc(seeked, cancel)()
	return s.r.NextBatch(ctx, max, s.maxBytes)
}

func (s *embeddedSubscriber) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// reposition reopens the reader at the cursor after a Seek, and returns
// the context the next Seek cancels.
func (s *embeddedSubscriber) reposition() (context.Context, error) {
	l := s.l
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	if err := s.closedErr(); err != nil {
		return nil, err
	}
	if s.gen == s.state.gen {
		return s.seeked, nil
	}
	r, err := s.eng.NewReader(s.state.acked, s.ticks)
	if err != nil {
		return nil, err
	}
	s.r.Close()
	s.r, s.gen = r, s.state.gen
	s.seeked, s.seekCancel = context.WithCancel(context.Background())
	s.mu.Lock()
	s.delivered = s.state.acked
	s.mu.Unlock()
	return s.seeked, nil
}

func (s *embeddedSubscriber) Ack(off Offset) error {
	s.mu.Lock()
	err, delivered := s.err, s.delivered
	s.mu.Unlock()
	switch {
	case err != nil:
		return err
	case uint64(off) >= delivered:
		return fmt.Errorf("%w: cannot acknowledge offset %d of subscription %q, which has not been delivered (next: %d)", ErrOutOfRange, off, s.name, delivered)
	}
	l := s.l
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	st := s.state
	if s.gen != st.gen || st.deleted || uint64(off)+1 <= st.acked {
		return nil // from before a Seek, or already acknowledged
	}
	st.acked = uint64(off) + 1
	if st.timer == nil {
		st.timer = time.AfterFunc(l.c.opts.CommitInterval, func() { l.commitSub(st) })
	}
	return nil
}

// commitSub commits a subscription's acknowledged cursor.
func (l *embeddedLog) commitSub(s *subState) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	l.subsMu.Lock()
	s.timer = nil
	cursor, name, skip := s.acked, s.meta.Name, s.deleted || s.acked <= s.committed
	l.subsMu.Unlock()
	if skip {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stored, err := l.c.meta.CommitCursor(ctx, l.name, name, cursor)
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	if err != nil {
		if l.subsClosed {
			l.c.opts.Logger.Error("committing a subscription's cursor failed as the log closed; the acknowledgements since the last commit will be delivered again", "log", l.name, "sub", name, "err", err)
			return
		}
		l.c.opts.Logger.Warn("committing a subscription's cursor failed; retrying", "log", l.name, "sub", name, "err", err)
		if s.timer == nil && !s.deleted {
			s.timer = time.AfterFunc(l.c.opts.CommitInterval, func() { l.commitSub(s) })
		}
		return
	}
	s.committed = max(s.committed, stored)
}

// supersede ends the Subscriber with err. The caller holds the log's subsMu.
func (s *embeddedSubscriber) supersede(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.cancel()
	if s.state.active == s {
		s.state.active = nil
	}
}

func (s *embeddedSubscriber) Close() error {
	l := s.l
	l.subsMu.Lock()
	s.supersede(fmt.Errorf("%w: subscriber of %q", ErrClosed, s.name))
	st := s.state
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	l.subsMu.Unlock()
	l.commitSub(st)
	defer s.release()
	return s.r.Close()
}

// closeSubs ends the log's subscribers and commits their cursors.
func (l *embeddedLog) closeSubs() error {
	l.subsMu.Lock()
	l.subsClosed = true
	var states []*subState
	for _, s := range l.subs {
		if s.active != nil {
			s.active.supersede(l.closedErr(ErrClosed))
		}
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		states = append(states, s)
	}
	l.subsMu.Unlock()
	for _, s := range states {
		l.commitSub(s)
	}
	return nil
}
