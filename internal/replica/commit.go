package replica

import (
	"fmt"
	"slices"
	"sync"

	"github.com/ternwal/tern/internal/vfs"
)

// work is what one group commit does for one segment.
type work struct {
	seg    *segment
	file   vfs.File // nil: create the journal, with header epoch
	epoch  uint64
	writes []op   // fragments to frame and append, in order
	next   uint64 // the durable count once they are written
	state  *state // to persist after the fragments, if set
	cut    int64  // journal size to truncate to for a seal, or -1
	// Set by the commit.
	created bool
	reused  string // the free file written over, to be renamed to the journal's name
	err     error
}

// round is one group commit: its ops, taken from the queue together, and
// the work they make, segment by segment.
type round struct {
	ops    []op
	works  []*work
	bySeg  map[*segment]*work
	synced chan struct{} // closed once syncAll is done
}

// run is the committer: it takes everything queued, writes it as one
// group, makes it durable and reports it, and repeats until the Store is
// closed and the queue empty.
//
// It is pipelined as a group commit on one file is: while a round's
// journals are being synced, the next round's fragments are written
// (appendsOnly says when that may be), so a sync covers what arrived during
// the one before it instead of the disk idling while the committer writes.
// Rounds are still reported in order, a round only once its own sync is
// done, and never after an earlier round failed its segment (report): no
// fragment is reported durable before the sync that covers it, nor after a
// failed sync of the fragments before it.
func (s *Store) run() {
	defer close(s.stopped)
	var (
		headers []byte
		prev    *round // written, its sync under way; not yet reported
	)
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.mu.Unlock()
			if prev == nil {
				<-s.kick
			} else {
				select {
				case <-s.kick:
				case <-prev.synced:
					s.finish(prev)
					prev = nil
				}
			}
			s.mu.Lock()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			if prev == nil {
				return
			}
			s.finish(prev)
			prev = nil
			continue
		}
		ops := s.queue
		s.queue, s.spare = s.spare, nil
		works, bySeg := s.plan(ops)
		if prev != nil && !appendsOnly(ops, works) {
			// Creations, state files, seals, barriers: planned on the
			// state that the round under way is yet to report.
			s.mu.Unlock()
			s.finish(prev)
			prev = nil
			s.mu.Lock()
			works, bySeg = s.plan(ops)
		}
		s.mu.Unlock()

		for _, w := range works {
			if w.err == nil {
				w.err = s.write(w, &headers)
			}
		}
		if prev != nil {
			s.finish(prev)
		}
		r := &round{ops: ops, works: works, bySeg: bySeg, synced: make(chan struct{})}
		go func() {
			defer close(r.synced)
			s.syncAll(r.works)
		}()
		prev = r
	}
}

// appendsOnly reports whether a round's works only append fragments to
// journals that exist, with nothing else for their segments to persist:
// such a round may be planned and written while the round before it is
// being synced, since its plan does not depend on what that round will
// report.
func appendsOnly(ops []op, works []*work) bool {
	for _, o := range ops {
		if !o.write {
			return false
		}
	}
	for _, w := range works {
		if w.err != nil || w.file == nil || w.state != nil || w.cut >= 0 {
			return false
		}
	}
	return true
}

// finish waits for r's sync, reports its outcome and completes its ops, in
// the order of the calls.
func (s *Store) finish(r *round) {
	<-r.synced
	s.report(r.works)
	for _, o := range r.ops {
		o.done(r.bySeg[o.seg].err)
	}
	clear(r.ops)
	s.mu.Lock()
	if s.spare == nil {
		s.spare = r.ops[:0]
	}
	s.mu.Unlock()
}

