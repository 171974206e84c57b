package replica

import (
	"bytes"
	"fmt"

	"github.com/ternwal/tern/client/rpcerr"
)

// Add queues fragment n of seg, sent by a writer (or recoverer) of epoch,
// with sum its frame's checksum (FrameSum), and returns without waiting:
// done is called once, from the committer goroutine, with nil when the
// fragment is durable or the error that failed it; it may be nil. For one
// segment, done calls come in the order of the Adds. done must not block
// nor call a method of the Store that waits (Fence, Seal, Drop, Offload,
// Close). If Add returns an error, done is not called.
//
// The Store keeps data as the fragment's in-memory copy: the caller must not
// modify it afterwards. It writes sum into the journal as it is, without
// checking it against data: a sum that does not match fails the frame's
// check when it is read from the journal. Adding a fragment already stored
// with the same bytes succeeds; done reports when the stored one is
// durable.
func (s *Store) Add(id SegmentID, epoch, n uint64, data []byte, sum uint32, done func(error)) error {
	return s.add(id, epoch, n, data, nil, sum, done)
}

// Buffer returns a buffer of n bytes for a fragment's data, to give to
// AddBuffer: one of a fragment that has left memory, when the Store has
// one of about that size, and otherwise a new one.
func (s *Store) Buffer(n int) []byte { return s.bufs.get(n) }

// AddBuffer is Add for data in a buffer from Buffer, which the Store then
// owns, whatever the outcome: it reuses the buffer once the fragment has
// left memory and no read uses it, or at once if it does not keep it.
func (s *Store) AddBuffer(id SegmentID, epoch, n uint64, data []byte, sum uint32, done func(error)) error {
	return s.add(id, epoch, n, data, &pooled{b: data, refs: 1}, sum, done)
}

// add is Add, for data in b if b is not nil, with one hold on b that it
// releases; a fragment that keeps data takes a hold of its own.
func (s *Store) add(id SegmentID, epoch, n uint64, data []byte, b *pooled, sum uint32, done func(error)) error {
	if len(data) > MaxFragmentBytes {
		return fmt.Errorf("%w: fragment of %d bytes, the limit is %d", rpcerr.ErrInvalid, len(data), MaxFragmentBytes)
	}
	if done == nil {
		done = func(error) {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.release(b)
	if s.closed {
		return rpcerr.ErrReplicaClosed
	}
	seg := s.segs[id]
	if seg == nil {
		if n > 0 {
			return fmt.Errorf("%w: fragment %d of %v, which has none", rpcerr.ErrFragmentGap, n, id)
		}
		if !s.makeRoom(int64(len(data)), headerBytes+frameBytes(len(data))) {
			return fmt.Errorf("%w: no room for a new segment %v", rpcerr.ErrReplicaFull, id)
		}
		seg = s.newSegment(id, epoch)
	}
	if err := seg.usable(); err != nil {
		return err
	}
	switch {
	case epoch < seg.fenced:
		return fmt.Errorf("%w: epoch %d is below %d on %v", rpcerr.ErrSegmentFenced, epoch, seg.fenced, id)
	case seg.sealed || seg.sealing:
		return fmt.Errorf("%w: %v", rpcerr.ErrSegmentSealed, id)
	}
	queued := uint64(len(seg.frags))
	switch {
	case n < queued:
		same, err := sameData(seg, n, data)
		if err != nil {
			return err
		}
		if !same {
			return fmt.Errorf("%w: fragment %d of %v", rpcerr.ErrFragmentMismatch, n, id)
		}
		s.enqueue(op{seg: seg, n: n, done: done})
		return nil
	case n > queued:
		return fmt.Errorf("%w: fragment %d of %v, which has %d", rpcerr.ErrFragmentGap, n, id, queued)
	}
	size := frameBytes(len(data))
	if !s.makeRoom(int64(len(data)), size) {
		return fmt.Errorf("%w: fragment %d of %v", rpcerr.ErrReplicaFull, n, id)
	}
	if n == 0 {
		// The first add's epoch fences older writers, as Fence would.
		seg.fenced = max(seg.fenced, epoch)
	}
	f := fragment{pos: seg.end, size: int64(len(data)), data: data, pool: b}
	f.hold()
	seg.frags = append(seg.frags, f)
	seg.end += size
	seg.memBytes += int64(len(data))
	s.memBytes += int64(len(data))
	s.diskBytes += size
	s.enqueue(op{seg: seg, n: n, data: data, sum: sum, write: true, done: done})
	return nil
}

// makeRoom reports, with s.mu held, whether mem more bytes in memory and
// disk more on disk stay within the limits, once durable fragments have left
// memory to make room: those of sealed segments first, which only an
// offload still reads, oldest first in their segment.
func (s *Store) makeRoom(mem, disk int64) bool {
	if s.maxDisk != 0 && s.diskBytes+disk > s.maxDisk {
		return false
	}
	for _, sealed := range []bool{true, false} {
		for _, seg := range s.segs {
			if seg.sealed != sealed {
				continue
			}
			for s.memBytes+mem > s.maxMem && seg.memFrom < seg.durable {
				s.forget(seg, seg.memFrom)
				seg.memFrom++
			}
			if s.memBytes+mem <= s.maxMem {
				return true
			}
		}
	}
	return s.memBytes+mem <= s.maxMem
}

// forget takes fragment n of seg out of memory, with s.mu held.
func (s *Store) forget(seg *segment, n uint64) {
	f := &seg.frags[n]
	if f.data != nil {
		s.release(f.pool)
		f.data, f.pool = nil, nil
		seg.memBytes -= f.size
		s.memBytes -= f.size
	}
}

// sameData reports whether fragment n of seg, queued or durable, holds
// data; it reads a fragment that has left memory from the journal. The
// caller holds s.mu.
func sameData(seg *segment, n uint64, data []byte) (bool, error) {
	f := seg.frags[n]
	switch {
	case f.size != int64(len(data)):
		return false, nil
	case f.data != nil || f.size == 0:
		return bytes.Equal(f.data, data), nil
	}
	stored := make([]byte, f.size)
	if err := readAt(seg.file, stored, f.pos+frameHeaderBytes); err != nil {
		return false, fmt.Errorf("replica: read fragment %d of %v: %w", n, seg.id, err)
	}
	return bytes.Equal(stored, data), nil
}
