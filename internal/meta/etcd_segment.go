package meta

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Segments are keyed by their log's ID, as subscriptions are, and every
// transaction on one compares what ties it to the log that was read: the
// record's create revision, or the segment's own mod revision, which
// DeleteLog changes by deleting the segment.
//
// CreateSegment's checks span the log's record and all its segments. It
// reads, in turn: the record, for its epoch and its mod revision R; segtail,
// for its mod revision T and the Seq L it names, together with whether any
// segment has a Seq >= s.Seq; and segment L. It fails if the epoch is not
// s.Epoch, if a segment >= s.Seq exists or if segment L is open. Otherwise it
// stores segment s and segtail = s.Seq in a transaction that compares R and T
// only, and that is enough:
//
//   - the record is written with every epoch change and deleted with the
//     log, so an unchanged R is the same log at the same epoch;
//   - every CreateSegment writes segtail, so an unchanged T means that no
//     segment was created since the read, none >= s.Seq in particular;
//   - only segment L can be open: each CreateSegment stores its segment
//     while the one segtail named was sealed or gone, and every other one
//     was sealed already; and L, read sealed or gone, stays so, because
//     nothing unseals a segment and nothing but CreateSegment, which changes
//     T, stores one.
//
// A pending segment (Segment.Pending) is the exception: it is created right
// after an open segment L that is not pending, and the transaction also
// compares L's mod revision, so L is still open when it commits; SealSegment
// of L activates it. Then two segments are open, L and L+1, and segtail names
// L+1: a CreateSegment finds L+1 open and fails, and if L+1 was deleted it
// reads L, the segment before the one segtail names, instead.
//
// So when it commits, the log has epoch s.Epoch, no segment >= s.Seq and no
// open one (but L, for a pending s). Of racing CreateSegments only the first to commit finds R and T
// as it read them, and a CreateSegment racing ClaimWriter or BumpEpoch
// commits only before the new epoch is stored. Every step reads or compares
// single keys (the range read of Seqs >= s.Seq stops at the first), so the
// cost does not grow with the number of segments.

// CreateSegment implements Store.
func (e *Etcd) CreateSegment(ctx context.Context, log string, s Segment) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	v, err := encodeNewSegment(s)
	if err == nil {
		err = e.createSegment(ctx, log, s, string(v))
	}
	return wrapSegment("create segment", log, s.Seq, e.classify(ctx, err))
}

// createSegment is CreateSegment with the segment's record v; the comment at
// the top of this file says why it is atomic.
func (e *Etcd) createSegment(ctx context.Context, log string, s Segment, v string) error {
	name := e.nameKey(log)
	for {
		resp, err := e.cli.Get(ctx, name)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return ErrNotFound
		}
		record := resp.Kvs[0]
		l, err := decodeLog(record.Value)
		if err != nil {
			return err
		}
		if l.Epoch != s.Epoch {
			return ErrStaleEpoch
		}
		tail, key := e.segTailKey(l.ID), e.segKey(l.ID, s.Seq)
		end := clientv3.GetPrefixRangeEnd(e.segPrefix(l.ID))
		resp2, err := e.cli.Txn(ctx).Then(
			clientv3.OpGet(tail),
			clientv3.OpGet(key, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
		).Commit()
		if err != nil {
			return err
		}
		if first(resp2, 1) != nil {
			return ErrSegmentExist
		}
		tailKV := first(resp2, 0)
		var last *Segment
		var lastKV *kv
		if tailKV != nil {
			if last, lastKV, err = e.tailSegment(ctx, l.ID, tailKV.Value); err != nil {
				return err
			}
		}
		if err := checkNewAfter(last, s); err != nil {
			return err
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(name), "=", record.ModRevision),
			clientv3.Compare(clientv3.ModRevision(tail), "=", modRev(tailKV))}
		if s.Pending {
			// Segment L must still be open: a seal since the read would
			// leave this one pending for good.
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(e.segKey(l.ID, last.Seq)), "=", lastKV.ModRevision))
		}
		resp2, err = e.cli.Txn(ctx).If(cmps...).
			Then(clientv3.OpPut(key, v), clientv3.OpPut(tail, strconv.FormatUint(s.Seq, 10))).
			Commit()
		if err != nil {
			return err
		}
		if resp2.Succeeded {
			return nil
		}
	}
}

// tailSegment returns the newest segment of log id, and its key-value: the
// one that segtail's value names or, if that one was deleted, the one before
// it (open if the deleted one was pending), or nils if neither exists.
func (e *Etcd) tailSegment(ctx context.Context, id uint64, tail []byte) (*Segment, *kv, error) {
	seq, err := strconv.ParseUint(string(tail), 10, 64)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", e.segTailKey(id), err)
	}
	resp, err := e.cli.Txn(ctx).Then(clientv3.OpGet(e.segKey(id, seq)), clientv3.OpGet(e.segKey(id, seq-1))).Commit()
	if err != nil {
		return nil, nil, err
	}
	kv := first(resp, 0)
	if kv == nil && seq > 1 {
		kv, seq = first(resp, 1), seq-1
	}
	if kv == nil {
		return nil, nil, nil
	}
	s, err := decodeSegment(kv.Value)
	if err != nil {
		return nil, nil, fmt.Errorf("segment %d: %w", seq, err)
	}
	s.Seq = seq
	return &s, kv, nil
}

