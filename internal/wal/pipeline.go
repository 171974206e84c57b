package wal

import (
	"time"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/segment"
)

// The pipeline: with SyncAlways, a round's fdatasync runs in a goroutine of
// its own (a flight) while the committer writes the next rounds, which wait
// in Log.written; when the flight returns, its rounds are acknowledged and
// the rounds written meanwhile, with what was queued since, go into the next
// flight. Every field below is guarded by commitMu, and only a holder of
// commitMu starts, waits for or settles a flight.

// gatherMax bounds how long the committer waits, after acknowledging a
// flight, for the producers it acknowledged to append again.
const gatherMax = time.Millisecond

// preciseGather: a gather waiting for at most this many producers also
// sets the log's alarm (alarm_linux.go). With few producers to wait for the
// process is mostly idle while it waits, and the runtime's timers are then
// up to a millisecond late; with many, the producers keep the CPUs busy,
// the runtime's timers are on time, and the alarm's wake-ups would only
// take CPU from them (conc-1k lost 13% with the alarm on every gather).
const preciseGather = 8

// maxNoShows is how many gathers in a row must wait in vain for the
// producers they acknowledged before the committer stops waiting for them
// (gather).
const maxNoShows = 2

// round is the groups of one commit that took their place: batches written
// (or refused before anything was written) and ticks.
type round struct {
	groups     []*engine.Group // entries and ticks, in order
	appends    int             // the appends in the round's batches
	entries    bool            // some group holds entries
	wrote      bool            // bytes of the round went to the segment: before is valid
	before     segment.Mark    // the segment before the round
	beforeTail uint64          // the log's tail before the round
	tail       uint64          // the log's tail after the round
	info       segment.Info    // the active segment after the round; Path "" if none
}

// flight is an fdatasync in flight and the rounds it covers, oldest first.
// err and took are set before done is closed.
type flight struct {
	rounds []*round
	w      *segment.Writer // the segment synced
	done   chan struct{}
	err    error
	took   time.Duration
}

// hasEntries reports whether a round of rounds holds entries.
func hasEntries(rounds []*round) bool {
	for _, r := range rounds {
		if r.entries {
			return true
		}
	}
	return false
}

// isClosed reports whether ch is closed; false for a nil ch.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return ch != nil
	default:
		return false
	}
}

// writtenSyncer syncs what was appended to w while w goes on taking appends.
type writtenSyncer struct{ w *segment.Writer }

func (s writtenSyncer) Sync() error { return s.w.SyncWritten() }

// startFlight starts the fdatasync covering the written rounds, or settles
// them at once if they hold only ticks. No flight may be in the air.
func (l *Log) startFlight() {
	rounds := l.written
	if len(rounds) == 0 {
		return
	}
	l.written = nil
	if !hasEntries(rounds) {
		last := rounds[len(rounds)-1]
		l.settle(rounds, last.tail, last.info)
		return
	}
	f := &flight{rounds: rounds, w: l.w, done: make(chan struct{})}
	l.flight = f
	l.syncs.Add(1)
	l.flights <- f
}

// syncer runs the flights sent on l.flights, one at a time, until the
// channel is closed. When a flight returns it settles it at once if
// commitMu is free (saving the committer's wake-up on the path of every
// acknowledgement); otherwise the holder of commitMu settles it.
func (l *Log) syncer() {
	defer close(l.syncerDone)
	for f := range l.flights {
		start := time.Now()
		f.err = l.opts.Disk.sync(writtenSyncer{f.w})
		f.took = time.Since(start)
		close(f.done)
		if l.commitMu.TryLock() {
			if l.flight == f {
				l.settleFlight()
			}
			l.commitMu.Unlock()
		}
	}
}

// settleFlight waits for the flight in the air, if any, and acknowledges
// its rounds; if its fdatasync failed, it fails them and every round written
// since (settleFailed). It reports whether the flight failed.
func (l *Log) settleFlight() bool {
	f := l.flight
	if f == nil {
		return false
	}
	<-f.done
	l.flight = nil
	l.lastSync = f.took
	if f.err != nil {
		rounds := append(f.rounds, l.written...)
		l.written = nil
		l.settleFailed(rounds, l.opts.Disk.Failed(l.opts.Dir, f.err))
		return true
	}
	l.acked, l.ackTime = 0, time.Now()
	for _, r := range f.rounds {
		l.acked += r.appends
	}
	last := f.rounds[len(f.rounds)-1]
	l.settle(f.rounds, last.tail, last.info)
	return false
}

// settleAll waits until every round written has been synced and settled:
// before a roll seals the file, and before a fence or close returns.
func (l *Log) settleAll() {
	l.settleFlight()
	if len(l.written) > 0 {
		l.startFlight()
		l.settleFlight()
	}
}

// settleFailed fails the entries of rounds, oldest first, with err: it cuts
// the segment back to where the first of them that wrote began, which the
// last good fdatasync covered, and syncs that (a failed fdatasync is never
// retried as if it had worked). If the cut fails the log fails. The ticks of
// the rounds are delivered at the tail the cut leaves, and the conditional
// appends queued behind fail with err (engine.Queue.Rewind).
func (l *Log) settleFailed(rounds []*round, err error) {
	info := segment.Info{}
	for _, r := range rounds {
		if !r.wrote {
			continue
		}
		l.tail, info = r.beforeTail, r.before.Info()
		if rerr := l.w.Rewind(r.before); rerr != nil {
			l.fail(rerr)
		} else {
			l.opts.Logger.Warn("append failed; segment cut back to its last good size", "path", info.Path, "err", err)
		}
		break
	}
	for _, r := range rounds {
		ticks := r.groups[:0]
		for _, g := range r.groups {
			if g.IsTick {
				g.Base = l.tail
				ticks = append(ticks, g)
			} else {
				g.Finish(err)
			}
		}
		clear(r.groups[len(ticks):])
		r.groups = ticks
	}
	l.settle(rounds, l.tail, info)
	l.mu.Lock()
	l.queue.Rewind(l.tail, err)
	l.mu.Unlock()
}

