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

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
)

// SubOptions configure a new subscription.
type SubOptions struct {
	// From is the first offset the subscription delivers. It must lie
	// between the log's Start and End.
	From Offset
	// FromEnd starts the subscription at the log's end instead of From.
	FromEnd bool
	// Pin makes retention keep the entries the subscription has not yet
	// consumed ("keep until consumed"). Truncate is not held back by pins.
	Pin bool
}

// SubInfo describes a subscription.
type SubInfo struct {
	Log     string
	Name    string
	Created time.Time
	// Cursor is the next offset the subscription delivers: every entry below
	// it has been acknowledged. An acknowledgement is committed to metadata
	// within the client's CommitInterval; Cursor includes those not yet
	// committed.
	Cursor Offset
	Pin    bool
	// Lag is how many entries the subscription has not acknowledged: the
	// log's end minus Cursor.
	Lag uint64
}

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
	active    *Subscriber
	timer     *time.Timer // a pending commit, or nil
	deleted   bool
}

// loadSubs reads the log's subscriptions, which pinning retention needs.
func (l *Log) loadSubs(ctx context.Context) error {
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
func (l *Log) pinnedFrom() uint64 {
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

func (l *Log) subErr(name string, err error) error {
	switch {
	case errors.Is(err, meta.ErrSubNotFound):
		return fmt.Errorf("%w: %q on log %q", ErrSubNotFound, name, l.name)
	case errors.Is(err, meta.ErrSubExist):
		return fmt.Errorf("%w: %q on log %q", ErrSubExist, name, l.name)
	}
	return l.c.metaErr(l.name, err)
}

// CreateSubscription creates a durable subscription on the log.
func (l *Log) CreateSubscription(ctx context.Context, name string, opts SubOptions) (SubInfo, error) {
	if err := ValidateSubName(name); err != nil {
		return SubInfo{}, err
	}
	if l.remote != nil {
		return l.remote.CreateSubscription(ctx, name, opts)
	}
	st := l.eng.Stats()
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
	s, err := l.c.meta.CreateSub(ctx, l.name, meta.Sub{Name: name, Cursor: from, Pin: opts.Pin})
	if err != nil {
		return SubInfo{}, l.subErr(name, err)
	}
	state := &subState{meta: s, committed: s.Cursor, acked: s.Cursor}
	l.subs[name] = state
	return l.subInfo(state, st.End), nil
}

// subInfo describes state; the caller holds subsMu.
func (l *Log) subInfo(s *subState, end uint64) SubInfo {
	info := SubInfo{Log: l.name, Name: s.meta.Name, Created: s.meta.Created, Cursor: Offset(s.acked), Pin: s.meta.Pin}
	if end > s.acked {
		info.Lag = end - s.acked
	}
	return info
}

// Subscription describes one of the log's subscriptions.
func (l *Log) Subscription(ctx context.Context, name string) (SubInfo, error) {
	if err := ValidateSubName(name); err != nil {
		return SubInfo{}, err
	}
	if l.remote != nil {
		return l.remote.Subscription(ctx, name)
	}
	if err := ctx.Err(); err != nil {
		return SubInfo{}, err
	}
	end := l.eng.Stats().End
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	s, ok := l.subs[name]
	if !ok {
		return SubInfo{}, l.subErr(name, meta.ErrSubNotFound)
	}
	return l.subInfo(s, end), nil
}

// Subscriptions describes the log's subscriptions, by name.
func (l *Log) Subscriptions(ctx context.Context) ([]SubInfo, error) {
	if l.remote != nil {
		return l.remote.Subscriptions(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	end := l.eng.Stats().End
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	infos := make([]SubInfo, 0, len(l.subs))
	for _, s := range l.subs {
		infos = append(infos, l.subInfo(s, end))
	}
	slices.SortFunc(infos, func(a, b SubInfo) int { return strings.Compare(a.Name, b.Name) })
	return infos, nil
}

// DeleteSubscription deletes a subscription. Its subscriber, if any, fails
// with ErrClosed.
func (l *Log) DeleteSubscription(ctx context.Context, name string) error {
	if err := ValidateSubName(name); err != nil {
		return err
	}
	if l.remote != nil {
		return l.remote.DeleteSubscription(ctx, name)
	}
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

// Seek moves a subscription's cursor to to, which must lie between the log's
// Start and End, forwards or backwards. Its subscriber, if any, goes on from
// there; acknowledgements it sends for entries delivered before the Seek are
// ignored.
func (l *Log) Seek(ctx context.Context, name string, to Offset) error {
	if err := ValidateSubName(name); err != nil {
		return err
	}
	if l.remote != nil {
		return l.remote.Seek(ctx, name, to)
	}
	st := l.eng.Stats()
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

// Subscriber receives a subscription's entries from its cursor, in offset
// order, and acknowledges them. Delivery is at least once: entries delivered
// but not acknowledged, or acknowledged but not yet committed when the
// process died, are delivered again to the next Subscriber. A subscription
// has one Subscriber at a time; a new one takes over and the older one's
// calls fail with ErrClosed. A Subscriber is not safe for concurrent use,
// except Ack, which may be called from any goroutine.
type Subscriber struct {
	remote *remoteSubscriber // set for a subscriber on a server

	l     *Log
	state *subState
	name  string
	ticks bool

	r   engine.Reader
	gen uint64 // the generation r reads for

	done   context.Context // canceled when the Subscriber is superseded or closed
	cancel context.CancelFunc
	// seeked is canceled by Seek, to wake a NextBatch waiting at the old
	// position; guarded by the log's subsMu.
	seeked     context.Context
	seekCancel context.CancelFunc

	mu        sync.Mutex
	delivered uint64 // the offset after the last entry returned
	err       error  // set when the Subscriber is closed or superseded
}

// Subscribe starts receiving the subscription's entries from its cursor.
// A cursor below the log's start (because of truncation or retention) fails
// with a *TruncatedError: Seek the subscription to go on.
func (l *Log) Subscribe(ctx context.Context, name string, opts ...ReadOption) (*Subscriber, error) {
	if err := ValidateSubName(name); err != nil {
		return nil, err
	}
	if l.remote != nil {
		return l.remote.Subscribe(ctx, name, readOpts(opts))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	s, ok := l.subs[name]
	if !ok {
		return nil, l.subErr(name, meta.ErrSubNotFound)
	}
	r, err := l.eng.NewReader(s.acked, readOpts(opts).ticks)
	if err != nil {
		return nil, err
	}
	if s.active != nil {
		s.active.supersede(fmt.Errorf("%w: subscription %q was taken over by a newer subscriber", ErrClosed, name))
	}
	sub := &Subscriber{l: l, state: s, name: name, ticks: readOpts(opts).ticks, r: r, gen: s.gen, delivered: s.acked}
	sub.done, sub.cancel = context.WithCancel(context.Background())
	sub.seeked, sub.seekCancel = context.WithCancel(context.Background())
	s.active = sub
	return sub, nil
}

// Next returns the next entry (or tick), waiting at the tail until ctx ends.
func (s *Subscriber) Next(ctx context.Context) (Entry, error) {
	if s.remote != nil {
		return s.remote.Next(ctx)
	}
	es, err := s.NextBatch(ctx, 1)
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

// NextBatch returns up to max entries (and ticks), at least one, waiting at
// the tail for the first until ctx ends.
func (s *Subscriber) NextBatch(ctx context.Context, max int) ([]Entry, error) {
	if s.remote != nil {
		return s.remote.NextBatch(ctx, max)
	}
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
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = entry(e)
	}
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
func (s *Subscriber) nextBatch(ctx, seeked context.Context, max int) ([]engine.Entry, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.done, cancel)()
	defer context.AfterFunc(seeked, cancel)()
	return s.r.NextBatch(ctx, max)
}

func (s *Subscriber) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// reposition reopens the reader at the cursor after a Seek, and returns
// the context the next Seek cancels.
func (s *Subscriber) reposition() (context.Context, error) {
	l := s.l
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	if err := s.closedErr(); err != nil {
		return nil, err
	}
	if s.gen == s.state.gen {
		return s.seeked, nil
	}
	r, err := l.eng.NewReader(s.state.acked, s.ticks)
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

// Ack acknowledges every entry up to and including off: the subscription
// will not deliver them again once the acknowledgement is committed (within
// the client's CommitInterval, or at Close). Acknowledging an entry not yet
// delivered fails with ErrOutOfRange; an acknowledgement below an earlier
// one changes nothing.
func (s *Subscriber) Ack(off Offset) error {
	if s.remote != nil {
		return s.remote.Ack(off)
	}
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
func (l *Log) commitSub(s *subState) {
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
func (s *Subscriber) supersede(err error) {
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

// Close commits the acknowledged cursor and ends the Subscriber. It must not
// run concurrently with Next or NextBatch.
func (s *Subscriber) Close() error {
	if s.remote != nil {
		return s.remote.Close()
	}
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
	return s.r.Close()
}

// closeSubs ends the log's subscribers and commits their cursors.
func (l *Log) closeSubs() error {
	l.subsMu.Lock()
	l.subsClosed = true
	var states []*subState
	for _, s := range l.subs {
		if s.active != nil {
			s.active.supersede(ErrClosed)
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
