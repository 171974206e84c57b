package wal

import (
	"context"
	"fmt"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
)

// Append queues entries, written by the writer of the given epoch, to be
// committed together in one batch, and returns at once. It fails at once with
// rpcerr.ErrFenced if a newer writer exists, and with rpcerr.ErrClosed after
// Close. o deduplicates and conditions it (engine.Engine's Append).
func (l *Log) Append(epoch uint64, entries []record.Entry, o engine.AppendOptions) (engine.Pending, error) {
	if o.Producer != 0 {
		if err := l.loadDedup(); err != nil {
			return engine.Pending{}, err
		}
	}
	l.mu.Lock()
	if err := engine.Refuse(l.closed, l.failed, epoch == l.epoch); err != nil {
		l.mu.Unlock()
		return engine.Pending{}, err
	}
	p, started, err := l.queue.Add(epoch, entries, o, time.Time{})
	wake := started && l.queue.Len() == 1
	if l.want != 0 {
		// The committer is gathering a round (gather).
		if l.backAt.IsZero() {
			l.backAt = time.Now()
		}
		if l.queue.Added() >= l.want {
			l.want, wake = 0, true // it has what it waits for
		}
	}
	l.mu.Unlock()
	if wake {
		engine.Wake(l.wake)
	}
	return p, err
}

// AppendTick queues a time tick from the writer of the given epoch. Its
// position is the offset the next entry queued after it will get: it is
// delivered, to the readers that asked for ticks, after every entry queued
// before it and before every entry queued after it. Nothing is written; the
// Pending completes when the tick has been delivered to the readers, with
// its position as the offset.
func (l *Log) AppendTick(epoch, t uint64) (engine.Pending, error) {
	l.mu.Lock()
	if err := engine.Refuse(l.closed, l.failed, epoch == l.epoch); err != nil {
		l.mu.Unlock()
		return engine.Pending{}, err
	}
	p := l.queue.AddTick(epoch, t, time.Time{})
	wasIdle := l.queue.Len() == 1
	l.mu.Unlock()
	if wasIdle {
		engine.Wake(l.wake)
	}
	return p, nil
}

// run is the committer: it takes every queued group and writes them in one
// round; with SyncAlways it starts the round's fdatasync in the background
// (pipeline.go) and writes the next rounds while it runs. It returns once
// the log is closed, nothing is queued and every round has settled.
func (l *Log) run() {
	defer close(l.finished)
	var done <-chan struct{} // the end of the flight last seen in the air
	for {
		l.mu.Lock()
		for l.queue.Len() == 0 && !l.closed && !isClosed(done) {
			l.mu.Unlock()
			select {
			case <-l.wake:
			case <-done:
			}
			l.mu.Lock()
		}
		groups := l.queue.Take(l.queue.Len())
		closed := l.closed
		l.mu.Unlock()
		l.commitMu.Lock()
		if len(groups) > 0 {
			l.commit(groups)
		}
		if l.flight != nil && isClosed(l.flight.done) {
			l.settleFlight()
		}
		if closed && len(groups) == 0 {
			l.settleAll()
			l.commitMu.Unlock()
			return
		}
		if l.flight == nil && len(l.written) > 0 {
			l.gather()
			l.startFlight()
		}
		done = nil
		if l.flight != nil {
			done = l.flight.done
		}
		l.commitMu.Unlock()
	}
}

// commit writes groups as one round. With SyncAlways the round waits in
// l.written for a flight to sync it; otherwise it is acknowledged at once.
// When some fail, the queue learns where the log really ends. The caller
// holds commitMu.
func (l *Log) commit(groups []*engine.Group) {
	defer l.rewindQueue(groups)
	l.mu.Lock()
	epoch, failed := l.epoch, l.failed
	l.mu.Unlock()
	if failed == nil && l.owned != nil && !l.owned() {
		failed = engine.NotOwned()
	}
	r := l.newRound()
	for _, g := range groups {
		switch {
		case failed != nil:
			g.Finish(failed)
		case g.Epoch != epoch:
			g.Finish(rpcerr.ErrFenced)
		default:
			r.groups = append(r.groups, g)
			if !g.IsTick {
				r.entries = true
				r.appends += g.Appends
			}
		}
	}
	if len(r.groups) == 0 {
		return
	}
	if r.entries {
		if err := l.write(r); err != nil {
			if r.wrote {
				// The flight in the air may still succeed: its rounds
				// are then acknowledged, and only what was written
				// since it is cut off.
				if l.settleFlight() {
					r.wrote = false
				}
				rounds := append(l.written, r)
				l.written = nil
				l.settleFailed(rounds, err)
				return
			}
			// Refused before anything was written: the round's ticks
			// still take their place.
			ticks := r.groups[:0]
			for _, g := range r.groups {
				if g.IsTick {
					ticks = append(ticks, g)
				} else {
					g.Finish(err)
				}
			}
			r.groups, r.entries, r.appends = ticks, false, 0
			if len(ticks) == 0 {
				return
			}
		}
	}
	if !r.entries {
		for _, g := range r.groups {
			g.Base = l.tail
		}
	}
	r.tail = l.tail
	if l.w != nil {
		r.info = l.w.Info()
	}
	l.written = append(l.written, r)
	if l.opts.Sync != SyncAlways || (l.flight == nil && !hasEntries(l.written)) {
		rounds := l.written
		l.written = nil
		l.settle(rounds, r.tail, r.info)
	}
}

