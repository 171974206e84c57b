package quorumlog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/replica"
)

// call runs fn on each replica of ids at once, with the call timeout, and
// returns the replicas' errors.
func (p *placement) call(ctx context.Context, ids []string, fn func(ctx context.Context, i int, n replica.Node) error) []error {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, p.r.CallTimeout)
			defer cancel()
			n, err := p.r.Node(ids[i])
			if err == nil {
				err = fn(ctx, i, n)
			}
			if err != nil {
				errs[i] = fmt.Errorf("replica %s: %w", ids[i], err)
			}
		})
	}
	wg.Wait()
	return errs
}

// Recover recovers the open quorum segment m left by an earlier writer, as
// BookKeeper recovers a ledger: it fences the ensemble with epoch, so that
// no older writer's fragment can be acknowledged any more, learns from
// RecoveryQuorum replicas how far each reaches, copies the longest prefix
// to enough of them that the ack quorum holds it, and returns that prefix
// for the log to seal the segment there in metadata. Every fragment the
// old writer acknowledged is in that prefix: the ack quorum held it, and
// any ack quorum meets any RecoveryQuorum replicas.
func (p *placement) Recover(ctx context.Context, m meta.Segment, epoch uint64) (objlog.Lister, error) {
	id := p.segID(m.Seq)
	cfg := quorum.Config{Ensemble: len(m.Ensemble), AckQuorum: m.AckQuorum}
	counts := make([]uint64, len(m.Ensemble))
	errs := p.call(ctx, m.Ensemble, func(ctx context.Context, i int, n replica.Node) (err error) {
		counts[i], err = n.Fence(ctx, id, epoch)
		return err
	})
	var answers []quorum.Response
	for i, err := range errs {
		if err == nil {
			answers = append(answers, quorum.Response{Replica: i, End: counts[i]})
		}
	}
	rec, err := quorum.Recover(cfg, 0, answers)
	if err != nil {
		return nil, fmt.Errorf("quorumlog: recover segment %d of %s: %w (%w)", m.Seq, p.prefix, err, errors.Join(errs...))
	}
	if err := p.copyForward(ctx, m, epoch, rec); err != nil {
		return nil, err
	}
	return &ensembleView{p: p, m: m, count: rec.End, prefer: rec.Source}, nil
}

// copyForward copies fragments from rec.Source to each of rec.Copies up to
// rec.End, with the recovering writer's epoch, and waits until they hold
// them durably. A fragment whose copy on rec.Source is damaged is read from
// another replica that holds it.
func (p *placement) copyForward(ctx context.Context, m meta.Segment, epoch uint64, rec quorum.Recovery) error {
	if len(rec.Copies) == 0 {
		return nil
	}
	id := p.segID(m.Seq)
	src, err := p.r.Node(m.Ensemble[rec.Source])
	if err != nil {
		return fmt.Errorf("quorumlog: recover segment %d of %s: %w", m.Seq, p.prefix, err)
	}
	from := rec.End
	for _, c := range rec.Copies {
		from = min(from, c.End)
	}
	sizes, err := src.List(ctx, id)
	if err == nil && uint64(len(sizes)) < rec.End {
		err = fmt.Errorf("it holds %d fragments, not %d", len(sizes), rec.End)
	}
	if err != nil {
		return fmt.Errorf("quorumlog: recover segment %d of %s: list replica %s: %w", m.Seq, p.prefix, m.Ensemble[rec.Source], err)
	}
	frags := make([][]byte, rec.End-from)
	sums := make([]uint32, rec.End-from)
	v := &ensembleView{p: p, m: m, prefer: rec.Source}
	for n := from; n < rec.End; n++ {
		frag := make([]byte, sizes[n])
		if _, err := v.GetRange(ctx, p.segPrefix(m.Seq)+objlog.FragmentKey(int(n)), 0, frag); err != nil {
			return fmt.Errorf("quorumlog: recover segment %d of %s: read fragment %d: %w", m.Seq, p.prefix, n, err)
		}
		frags[n-from], sums[n-from] = frag, replica.FrameSum(n, frag)
	}
	targets := make([]string, len(rec.Copies))
	for i, c := range rec.Copies {
		targets[i] = m.Ensemble[c.Replica]
	}
	errs := p.call(ctx, targets, func(ctx context.Context, i int, n replica.Node) error {
		have := rec.Copies[i].End
		done := make(chan error, 1)
		s, err := n.Stream(ctx, id, epoch, func(count uint64) {
			if count >= rec.End {
				select {
				case done <- nil:
				default:
				}
			}
		}, func(err error) {
			select {
			case done <- err:
			default:
			}
		})
		if err != nil {
			return err
		}
		defer s.Close()
		for n := have; n < rec.End; n++ {
			if err := s.Send(n, frags[n-from], sums[n-from]); err != nil {
				return err
			}
		}
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("quorumlog: recover segment %d of %s: copy forward: %w", m.Seq, p.prefix, err)
	}
	return nil
}
