package quorumlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/replica"
)

// Open returns the view of an open quorum segment m that a log opened
// without fencing reads: the fragments that AckQuorum replicas hold, which
// any recovery keeps.
func (p *placement) Open(ctx context.Context, m meta.Segment) (objlog.Lister, error) {
	id := p.segID(m.Seq)
	lists := make([][]int64, len(m.Ensemble))
	errs := p.call(ctx, m.Ensemble, func(ctx context.Context, i int, n replica.Node) (err error) {
		lists[i], err = n.List(ctx, id)
		if errors.Is(err, rpcerr.ErrSegmentNotFound) {
			// Never sent a fragment of the segment: its writer died
			// between creating it in metadata and the first send.
			return nil
		}
		return err
	})
	var counts []uint64
	for i, err := range errs {
		if err == nil {
			counts = append(counts, uint64(len(lists[i])))
		}
	}
	if len(counts) < m.AckQuorum {
		return nil, fmt.Errorf("quorumlog: read segment %d of %s: %d of its replicas answered, fewer than %d: %w", m.Seq, p.prefix, len(counts), m.AckQuorum, errors.Join(errs...))
	}
	slices.Sort(counts)
	count := counts[len(counts)-m.AckQuorum]
	prefer := 0
	for i, err := range errs {
		if err == nil && uint64(len(lists[i])) >= count {
			prefer = i
			break
		}
	}
	return &ensembleView{p: p, m: m, count: count, prefer: prefer}, nil
}

// ensembleView reads a quorum segment's fragments from its replicas, with
// the bucket's methods that scan and the readers use. Keys are the bucket
// keys the fragments have once offloaded.
type ensembleView struct {
	p      *placement
	m      meta.Segment
	count  uint64 // fragments listed; 0 for a reader's view, which lists none
	prefer int    // the replica to ask first
}

// List lists the view's fragments, with their sizes from the preferred
// replica.
func (v *ensembleView) List(ctx context.Context, prefix string) ([]blob.Info, error) {
	if v.count == 0 {
		return nil, nil // and the preferred replica may not know the segment
	}
	n, err := v.p.r.Node(v.m.Ensemble[v.prefer])
	if err != nil {
		return nil, err
	}
	sizes, err := n.List(ctx, v.p.segID(v.m.Seq))
	if err != nil {
		return nil, err
	}
	if uint64(len(sizes)) < v.count {
		return nil, fmt.Errorf("quorumlog: replica %s holds %d fragments of segment %d, not %d", v.m.Ensemble[v.prefer], len(sizes), v.m.Seq, v.count)
	}
	out := make([]blob.Info, v.count)
	for i := range out {
		out[i] = blob.Info{Key: v.p.segPrefix(v.m.Seq) + objlog.FragmentKey(i), Size: sizes[i]}
	}
	return out, nil
}

// GetRange reads from the first replica that holds the fragment. A replica
// whose copy fails its check (rpcerr.ErrJournalCorrupt) is passed over, and
// logged once another has served the read. It fails with blob.ErrNotFound
// when none holds the fragment: the segment was offloaded or deleted
// meanwhile, and the reader looks again; and with a *rpcerr.CorruptError
// when every copy is damaged.
func (v *ensembleView) GetRange(ctx context.Context, key string, off int64, p []byte) (int, error) {
	frag, err := strconv.ParseUint(key[len(key)-8:], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("quorumlog: %s is not a fragment key", key)
	}
	id := v.p.segID(v.m.Seq)
	var errs, damaged []error
	notFound := 0
	for k := range v.m.Ensemble {
		node := v.m.Ensemble[(v.prefer+k)%len(v.m.Ensemble)]
		n, err := v.p.r.Node(node)
		if err == nil {
			var got int
			got, err = n.Read(ctx, id, frag, off, p)
			if err == nil || got > 0 {
				for _, d := range damaged {
					v.p.logger.Warn("a replica's copy of a fragment is damaged; read it from another replica",
						"prefix", v.p.prefix, "key", key, "from", node, "err", d)
				}
				return got, err
			}
		}
		err = fmt.Errorf("replica %s: %w", node, err)
		switch {
		case errors.Is(err, rpcerr.ErrSegmentNotFound):
			notFound++
		case errors.Is(err, rpcerr.ErrJournalCorrupt):
			damaged = append(damaged, err)
		}
		errs = append(errs, err)
	}
	switch {
	case notFound > 0:
		// Those that have it cannot be reached, or it was offloaded.
		return 0, fmt.Errorf("%w: %s: %w", blob.ErrNotFound, key, errors.Join(errs...))
	case len(errs) > 0 && len(damaged) == len(errs):
		return 0, &rpcerr.CorruptError{Path: key, Pos: off, Err: fmt.Errorf("every replica's copy is damaged: %w", errors.Join(errs...))}
	}
	return 0, fmt.Errorf("quorumlog: read %s from its replicas: %w", key, errors.Join(errs...))
}

// Get reads a whole fragment.
func (v *ensembleView) Get(ctx context.Context, key string) ([]byte, error) {
	infos, err := v.List(ctx, "")
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(infos, func(in blob.Info) bool { return in.Key == key })
	if i < 0 {
		return nil, fmt.Errorf("%w: %s", blob.ErrNotFound, key)
	}
	p := make([]byte, infos[i].Size)
	if _, err := v.GetRange(ctx, key, 0, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Source returns where a reader reads the fragments of the sealed quorum
// segment m, not yet offloaded: its replicas.
func (p *placement) Source(m meta.Segment) objlog.Ranger {
	return &ensembleView{p: p, m: m}
}