// plan groups ops by segment, with s.mu held, and takes down what each
// segment's state asks to persist along with them.
func (s *Store) plan(ops []op) ([]*work, map[*segment]*work) {
	var works []*work
	bySeg := make(map[*segment]*work)
	for _, o := range ops {
		w := bySeg[o.seg]
		if w == nil {
			seg := o.seg
			w = &work{seg: seg, file: seg.file, epoch: seg.initEpoch, next: seg.durable, cut: -1, err: seg.failed}
			bySeg[seg] = w
			works = append(works, w)
		}
		if o.write {
			w.writes = append(w.writes, o)
			w.next = o.n + 1
		}
	}
	for _, w := range works {
		seg := w.seg
		persisted := seg.persisted
		if w.file == nil {
			persisted = seg.initEpoch // the header will hold it
		}
		st := state{epoch: seg.fenced, sealed: seg.sealed, count: seg.durable}
		if seg.sealSet && !seg.sealed {
			st.sealed, st.count = true, seg.sealTo
			end := int64(headerBytes)
			if seg.sealTo > 0 {
				end = seg.frags[seg.sealTo-1].end()
			}
			if end < seg.end || seg.zeros.Tail() { // the zeros go too
				w.cut = end
			}
		}
		if seg.fenced > persisted || (st.sealed && !seg.sealed) {
			w.state = &st
		}
	}
	return works, bySeg
}

// write creates the segment's journal if needed and appends its fragments:
// their frames' headers and the fragments' own buffers, in one writev.
// headers is the committer's buffer for the headers, reused.
func (s *Store) write(w *work, headers *[]byte) error {
	id := w.seg.id
	path := journalPath(s.dir, id)
	bufs := make([][]byte, 0, 1+2*len(w.writes))
	if w.file == nil {
		if err := s.ensureLogDir(id.Log); err != nil {
			return err
		}
		var f vfs.File
		var err error
		if w.reused = s.takeFree(); w.reused != "" {
			f, err = s.fs.Reuse(w.reused)
			if err != nil {
				return fmt.Errorf("replica: create %s over the dropped journal %s: %w", path, w.reused, err)
			}
		} else if f, err = s.fs.Create(path); err != nil {
			return fmt.Errorf("replica: create %s: %w", path, err)
		}
		w.file, w.created = f, true
		bufs = append(bufs, encodeHeader(header{id: id, epoch: w.epoch, nonce: w.seg.nonce}))
		w.seg.zeros.Start(f, 0, s.ahead, s.round)
		w.seg.zerosOn, w.seg.written = true, 0
	} else if !w.seg.zerosOn {
		// A journal recovered at Open: its frames end where it does.
		end := size(w.file)
		w.seg.zeros.Start(w.file, end, s.ahead, s.round)
		w.seg.zerosOn, w.seg.written = true, end
	}
	hs := slices.Grow((*headers)[:0], frameHeaderBytes*len(w.writes))[:frameHeaderBytes*len(w.writes)]
	*headers = hs
	for i, o := range w.writes {
		h := (*[frameHeaderBytes]byte)(hs[i*frameHeaderBytes:])
		putFrameHeader(h, w.seg.nonce, o.n, len(o.data), o.sum)
		bufs = append(bufs, h[:], o.data)
	}
	n, err := vfs.WriteBuffers(w.file, bufs)
	if err != nil {
		return fmt.Errorf("replica: write %s: %w", path, err)
	}
	w.seg.written += n
	w.seg.zeros.Wrote(w.file, w.seg.written)
	return nil
}

// placeReused gives a reused file its journal's name, once its header and
// first frames are durable: a crash cannot leave the name on a file that
// still holds another journal's header. The free directory is synced
// before the log's (by syncAll), so that no crash leaves the file under
// both names.
func (s *Store) placeReused(w *work) error {
	path := journalPath(s.dir, w.seg.id)
	if err := s.fs.Rename(w.reused, path); err != nil {
		return fmt.Errorf("replica: create %s: %w", path, err)
	}
	if err := s.fs.SyncDir(s.freeDir()); err != nil {
		return fmt.Errorf("replica: create %s: %w", path, err)
	}
	return nil
}

// ensureLogDir creates a log's directory, durably, the first time. Only the
// committer (and Open, before it starts) calls it.
func (s *Store) ensureLogDir(log uint64) error {
	if s.logDirs[log] {
		return nil
	}
	dir := logDir(s.dir, log)
	if err := vfs.MkdirAllSync(s.fs, dir); err != nil {
		return fmt.Errorf("replica: create %s: %w", dir, err)
	}
	s.logDirs[log] = true
	return nil
}