// rewindQueue tells the queue where the log ends once the round of groups
// is over: below what it predicted if some of them failed. The caller
// holds commitMu.
func (l *Log) rewindQueue(groups []*engine.Group) {
	var err error
	for _, g := range groups {
		if g.Failed() {
			err = g.Err()
			break
		}
	}
	if err == nil {
		err = fmt.Errorf("wal: the appends queued before this conditional append failed")
	}
	l.mu.Lock()
	l.queue.Rewind(l.tail, err)
	l.mu.Unlock()
}

// write appends the batches of r to the active segment, rolling it first
// if it is due (after the flight in the air has settled: a roll seals the
// file it syncs). It does not sync. A round that would eat into the disk's
// reserve is refused before anything is written, and a full disk (ENOSPC,
// EDQUOT) fails it with rpcerr.ErrNoSpace: either way the next round tries
// again, and succeeds once space has been freed. r.wrote says whether the
// segment was touched; the caller cuts it back after a failure.
func (l *Log) write(r *round) error {
	incoming, total := 0, int64(0)
	for _, g := range r.groups {
		if !g.IsTick {
			if incoming == 0 {
				incoming = g.B.Bytes()
			}
			total += int64(g.B.Bytes())
		}
	}
	if err := l.opts.Disk.admit(total + segment.HeaderBytes); err != nil {
		return err
	}
	epoch := r.groups[0].Epoch
	if l.w == nil || l.rollDue(incoming) {
		l.settleAll()
		if err := l.roll(epoch, incoming); err != nil {
			return l.opts.Disk.Failed(l.opts.Dir, err)
		}
	}
	r.before, r.beforeTail, r.wrote = l.w.Mark(), l.tail, true
	for _, g := range r.groups {
		if g.IsTick {
			g.Base = l.tail
			continue
		}
		batch := g.B.Finish(l.tail, g.Epoch)
		h := record.Header{BaseOffset: l.tail, Count: uint32(g.B.Count())}
		if err := l.w.Append(batch, h, g.MaxTime); err != nil {
			return l.opts.Disk.Failed(l.opts.Dir, err)
		}
		g.Base, l.tail = l.tail, h.NextOffset()
		g.Release()
	}
	if l.opts.Sync != SyncAlways {
		l.dirty = true
	}
	l.opts.Disk.wrote(total)
	return nil
}

// rollDue reports whether the active segment must be sealed before a batch
// of incoming bytes: it is full or too old. A new writer goes on in the
// segment of the one before it (each batch carries its writer's epoch, and
// Fence has settled every round of the old writer before the new one's
// first is written).
func (l *Log) rollDue(incoming int) bool {
	if l.w == nil {
		return false
	}
	info := l.w.Info()
	return info.Next > info.Base && l.due(info, incoming)
}

// due reports whether the segment info is full for a batch of incoming
// bytes, or too old to take one.
func (l *Log) due(info segment.Info, incoming int) bool {
	full := info.End+int64(incoming) > l.opts.SegmentBytes
	old := l.opts.SegmentAge > 0 && l.opts.Now().Sub(info.Created) >= l.opts.SegmentAge
	return full || old
}

// reopenable returns the newest sealed segment if the next append may go
// on in it instead of in a new file: the log was closed cleanly right after
// it (the closed record says so: it was sealed by Close, not by a roll that
// a crash interrupted), and it is neither full nor too old. The caller holds
// commitMu and has no active segment.
func (l *Log) reopenable(incoming int) (segment.Info, bool) {
	n := len(l.sealed)
	if n == 0 || l.damage != nil {
		return segment.Info{}, false
	}
	last := l.sealed[n-1]
	if last.Next != l.tail || l.closedAt != last.Next || last.Next <= last.Base || l.due(last, incoming) {
		return segment.Info{}, false
	}
	return last, true
}