// SealSegment implements Store.
func (e *Etcd) SealSegment(ctx context.Context, log string, s Segment) (Segment, error) {
	if err := ctx.Err(); err != nil {
		return Segment{}, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	if !s.Sealed {
		return Segment{}, wrapSegment("seal segment", log, s.Seq, errNotSealed)
	}
	if _, err := encodeSegment(s); err != nil {
		return Segment{}, wrapSegment("seal segment", log, s.Seq, e.classify(ctx, err))
	}
	var got Segment
	err := e.onLog(ctx, log, func(id uint64, exists clientv3.Cmp) (bool, error) {
		key, nextKey := e.segKey(id, s.Seq), e.segKey(id, s.Seq+1)
		resp, err := e.cli.Txn(ctx).If(exists).Then(clientv3.OpGet(key), clientv3.OpGet(nextKey)).Commit()
		if err != nil || !resp.Succeeded {
			return false, err
		}
		kv, nextKV := first(resp, 0), first(resp, 1)
		if kv == nil {
			return false, ErrSegmentNotFound
		}
		cur, err := decodeSegment(kv.Value)
		if err != nil {
			return false, fmt.Errorf("segment %d: %w", s.Seq, err)
		}
		cur.Seq = s.Seq
		changed, err := seal(&cur, s)
		got = cur
		if err != nil || !changed {
			return err == nil, err
		}
		v, err := encodeSegment(cur)
		if err != nil {
			return false, err
		}
		ops := []clientv3.Op{clientv3.OpPut(key, string(v))}
		if nextKV != nil {
			next, err := decodeSegment(nextKV.Value)
			if err != nil {
				return false, fmt.Errorf("segment %d: %w", s.Seq+1, err)
			}
			if activate(&next, cur.End) {
				nv, err := encodeSegment(next)
				if err != nil {
					return false, err
				}
				ops = append(ops, clientv3.OpPut(nextKey, string(nv)))
			}
		}
		// Both mod revisions change with every write of their segment and
		// with its deletion (DeleteLog's too), and the second with the
		// creation of a pending successor.
		resp, err = e.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision),
				clientv3.Compare(clientv3.ModRevision(nextKey), "=", modRev(nextKV))).
			Then(ops...).
			Commit()
		if err != nil {
			return false, err
		}
		return resp.Succeeded, nil
	})
	if err != nil {
		return Segment{}, wrapSegment("seal segment", log, s.Seq, e.classify(ctx, err))
	}
	return got, nil
}

// ReplaceObjects implements Store.
func (e *Etcd) ReplaceObjects(ctx context.Context, log string, seq uint64, old, new []SegmentObject) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	err := e.updateSegment(ctx, log, seq, func(cur *Segment) (bool, error) {
		return true, replaceObjects(cur, old, new)
	})
	return wrapSegment("replace objects of segment", log, seq, e.classify(ctx, err))
}

// Segments implements Store.
func (e *Etcd) Segments(ctx context.Context, log string) ([]Segment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	var list []Segment
	err := e.onLog(ctx, log, func(id uint64, exists clientv3.Cmp) (bool, error) {
		prefix := e.segPrefix(id)
		resp, err := e.cli.Txn(ctx).If(exists).Then(clientv3.OpGet(prefix, clientv3.WithPrefix())).Commit()
		if err != nil || !resp.Succeeded {
			return false, err
		}
		list = nil
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			k := strings.TrimPrefix(string(kv.Key), prefix)
			seq, err := strconv.ParseUint(k, 10, 64)
			if err != nil {
				return false, fmt.Errorf("segment key %q: %w", kv.Key, err)
			}
			s, err := decodeSegment(kv.Value)
			if err != nil {
				return false, fmt.Errorf("segment %d: %w", seq, err)
			}
			s.Seq = seq
			list = append(list, s)
		}
		return true, nil
	})
	if err != nil {
		return nil, wrap("list segments", log, e.classify(ctx, err))
	}
	return list, nil
}

// DeleteSegment implements Store. segtail stays: it may name a segment that
// does not exist.
func (e *Etcd) DeleteSegment(ctx context.Context, log string, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	err := e.onLog(ctx, log, func(id uint64, exists clientv3.Cmp) (bool, error) {
		resp, err := e.cli.Txn(ctx).If(exists).Then(clientv3.OpDelete(e.segKey(id, seq))).Commit()
		if err != nil {
			return false, err
		}
		return resp.Succeeded, nil
	})
	return wrapSegment("delete segment", log, seq, e.classify(ctx, err))
}

// updateSegment reads a segment and lets fn change it; if fn says it did and
// returns no error, the change is committed if the segment has not changed
// since it was read, and otherwise the whole is retried.
func (e *Etcd) updateSegment(ctx context.Context, log string, seq uint64, fn func(*Segment) (bool, error)) error {
	return e.onLog(ctx, log, func(id uint64, exists clientv3.Cmp) (bool, error) {
		key := e.segKey(id, seq)
		resp, err := e.cli.Txn(ctx).If(exists).Then(clientv3.OpGet(key)).Commit()
		if err != nil || !resp.Succeeded {
			return false, err
		}
		kv := first(resp, 0)
		if kv == nil {
			return false, ErrSegmentNotFound
		}
		s, err := decodeSegment(kv.Value)
		if err != nil {
			return false, fmt.Errorf("segment %d: %w", seq, err)
		}
		s.Seq = seq
		changed, err := fn(&s)
		if err != nil || !changed {
			return err == nil, err
		}
		v, err := encodeSegment(s)
		if err != nil {
			return false, err
		}
		// The segment's mod revision changes with every write of it and
		// with its deletion, also by DeleteLog.
		resp, err = e.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(v))).
			Commit()
		if err != nil {
			return false, err
		}
		return resp.Succeeded, nil
	})
}