// syncAll makes the group durable: it syncs every journal written (in
// parallel), then the directories of new journals, then persists the state
// files and truncations that seals and fences asked for.
func (s *Store) syncAll(works []*work) {
	var wg sync.WaitGroup
	for _, w := range works {
		if w.err == nil && (w.created || len(w.writes) > 0) {
			wg.Go(func() {
				if err := w.file.Sync(); err != nil {
					w.err = fmt.Errorf("replica: sync %s: %w", journalPath(s.dir, w.seg.id), err)
				} else {
					w.seg.zeros.Synced()
				}
			})
		}
	}
	wg.Wait()
	for _, w := range works {
		if w.err == nil && w.reused != "" {
			w.err = s.placeReused(w)
		}
	}
	synced := make(map[uint64]error)
	for _, w := range works {
		if w.err != nil || !w.created {
			continue
		}
		log := w.seg.id.Log
		err, ok := synced[log]
		if !ok {
			dir := logDir(s.dir, log)
			if err = s.fs.SyncDir(dir); err != nil {
				err = fmt.Errorf("replica: sync %s: %w", dir, err)
			}
			synced[log] = err
		}
		w.err = err
	}
	for _, w := range works {
		if w.err == nil && w.state != nil {
			w.err = s.writeState(w.seg.id, *w.state)
		}
		if w.err == nil && w.cut >= 0 {
			w.err = truncate(journalPath(s.dir, w.seg.id), w.file, w.cut)
		}
	}
}

// report publishes a group's outcome, with the effects of a seal, and fails
// the segments whose I/O failed; each work's err is then the error of its
// segment's ops.
func (s *Store) report(works []*work) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range works {
		seg := w.seg
		if w.created {
			seg.file = w.file
		}
		if w.err == nil && seg.failed != nil {
			// An earlier round, written before this one, failed: what
			// this one wrote after it is not durable as a prefix.
			w.err = seg.failed
		}
		if w.err != nil {
			if seg.failed == nil {
				seg.failed = fmt.Errorf("replica: segment %v failed: %w", seg.id, w.err)
				s.log.Error("replica: segment failed", "segment", seg.id, "err", w.err)
			}
			w.err = seg.failed
			continue
		}
		seg.durable = w.next
		if w.created {
			seg.persisted = max(seg.persisted, w.epoch)
		}
		if w.state != nil {
			seg.persisted = max(seg.persisted, w.state.epoch)
			if w.state.sealed && !seg.sealed {
				s.seal(seg, w.state.count)
			}
		}
	}
}

// seal applies a durable seal in memory, with s.mu held: fragments from
// count on are gone; the others stay where they are, in memory or not.
func (s *Store) seal(seg *segment, count uint64) {
	end := int64(headerBytes)
	if count > 0 {
		end = seg.frags[count-1].end()
	}
	for n := count; n < uint64(len(seg.frags)); n++ {
		s.forget(seg, n)
	}
	seg.frags = seg.frags[:count:count]
	s.diskBytes -= seg.end - end
	seg.memFrom, seg.end = min(seg.memFrom, count), end
	seg.durable = count
	seg.sealed, seg.sealing = true, false
}

// writeState replaces a segment's state file, durably: a new file under a
// temporary name (tmpSuffix), synced, renamed over the old one, and the
// rename synced.
func (s *Store) writeState(id SegmentID, st state) error {
	path := statePath(s.dir, id)
	if err := vfs.ReplaceFile(s.fs, path, encodeState(id, st)); err != nil {
		return fmt.Errorf("replica: write %s: %w", path, err)
	}
	return nil
}

// truncate cuts the journal at path, open as f, at size, durably.
func truncate(path string, f vfs.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("replica: truncate %s at byte %d: %w", path, size, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("replica: sync %s: %w", path, err)
	}
	return nil
}
