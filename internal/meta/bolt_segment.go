package meta

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// CreateSegment implements Store. Only the newest segment can be open:
// CreateSegment requires every other one sealed and nothing unseals one, so
// the checks read only the last key of the log's bucket.
func (b *Bolt) CreateSegment(ctx context.Context, log string, s Segment) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := encodeNewSegment(s)
	if err != nil {
		return wrapSegment("create segment", log, s.Seq, err)
	}
	err = b.db.Update(func(tx *bolt.Tx) error {
		l, err := getLog(tx.Bucket(logsBucket), log)
		if err != nil {
			return err
		}
		if l.Epoch != s.Epoch {
			return ErrStaleEpoch
		}
		bk, err := tx.Bucket(segmentsBucket).CreateBucketIfNotExists(idKey(l.ID))
		if err != nil {
			return err
		}
		var last *Segment
		if k, lastV := bk.Cursor().Last(); k != nil {
			l, err := decodeSegmentAt(k, lastV)
			if err != nil {
				return err
			}
			last = &l
		}
		if err := checkNewAfter(last, s); err != nil {
			return err
		}
		return bk.Put(seqKey(s.Seq), v)
	})
	return wrapSegment("create segment", log, s.Seq, err)
}

// SealSegment implements Store.
func (b *Bolt) SealSegment(ctx context.Context, log string, s Segment) (Segment, error) {
	if err := ctx.Err(); err != nil {
		return Segment{}, err
	}
	if !s.Sealed {
		return Segment{}, wrapSegment("seal segment", log, s.Seq, errNotSealed)
	}
	if _, err := encodeSegment(s); err != nil {
		return Segment{}, wrapSegment("seal segment", log, s.Seq, err)
	}
	var got Segment
	err := b.updateSegment(log, s.Seq, func(bk *bolt.Bucket, cur *Segment) (bool, error) {
		changed, err := seal(cur, s)
		got = *cur
		if err != nil || !changed {
			return changed, err
		}
		// A pending successor gets its base in the same transaction.
		v := bk.Get(seqKey(s.Seq + 1))
		if v == nil {
			return true, nil
		}
		next, err := decodeSegmentAt(seqKey(s.Seq+1), v)
		if err != nil || !activate(&next, cur.End) {
			return true, err
		}
		if v, err = encodeSegment(next); err != nil {
			return false, err
		}
		return true, bk.Put(seqKey(next.Seq), v)
	})
	if err != nil {
		return Segment{}, wrapSegment("seal segment", log, s.Seq, err)
	}
	return got, nil
}

// ReplaceObjects implements Store.
func (b *Bolt) ReplaceObjects(ctx context.Context, log string, seq uint64, old, new []SegmentObject) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := b.updateSegment(log, seq, func(_ *bolt.Bucket, cur *Segment) (bool, error) {
		return true, replaceObjects(cur, old, new)
	})
	return wrapSegment("replace objects of segment", log, seq, err)
}

// Segments implements Store.
func (b *Bolt) Segments(ctx context.Context, log string) ([]Segment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var list []Segment
	err := b.db.View(func(tx *bolt.Tx) error {
		bk, err := segments(tx, log)
		if err != nil || bk == nil {
			return err
		}
		return bk.ForEach(func(k, v []byte) error {
			s, err := decodeSegmentAt(k, v)
			if err != nil {
				return err
			}
			list = append(list, s)
			return nil
		})
	})
	if err != nil {
		return nil, wrap("list segments", log, err)
	}
	return list, nil
}

// DeleteSegment implements Store.
func (b *Bolt) DeleteSegment(ctx context.Context, log string, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk, err := segments(tx, log)
		if err != nil || bk == nil {
			return err
		}
		return bk.Delete(seqKey(seq))
	})
	return wrapSegment("delete segment", log, seq, err)
}

// updateSegment reads a segment, lets fn change it (and others of bk, the
// log's segments) and, if fn says it did and returns no error, writes it
// back, in one read-write transaction.
func (b *Bolt) updateSegment(log string, seq uint64, fn func(*bolt.Bucket, *Segment) (bool, error)) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk, err := segments(tx, log)
		if err != nil {
			return err
		}
		var v []byte
		if bk != nil {
			v = bk.Get(seqKey(seq))
		}
		if v == nil {
			return ErrSegmentNotFound
		}
		s, err := decodeSegment(v)
		if err != nil {
			return fmt.Errorf("segment %d: %w", seq, err)
		}
		s.Seq = seq
		changed, err := fn(bk, &s)
		if err != nil || !changed {
			return err
		}
		if v, err = encodeSegment(s); err != nil {
			return err
		}
		return bk.Put(seqKey(seq), v)
	})
}

// segments returns the bucket of the named log's segments: nil if the log
// has none, ErrNotFound if there is no such log.
func segments(tx *bolt.Tx, log string) (*bolt.Bucket, error) {
	l, err := getLog(tx.Bucket(logsBucket), log)
	if err != nil {
		return nil, err
	}
	return tx.Bucket(segmentsBucket).Bucket(idKey(l.ID)), nil
}

// seqKey is a Seq as a key of a log's segments bucket.
func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

// decodeSegmentAt decodes the segment record v stored under key k.
func decodeSegmentAt(k, v []byte) (Segment, error) {
	if len(k) != 8 {
		return Segment{}, fmt.Errorf("segment key %x: not 8 bytes", k)
	}
	seq := binary.BigEndian.Uint64(k)
	s, err := decodeSegment(v)
	if err != nil {
		return Segment{}, fmt.Errorf("segment %d: %w", seq, err)
	}
	s.Seq = seq
	return s, nil
}
