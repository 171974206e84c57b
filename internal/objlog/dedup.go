package objlog

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
)

// dedupReach is engine.DedupReachBytes, which tests lower.
var dedupReach int64 = engine.DedupReachBytes

// restored is one append read back from the log, for the Dedup.
type restored struct {
	producer, seq, off uint64
	count              uint32
}

// readDedup reads the appends of the newest batches of segs, the log's
// segments as load found them, dedupReach bytes of them (to within a
// batch) or the whole log: the newest objects, fetched in parallel, from
// the bucket or from where a placed segment's fragments are, and of the
// oldest of them, if it is larger than what is left to read, only its
// end, from the first batch found there. It returns them oldest first.
func (l *Log) readDedup(ctx context.Context, segs []*seg) ([]restored, error) {
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
	for i := len(segs) - 1; i >= 0 && reach > 0; i-- {
		s := segs[i]
		src := l.source(s)
		for j := len(s.objs) - 1; j >= 0 && reach > 0; j-- {
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
	found := make([][]restored, len(gets))
	err := parallel(len(gets), 16, func(i int) error {
		g := gets[len(gets)-1-i] // oldest first
		data := make([]byte, g.size-g.from)
		if _, err := g.src.GetRange(ctx, g.key, g.from, data); err != nil {
			return fmt.Errorf("objlog: read %s to deduplicate: %w", g.key, err)
		}
		if g.searched {
			data = batchesAfter(data, g.end)
		}
		var scratch []record.Append
		for pos := 0; pos < len(data); {
			b, err := record.Decode(data[pos:])
			if err != nil {
				return &rpcerr.CorruptError{Path: g.key, Pos: g.from + int64(pos), Err: err}
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