// roll seals the active segment if rollDue says so and, if there is then
// none, reopens the newest sealed segment if reopenable says so, or creates
// a new one. Nothing written may be waiting for a sync. A failed reopen
// fails the log: whether the footer is still there is unknown until
// recovery reads the file again.
func (l *Log) roll(epoch uint64, incoming int) error {
	if l.rollDue(incoming) {
		mark := l.w.Mark()
		sealed, err := l.w.Seal()
		if err != nil {
			if rerr := l.w.Rewind(mark); rerr != nil {
				l.fail(rerr)
			}
			return err
		}
		l.w, l.dirty = nil, false
		l.mu.Lock()
		l.sealed = append(l.sealed, sealed)
		l.active = segment.Info{}
		l.mu.Unlock()
		l.kickMerge()
	}
	if last, ok := l.reopenable(incoming); ok && l.w == nil {
		w, err := segment.Reopen(l.opts.FS, last)
		if err != nil {
			l.fail(err)
			return err
		}
		l.w = l.ahead(w)
		l.mu.Lock()
		l.sealed = l.sealed[:len(l.sealed)-1]
		l.active = w.Info()
		l.mu.Unlock()
	}
	if l.w == nil {
		w, err := l.create(epoch)
		if err != nil {
			return err
		}
		l.w = l.ahead(w)
		l.mu.Lock()
		l.active = w.Info()
		l.mu.Unlock()
	}
	return nil
}

// create makes the segment of offsets from the tail: over a deleted
// segment's file, if one is kept whose batches are all below the tail
// (takeFree), else in a new file. A file that cannot be written over is
// left for recovery to find, and a new one created instead.
func (l *Log) create(epoch uint64) (*segment.Writer, error) {
	now := l.opts.Now()
	if free := l.takeFree(l.tail); free != "" {
		w, err := segment.CreateOver(l.opts.FS, l.opts.Dir, free, l.tail, epoch, now)
		if err == nil {
			return w, nil
		}
		l.opts.Logger.Warn("could not create a segment over a deleted one's file; creating a new file", "err", err)
	}
	return segment.Create(l.opts.FS, l.opts.Dir, l.tail, epoch, now)
}

// fail makes every later append fail with err until the log is reopened.
func (l *Log) fail(err error) {
	err = fmt.Errorf("tern: log in %s failed and must be reopened to recover: %w", l.opts.Dir, err)
	l.opts.Logger.Error("log failed", "dir", l.opts.Dir, "err", err)
	l.mu.Lock()
	l.failed = err
	l.mu.Unlock()
}

// syncEvery syncs the active segment every SyncEvery, for SyncInterval.
func (l *Log) syncEvery() {
	defer close(l.syncDone)
	ticker := time.NewTicker(l.opts.SyncEvery)
	defer ticker.Stop()
	for {
		select {
		case <-l.stopSync:
			return
		case <-ticker.C:
			l.Sync()
		}
	}
}

// Sync makes every acknowledged append durable, for the modes that
// acknowledge before syncing. A failed sync fails the log.
func (l *Log) Sync() error {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	if l.w == nil || !l.dirty {
		return nil
	}
	l.syncs.Add(1)
	if err := l.opts.Disk.sync(l.w); err != nil {
		l.fail(err)
		return err
	}
	l.dirty = false
	return nil
}

// Fence makes epoch the log's writer epoch; the caller has stored it durably
// first. When Fence returns, no append of an older epoch will be
// acknowledged: the round in flight has finished and queued appends of older
// epochs have failed with rpcerr.ErrFenced.
//
// owned, if not nil, is asked before every commit round whether the writer
// can still prove it holds epoch (its metadata claim); when it says no, the
// round fails with rpcerr.ErrFenced and nothing of it is written. It must be cheap.
func (l *Log) Fence(_ context.Context, epoch uint64, owned func() bool) error {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	// The rounds written are of the old epoch: they are acknowledged, or
	// fail, before the fence returns.
	l.settleAll()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return rpcerr.ErrClosed
	}
	if epoch <= l.epoch {
		return fmt.Errorf("wal: fence with epoch %d, which is not above the current %d", epoch, l.epoch)
	}
	l.epoch, l.owned = epoch, owned
	l.queue.Fail(rpcerr.ErrFenced)
	// The groups taken and not committed are of the old epoch and will
	// fail: the log ends at the tail.
	l.queue.SetEnd(l.tail)
	return nil
}
