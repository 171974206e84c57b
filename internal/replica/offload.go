package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/vfs"
)

// offloadParallel is how many objects Offload uploads at once.
const offloadParallel = 4

// Offload uploads the sealed segment seg to the Store's bucket as objs,
// each the concatenation of its fragments [From, To), with PutIfAbsent, and
// returns when every object is stored. The fragments still in memory are
// uploaded from there, the others read from the journal; once every object
// is stored the segment leaves memory, since its readers are about to move
// to the bucket. The objects must cover the segment's fragments in order,
// each at least one. An object already at a key is success if it holds the
// same bytes (an earlier attempt stored it) and rpcerr.ErrFragmentMismatch otherwise.
// Offload does not drop the segment.
func (s *Store) Offload(ctx context.Context, id SegmentID, objs []Object) error {
	s.mu.Lock()
	seg, err := s.lookup(id)
	switch {
	case err != nil:
	case s.bucket == nil:
		err = fmt.Errorf("%w: offload without a bucket", rpcerr.ErrInvalid)
	case seg.failed != nil:
		err = seg.failed
	case !seg.sealed:
		err = fmt.Errorf("%w: offload of %v, which is not sealed", rpcerr.ErrInvalid, id)
	default:
		next := uint64(0)
		for _, o := range objs {
			if o.From != next || o.To <= o.From {
				err = fmt.Errorf("%w: offload of %v: object %s holds fragments [%d, %d), not from %d on", rpcerr.ErrInvalid, id, o.Key, o.From, o.To, next)
				break
			}
			next = o.To
		}
		if err == nil && next != seg.durable {
			err = fmt.Errorf("%w: offload of %v: the objects hold %d fragments of %d", rpcerr.ErrInvalid, id, next, seg.durable)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, offloadParallel)
	var wg sync.WaitGroup
	for _, o := range objs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.upload(ctx, id, o); err != nil {
				cancel(fmt.Errorf("replica: offload fragments [%d, %d) of %v to %s: %w", o.From, o.To, id, o.Key, err))
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	if seg, err := s.lookup(id); err == nil {
		for n := range seg.frags {
			s.forget(seg, uint64(n))
		}
		seg.memFrom = seg.durable
	}
	s.mu.Unlock()
	return nil
}

func (s *Store) upload(ctx context.Context, id SegmentID, o Object) error {
	parts, held, err := s.sealedParts(id, o.From, o.To)
	defer s.releaseAll(held...)
	if err != nil {
		return err
	}
	err = s.bucket.PutIfAbsent(ctx, o.Key, parts...)
	if errors.Is(err, blob.ErrInvalidKey) {
		return fmt.Errorf("%w: %w", rpcerr.ErrInvalid, err) // the caller's key: no retry helps
	}
	if !errors.Is(err, blob.ErrExist) {
		return err
	}
	stored, err := s.bucket.Get(ctx, o.Key)
	if err != nil {
		return err
	}
	for _, part := range parts {
		if !bytes.HasPrefix(stored, part) {
			return fmt.Errorf("%w: another object is stored at the key", rpcerr.ErrFragmentMismatch)
		}
		stored = stored[len(part):]
	}
	if len(stored) > 0 {
		return fmt.Errorf("%w: another object is stored at the key", rpcerr.ErrFragmentMismatch)
	}
	return nil
}

// sealedParts returns the data of the sealed segment's fragments [from,
// to): those still in memory as they are, the others read from the journal,
// each frame checked. A frame that fails its check gives a CorruptError: the
// bytes on disk are not what was acknowledged, and the caller must take
// them from another replica. The caller must release the holds it returns
// on the buffers of the parts from memory once it no longer uses them.
func (s *Store) sealedParts(id SegmentID, from, to uint64) (parts [][]byte, held []*pooled, err error) {
	s.mu.Lock()
	seg, err := s.lookup(id)
	if err == nil && to > seg.durable {
		err = fmt.Errorf("%w: fragment %d of %v, which has %d durable", rpcerr.ErrSegmentNotFound, to-1, id, seg.durable)
	}
	var frags []fragment
	var file vfs.File
	if err == nil {
		frags, file = slices.Clone(seg.frags[from:to]), seg.file
		for _, f := range frags {
			if b := f.hold(); b != nil {
				held = append(held, b)
			}
		}
	}
	s.mu.Unlock()
	if err != nil {
		return nil, held, err
	}
	parts = make([][]byte, len(frags))
	for i, f := range frags {
		if f.data != nil || f.size == 0 {
			parts[i] = f.data
			continue
		}
		data, err := s.readFrame(seg, file, from+uint64(i), f)
		if err != nil {
			return nil, held, err
		}
		parts[i] = data
	}
	return parts, held, nil
}
