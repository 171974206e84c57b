package objlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
)

// dedupReach is engine.DedupReachBytes, which tests lower.
var dedupReach int64 = engine.DedupReachBytes

// shallowObjects is how many of the newest objects a shallow load reads
// back: more than a writer has in flight (Options.MaxInFlight) and a few
// rounds after, which hold the appends whose answers a lost node took with
// it. A fragment of a log that takes one small append at a time holds one
// append, and a deep load of such a log is thousands of GETs.
const shallowObjects = 256

// loadDedup rebuilds the log's deduplication table, the first time an
// append with a producer needs it (and again after a newer writer
// elsewhere moved the end), from the newest batches. Appends of producers
// wait for it (they call it first); the flusher goes on meanwhile, and
// what it uploads after the segments were looked at holds no append of a
// producer. An object deleted under it (compaction, offload) makes it look
// again; a failure fails the append with rpcerr.ErrUnavailable, and the
// next one tries again.
//
// It loads shallow first (the newest shallowObjects objects), and deep (all
// of dedupReach) only for an append whose producer's history the shallow
// load may have missed (engine.Dedup.NeedsDeep): a writer that rode
// through a move retries appends that are in the newest objects.
func (l *Log) loadDedup(o engine.AppendOptions) error {
	if err := l.dedupLoad.Ensure(engine.DedupShallow, l.readDedup); err != nil {
		return err
	}
	l.mu.Lock()
	deep := l.queue.Dedup.NeedsDeep(o)
	l.mu.Unlock()
	if !deep {
		return nil
	}
	return l.dedupLoad.Ensure(engine.DedupDeep, l.readDedup)
}

// readDedup reads back the appends of producers as deep as depth says, and
// restores them into the table.
func (l *Log) readDedup(depth int) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.RetryTimeout)
	defer cancel()
	objects := shallowObjects
	if depth == engine.DedupDeep {
		objects = math.MaxInt
	}
	var err error
	for range 3 {
		var found []engine.Applied
		if found, err = l.readApplied(ctx, objects); err == nil {
			l.mu.Lock()
			l.queue.Dedup.RestoreAll(found)
			l.mu.Unlock()
			return nil
		}
		if !isNotFound(err) {
			break
		}
		if err = l.refreshOffloaded(ctx); err != nil {
			break
		}
	}
	if errors.Is(err, rpcerr.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: objlog: reading back the appends of %s to deduplicate: %v", rpcerr.ErrUnavailable, l.opts.Prefix, err)
}

// readApplied reads the appends of producers in the newest batches of the
// log, dedupReach bytes of them (to within a batch) but no more than
// objects objects, or the whole log: the newest objects, fetched in parallel, from the bucket or from where a
// placed segment's fragments are, and of the oldest of them, if it is
// larger than what is left to read, only its end, from the first batch
// found there. It returns them oldest first.
func (l *Log) readApplied(ctx context.Context, objects int) ([]engine.Applied, error) {
	type get struct {
		key      string
		src      Ranger
		from     int64 // where in the object to start reading
		size     int64
		end      uint64 // the offset after the object's last entry
		searched bool   // from is not a batch boundary: search for one
	}
	var gets []get
	reach := dedupReach
	l.mu.Lock()
	for i := len(l.segs) - 1; i >= 0 && reach > 0 && len(gets) < objects; i-- {
		s := l.segs[i]
		src := l.source(s)
		for j := len(s.objs) - 1; j >= 0 && reach > 0 && len(gets) < objects; j-- {
			o := s.objs[j]
			g := get{key: l.segPrefix(s.m.Seq) + o.key, src: src, size: o.bytes, end: o.end}
			if o.bytes > reach {
				g.from, g.searched = o.bytes-reach, true
			}
			gets = append(gets, g)
			reach -= o.bytes
		}
	}
	l.mu.Unlock()
	found := make([][]engine.Applied, len(gets))
	err := parallel(len(gets), 16, func(i int) error {
		g := gets[len(gets)-1-i] // oldest first
		data := make([]byte, g.size-g.from)
		if _, err := g.src.GetRange(ctx, g.key, g.from, data); err != nil {
			return fmt.Errorf("objlog: read %s to deduplicate: %w", g.key, err)
		}
		if g.searched {
			data = batchesAfter(data, g.end)
		}
		for pos := 0; pos < len(data); {
			b, err := record.Decode(data[pos:])
			if err != nil {
				return &rpcerr.CorruptError{Path: g.key, Pos: g.from + int64(pos), Err: err}
			}
			found[i] = engine.AppliedIn(b, found[i])
			pos += int(b.Length)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var all []engine.Applied
	for _, f := range found {
		all = append(all, f...)
	}
	return all, nil
}

// batchesAfter returns the end of data, bytes from the middle of an object
// whose batches end at offset end, from its first position where whole
// batches, their offsets dense, fill the rest and end at end: the first
// batch boundary, unless a payload holds what looks like batches up to
// the end, CRCs included. Without one it returns nothing.
func batchesAfter(data []byte, end uint64) []byte {
	for i := 0; i+record.HeaderBytes <= len(data); i++ {
		k := bytes.Index(data[i:], []byte(record.Magic))
		if k < 0 {
			break
		}
		i += k
		if wholeBatches(data[i:], end) {
			return data[i:]
		}
	}
	return nil
}

// wholeBatches reports whether data is valid batches, dense, ending at end.
func wholeBatches(data []byte, end uint64) bool {
	next, first := uint64(0), true
	for len(data) > 0 {
		b, err := record.Decode(data)
		if err != nil || (!first && b.BaseOffset != next) {
			return false
		}
		next, first = b.NextOffset(), false
		data = data[b.Length:]
	}
	return !first && next == end
}
