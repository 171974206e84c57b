package objlog

import (
	"context"
	"fmt"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
)

// restored is one append read back from the log, for the Dedup.
type restored struct {
	producer, seq, off uint64
	count              uint32
}

// readDedup reads the appends of the newest objects of segs, the log's
// segments as load found them, until it has read engine.DedupReachBytes or
// the whole log: whole objects, fetched in parallel, from the bucket or
// from where a placed segment's fragments are. It returns them oldest
// first.
func (l *Log) readDedup(ctx context.Context, segs []*seg) ([]restored, error) {
	type get struct {
		key  string
		src  Ranger
		base uint64
		size int64
	}
	var gets []get
	reach := int64(engine.DedupReachBytes)
	l.mu.Lock()
	for i := len(segs) - 1; i >= 0 && reach > 0; i-- {
		s := segs[i]
		src := l.source(s)
		for j := len(s.objs) - 1; j >= 0 && reach > 0; j-- {
			o := s.objs[j]
			gets = append(gets, get{key: l.segPrefix(s.m.Seq) + o.key, src: src, base: o.base, size: o.bytes})
			reach -= o.bytes
		}
	}
	l.mu.Unlock()
	found := make([][]restored, len(gets))
	err := parallel(len(gets), 16, func(i int) error {
		g := gets[len(gets)-1-i] // oldest first
		data := make([]byte, g.size)
		if _, err := g.src.GetRange(ctx, g.key, 0, data); err != nil {
			return fmt.Errorf("objlog: read %s to deduplicate: %w", g.key, err)
		}
		var scratch []record.Append
		for pos := 0; pos < len(data); {
			b, err := record.Decode(data[pos:])
			if err != nil {
				return &rpcerr.CorruptError{Path: g.key, Pos: int64(pos), Err: err}
			}
			if b.Flags&record.FlagAppends != 0 {
				off := b.BaseOffset
				for _, a := range b.Appends(scratch[:0]) {
					if a.Producer != 0 {
						found[i] = append(found[i], restored{a.Producer, a.Seq, off, a.Count})
					}
					off += uint64(a.Count)
				}
			}
			pos += int(b.Length)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var all []restored
	for _, f := range found {
		all = append(all, f...)
	}
	return all, nil
}

// restoreDedup rebuilds the queue's Dedup from what readDedup found, and
// tells the queue where the log ends. The caller holds mu, and no append
// is queued or in flight.
func (l *Log) restoreDedup(found []restored) {
	l.queue.Dedup.Reset()
	for _, r := range found {
		l.queue.Dedup.Restore(r.producer, r.seq, int(r.count), r.off)
	}
	l.queue.SetEnd(l.next)
}
