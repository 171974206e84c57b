package quorumlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/replica"
)

// Move offloads the sealed quorum segment m: it seals its replicas at
// count fragments, then has the first of them that can upload the
// fragments to the bucket as the objects of plan.
func (p *placement) Move(ctx context.Context, m meta.Segment, count uint64, plan []objlog.Span) error {
	id := p.segID(m.Seq)
	objs := make([]replica.Object, len(plan))
	for i, s := range plan {
		objs[i] = replica.Object{Key: s.Key, From: s.From, To: s.To}
	}
	// Seal the replicas at the segment's end: fragments past it, of a
	// writer that was fenced, are dropped.
	sealErrs := p.call(ctx, m.Ensemble, func(ctx context.Context, _ int, n replica.Node) error {
		return n.Seal(ctx, id, count)
	})
	var err, failed error // failed: the offloads that failed, not the seals
	uploaded := false
	for i, node := range m.Ensemble {
		if sealErrs[i] != nil {
			err = errors.Join(err, sealErrs[i])
			continue
		}
		n, nerr := p.r.Node(node)
		if nerr == nil {
			nerr = n.Offload(ctx, id, objs)
		}
		if nerr == nil {
			uploaded = true
			if failed != nil {
				// The others' failures, such as a damaged copy
				// (rpcerr.ErrJournalCorrupt), are worth knowing.
				p.logger.Warn("a replica could not offload a segment; another did", "prefix", p.prefix,
					"segment", m.Seq, "from", node, "err", failed)
			}
			break
		}
		nerr = fmt.Errorf("replica %s: %w", node, nerr)
		err, failed = errors.Join(err, nerr), errors.Join(failed, nerr)
	}
	if !uploaded {
		return err
	}
	return nil
}

// Drop has the replicas of m drop their copies, as far as they can
// be reached: what one keeps is only disk space.
func (p *placement) Drop(ctx context.Context, m meta.Segment) {
	// Once the segment is recorded in the bucket, nothing asks again: a
	// closing log still finishes this, within the call timeout.
	errs := p.call(context.WithoutCancel(ctx), m.Ensemble, func(ctx context.Context, _ int, n replica.Node) error {
		return n.Drop(ctx, p.segID(m.Seq))
	})
	if err := errors.Join(errs...); err != nil {
		p.logger.Warn("a replica kept its copy of an offloaded segment", "prefix", p.prefix, "segment", m.Seq, "err", err)
	}
}