// settle makes the rounds' entries visible to readers (the log now ends at
// end, in the active segment described by info, if its Path is set), hands
// their ticks to the readers that take them, wakes the readers, and then
// acknowledges the rounds' groups.
func (l *Log) settle(rounds []*round, end uint64, info segment.Info) {
	l.mu.Lock()
	l.end = end
	if info.Path != "" {
		l.active = info
	}
	for _, r := range rounds {
		for _, g := range r.groups {
			if g.IsTick {
				l.readers.Tick(engine.Tick{Time: g.Tick, Offset: g.Base})
			}
		}
	}
	close(l.advanced)
	l.advanced = make(chan struct{})
	l.ackedAt = l.queue.Added()
	l.mu.Unlock()
	for _, r := range rounds {
		for _, g := range r.groups {
			g.Finish(nil)
		}
	}
	l.recycle(rounds)
}

// newRound returns an empty round, recycled if one is spare. The caller
// holds commitMu.
func (l *Log) newRound() *round {
	if n := len(l.spare); n > 0 {
		r := l.spare[n-1]
		l.spare = l.spare[:n-1]
		return r
	}
	return new(round)
}

// recycle keeps the settled rounds, and the slice that held them, for the
// next rounds: a round per fdatasync is otherwise garbage. The caller holds
// commitMu and has no other reference to them.
func (l *Log) recycle(rounds []*round) {
	for _, r := range rounds {
		clear(r.groups)
		*r = round{groups: r.groups[:0]}
		if len(l.spare) < 64 {
			l.spare = append(l.spare, r)
		}
	}
	clear(rounds)
	if l.written == nil {
		l.written = rounds[:0]
	}
}

// gather, called before a flight starts, gives the producers the last
// flight acknowledged the time to append again, so that they join this
// flight instead of the next: a closed loop of N producers then carries
// about N appends a flight instead of N/2. It waits until as many appends
// have been queued since that acknowledgement as it carried, or for half
// the last fdatasync's time after it (at most gatherMax), and writes what
// was queued.
//
// Producers that append on a schedule (an open loop) do not come back, and
// a wait for them holds the round for nothing. So it does not wait when the
// flight acknowledged a single append, nor, once maxNoShows gathers in a
// row have waited in vain, until an append comes back in time. A wait for
// a few producers ends on the log's alarm, as the runtime's timers can be a
// millisecond late in an otherwise idle process (preciseGather).
func (l *Log) gather() {
	acked := l.acked
	l.acked = 0
	if acked < 2 {
		return
	}
	from := l.ackedAt
	target := from + uint64(acked)
	deadline := l.ackTime.Add(min(l.lastSync/2, gatherMax))
	var timeout <-chan time.Time
	for {
		l.mu.Lock()
		added, late := l.queue.Added(), !time.Now().Before(deadline)
		// An append came back in time if it is seen before the
		// deadline or, seen after it (the timer can be late), it came
		// before it (Append notes when the first came while the
		// committer waited).
		inTime := added > from && (!late || (!l.backAt.IsZero() && l.backAt.Before(deadline)))
		if l.gathered(added, from, target, late, inTime) || l.closed {
			// What came waits in the queue, as one batch, until now:
			// taking it as it comes would wake the committer for each.
			l.want, l.backAt = 0, time.Time{}
			groups := l.queue.Take(l.queue.Len())
			l.mu.Unlock()
			if len(groups) > 0 {
				l.commit(groups)
			}
			return
		}
		l.want = target
		l.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
			if acked <= preciseGather && l.ringAlarm(time.Until(deadline)) {
				defer l.alarm.stop()
			}
		}
		select {
		case <-l.wake:
		case <-timeout:
		}
	}
}

// gathered reports whether a gather waiting for the appends from+1 to
// target, of which added-from have come, is over; late says its deadline
// has passed, inTime that some append came back before it. It keeps count
// of the gathers in a row that waited in vain (l.noShows): an append back
// in time resets it, a deadline passed with none counts one.
func (l *Log) gathered(added, from, target uint64, late, inTime bool) bool {
	if inTime {
		l.noShows = 0
	}
	switch {
	case added >= target:
		return true
	case added == from && l.noShows >= maxNoShows:
		return true // an open loop, as far as the last gathers saw
	case late:
		if !inTime {
			l.noShows++
		}
		return true
	}
	return false
}

// ringAlarm has the log's alarm wake the committer after d, making the
// alarm if need be. It reports false if the alarm cannot be made (no
// file descriptor left, or not on Linux): the gather's runtime timer ends
// the wait then.
func (l *Log) ringAlarm(d time.Duration) bool {
	if l.alarm == nil {
		a, err := newAlarm(l.wake)
		if err != nil {
			return false
		}
		l.alarm = a
	}
	l.alarm.set(d)
	return true
}
