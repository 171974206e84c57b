package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ternwal/tern/internal/blob"
)

// offloadParallel is how many objects Offload uploads at once.
const offloadParallel = 4

// Offload uploads the sealed segment seg to the Store's bucket as objs,
// each the concatenation of its fragments [From, To), with PutIfAbsent, and
// returns when every object is stored. The objects must cover the
// segment's fragments in order, each at least one. An object already at a
// key is success if it holds the same bytes (an earlier attempt stored it)
// and ErrMismatch otherwise. Offload does not drop the segment.
func (s *Store) Offload(ctx context.Context, id SegmentID, objs []Object) error {
	s.mu.Lock()
	seg, err := s.lookup(id)
	switch {
	case err != nil:
	case s.bucket == nil:
		err = fmt.Errorf("%w: offload without a bucket", ErrInvalid)
	case seg.failed != nil:
		err = seg.failed
	case !seg.sealed:
		err = fmt.Errorf("%w: offload of %v, which is not sealed", ErrInvalid, id)
	default:
		next := uint64(0)
		for _, o := range objs {
			if o.From != next || o.To <= o.From {
				err = fmt.Errorf("%w: offload of %v: object %s holds fragments [%d, %d), not from %d on", ErrInvalid, id, o.Key, o.From, o.To, next)
				break
			}
			next = o.To
		}
		if err == nil && next != seg.durable {
			err = fmt.Errorf("%w: offload of %v: the objects hold %d fragments of %d", ErrInvalid, id, next, seg.durable)
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
	return context.Cause(ctx)
}

func (s *Store) upload(ctx context.Context, id SegmentID, o Object) error {
	var data []byte
	for n := o.From; n < o.To; n++ {
		frag, err := s.fragment(id, n)
		if err != nil {
			return err
		}
		if data == nil && o.To == o.From+1 {
			data = frag
			break
		}
		data = append(data, frag...)
	}
	err := s.bucket.PutIfAbsent(ctx, o.Key, data)
	if !errors.Is(err, blob.ErrExist) {
		return err
	}
	stored, err := s.bucket.Get(ctx, o.Key)
	if err != nil {
		return err
	}
	if !bytes.Equal(stored, data) {
		return fmt.Errorf("%w: another object is stored at the key", ErrMismatch)
	}
	return nil
}

// fragment returns a copy of durable fragment n.
func (s *Store) fragment(id SegmentID, n uint64) ([]byte, error) {
	s.mu.Lock()
	seg, err := s.lookup(id)
	if err == nil && n >= seg.durable {
		err = fmt.Errorf("%w: fragment %d of %v", ErrNotFound, n, id)
	}
	var size int64
	if err == nil {
		size = seg.frags[n].size
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := s.Read(id, n, 0, data); err != nil {
		return nil, err
	}
	return data, nil
}
