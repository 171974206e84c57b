package replica

import (
	"fmt"

	"github.com/ternwal/tern/client/rpcerr"
)

// Fence refuses, from now on, adds to seg with an epoch below epoch, and
// returns the durable fragment count once every add queued before it is
// durable or failed and the new fenced epoch is durable. Fencing at the
// fenced epoch again only waits; below it fails with rpcerr.ErrSegmentFenced. An unknown
// segment is created, empty. Adds at epoch or above are still accepted.
func (s *Store) Fence(id SegmentID, epoch uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, rpcerr.ErrReplicaClosed
	}
	seg := s.segs[id]
	if seg == nil {
		seg = s.newSegment(id, epoch)
	}
	if err := seg.usable(); err != nil {
		return 0, err
	}
	if epoch < seg.fenced {
		return 0, fmt.Errorf("%w: epoch %d is below %d on %v", rpcerr.ErrSegmentFenced, epoch, seg.fenced, id)
	}
	raised := epoch > seg.fenced
	seg.fenced = epoch
	if err := s.barrier(seg); err != nil {
		return 0, err
	}
	if raised {
		s.log.Info("replica: segment fenced", "segment", id, "epoch", epoch, "count", seg.durable)
	}
	return seg.durable, nil
}

// Seal discards seg's fragments from count on and closes the segment to
// adds (rpcerr.ErrSegmentSealed), durably: the fragments beyond count are cut from the
// journal. count must not exceed the durable count. Sealing again at the
// same count succeeds; at another count it fails with rpcerr.ErrSegmentSealed. A sealed
// segment's fragments stay in memory, for Offload, until it is offloaded or
// dropped or memory is needed.
func (s *Store) Seal(id SegmentID, count uint64) error {
	seg, err := s.lookupLocked(id)
	if err != nil {
		return err
	}
	seg.opMu.Lock()
	defer seg.opMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := seg.usable(); err != nil {
		return err
	}
	if seg.sealed {
		if count != seg.durable {
			return fmt.Errorf("%w: %v is sealed at %d fragments, not %d", rpcerr.ErrSegmentSealed, id, seg.durable, count)
		}
		return nil
	}
	if count > uint64(len(seg.frags)) {
		return fmt.Errorf("%w: seal %v at %d fragments, it has %d", rpcerr.ErrInvalid, id, count, len(seg.frags))
	}
	// Refuse adds, and let those queued finish.
	seg.sealing = true
	if err := s.barrier(seg); err != nil {
		seg.sealing = false
		return err
	}
	if count > seg.durable {
		seg.sealing = false
		return fmt.Errorf("%w: seal %v at %d fragments, %d are durable", rpcerr.ErrInvalid, id, count, seg.durable)
	}
	seg.sealTo, seg.sealSet = count, true
	if err := s.barrier(seg); err != nil {
		return err
	}
	s.log.Info("replica: segment sealed", "segment", id, "count", count)
	return nil
}
