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
	wasIdle := started && l.queue.Len() == 1
	l.mu.Unlock()
	if wasIdle {
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

// run is the committer: it takes every queued group and commits them in one
// round, until the log is closed and nothing is queued.
func (l *Log) run() {
	defer close(l.finished)
	for {
		l.mu.Lock()
		for l.queue.Len() == 0 && !l.closed {
			l.mu.Unlock()
			<-l.wake
			l.mu.Lock()
		}
		groups := l.queue.Take(l.queue.Len())
		l.mu.Unlock()
		if len(groups) == 0 {
			return
		}
		l.commit(groups)
	}
}

// commit writes groups, syncs as the log's mode asks, and acknowledges them.
// When some fail, the queue learns where the log really ends.
func (l *Log) commit(groups []*engine.Group) {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	defer l.rewindQueue(groups)
	l.mu.Lock()
	epoch, failed := l.epoch, l.failed
	l.mu.Unlock()
	if failed == nil && l.owned != nil && !l.owned() {
		failed = engine.NotOwned()
	}
	live := groups[:0]
	entries := false
	for _, g := range groups {
		switch {
		case failed != nil:
			g.Finish(failed)
		case g.Epoch != epoch:
			g.Finish(rpcerr.ErrFenced)
		default:
			live = append(live, g)
			entries = entries || !g.IsTick
		}
	}
	if len(live) == 0 {
		return
	}
	if entries {
		if err := l.write(live); err != nil {
			// The ticks of the round are still delivered, at the tail the
			// failed entries leave.
			for _, g := range live {
				if g.IsTick {
					g.Base = l.tail
				} else {
					g.Finish(err)
				}
			}
			l.publish(live)
			for _, g := range live {
				if g.IsTick {
					g.Finish(nil)
				}
			}
			return
		}
	} else {
		for _, g := range live {
			g.Base = l.tail
		}
	}
	l.publish(live)
	for _, g := range live {
		g.Finish(nil)
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

// write appends the groups to the active segment, rolling it first if it is
// due, and syncs in SyncAlways mode. On failure it restores the segment to
// its state before the round, or marks the log failed. A round that would
// eat into the disk's reserve is refused before anything is written, and a
// full disk (ENOSPC, EDQUOT) fails it with rpcerr.ErrNoSpace: either way
// the next round tries again, and succeeds once space has been freed.
func (l *Log) write(groups []*engine.Group) error {
	incoming, total := 0, int64(0)
	for _, g := range groups {
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
	if err := l.roll(groups[0].Epoch, incoming); err != nil {
		return l.opts.Disk.Failed(l.opts.Dir, err)
	}
	mark, tail := l.w.Mark(), l.tail
	err := func() error {
		for _, g := range groups {
			if g.IsTick {
				g.Base = l.tail
				continue
			}
			batch := g.B.Finish(l.tail, g.Epoch)
			h := record.Header{BaseOffset: l.tail, Count: uint32(g.B.Count())}
			if err := l.w.Append(batch, h, g.MaxTime); err != nil {
				return err
			}
			g.Base, l.tail = l.tail, h.NextOffset()
		}
		if l.opts.Sync == SyncAlways {
			l.syncs.Add(1)
			return l.opts.Disk.sync(l.w)
		}
		l.dirty = true
		return nil
	}()
	if err != nil {
		l.tail = tail
		// Cut back to the last synced end: a write the disk could not
		// take whole leaves no partial batch behind it, and the segment
		// takes the next round from there. A failed fdatasync is not
		// retried: its round's data is cut off, and the sync after the
		// cut covers only what earlier syncs had.
		if rerr := l.w.Rewind(mark); rerr != nil {
			l.fail(rerr)
		} else {
			l.opts.Logger.Warn("append failed; segment cut back to its last good size", "path", l.w.Info().Path, "err", err)
		}
		return l.opts.Disk.Failed(l.opts.Dir, err)
	}
	l.opts.Disk.wrote(total)
	return nil
}

// roll seals the active segment if it is full, too old, or was created by
// another writer, and creates a new one if there is none.
func (l *Log) roll(epoch uint64, incoming int) error {
	if l.w != nil {
		info := l.w.Info()
		nonEmpty := info.Next > info.Base
		full := info.End+int64(incoming) > l.opts.SegmentBytes
		old := l.opts.SegmentAge > 0 && l.opts.Now().Sub(info.Created) >= l.opts.SegmentAge
		if nonEmpty && (full || old || info.Epoch != epoch) {
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
		}
	}
	if l.w == nil {
		w, err := segment.Create(l.opts.FS, l.opts.Dir, l.tail, epoch, l.opts.Now())
		if err != nil {
			return err
		}
		l.w = w
		l.mu.Lock()
		l.active = w.Info()
		l.mu.Unlock()
	}
	return nil
}

// publish makes the committed appends visible to readers, hands the round's
// ticks to the readers that take them, and wakes the readers.
func (l *Log) publish(round []*engine.Group) {
	l.mu.Lock()
	l.end = l.tail
	if l.w != nil {
		l.active = l.w.Info()
	}
	for _, g := range round {
		if g.IsTick && !g.Failed() {
			l.readers.Tick(engine.Tick{Time: g.Tick, Offset: g.Base})
		}
	}
	close(l.advanced)
	l.advanced = make(chan struct{})
	l.mu.Unlock()
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
