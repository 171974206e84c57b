package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CreateSub implements Store. Created is truncated to microseconds.
func (b *Bolt) CreateSub(ctx context.Context, log string, s Sub) (Sub, error) {
	if err := ctx.Err(); err != nil {
		return Sub{}, err
	}
	s = Sub{
		Name:    s.Name,
		Created: time.Now().UTC().Truncate(time.Microsecond),
		Cursor:  s.Cursor,
		Pin:     s.Pin,
	}
	err := b.db.Update(func(tx *bolt.Tx) error {
		l, err := getLog(tx.Bucket(logsBucket), log)
		if err != nil {
			return err
		}
		bk, err := tx.Bucket(subsBucket).CreateBucketIfNotExists(idKey(l.ID))
		if err != nil {
			return err
		}
		if bk.Get([]byte(s.Name)) != nil {
			return ErrSubExist
		}
		return putSub(bk, s)
	})
	if err != nil {
		return Sub{}, wrapSub("create subscription", log, s.Name, err)
	}
	return s, nil
}

// Sub implements Store.
func (b *Bolt) Sub(ctx context.Context, log, name string) (Sub, error) {
	if err := ctx.Err(); err != nil {
		return Sub{}, err
	}
	var s Sub
	err := b.db.View(func(tx *bolt.Tx) error {
		bk, err := subs(tx, log)
		if err != nil {
			return err
		}
		s, err = getSub(bk, name)
		return err
	})
	if err != nil {
		return Sub{}, wrapSub("get subscription", log, name, err)
	}
	return s, nil
}

// ListSubs implements Store.
func (b *Bolt) ListSubs(ctx context.Context, log string) ([]Sub, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var list []Sub
	err := b.db.View(func(tx *bolt.Tx) error {
		bk, err := subs(tx, log)
		if err != nil || bk == nil {
			return err
		}
		return bk.ForEach(func(k, v []byte) error {
			s, err := decodeSub(v)
			if err != nil {
				return fmt.Errorf("subscription %q: %w", k, err)
			}
			s.Name = string(k)
			list = append(list, s)
			return nil
		})
	})
	if err != nil {
		return nil, wrap("list subscriptions", log, err)
	}
	return list, nil
}

// DeleteSub implements Store.
func (b *Bolt) DeleteSub(ctx context.Context, log, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk, err := subs(tx, log)
		if err != nil {
			return err
		}
		if bk == nil || bk.Get([]byte(name)) == nil {
			return ErrSubNotFound
		}
		return bk.Delete([]byte(name))
	})
	return wrapSub("delete subscription", log, name, err)
}

// CommitCursor implements Store.
func (b *Bolt) CommitCursor(ctx context.Context, log, name string, cursor uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var cur uint64
	err := b.updateSub(log, name, func(s *Sub) {
		s.Cursor = max(s.Cursor, cursor)
		cur = s.Cursor
	})
	if err != nil {
		return 0, wrapSub("commit cursor", log, name, err)
	}
	return cur, nil
}

// SeekCursor implements Store.
func (b *Bolt) SeekCursor(ctx context.Context, log, name string, cursor uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := b.updateSub(log, name, func(s *Sub) { s.Cursor = cursor })
	return wrapSub("seek cursor", log, name, err)
}

// updateSub reads a subscription, lets fn change it and writes it back, in
// one read-write transaction.
func (b *Bolt) updateSub(log, name string, fn func(*Sub)) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk, err := subs(tx, log)
		if err != nil {
			return err
		}
		s, err := getSub(bk, name)
		if err != nil {
			return err
		}
		fn(&s)
		return putSub(bk, s)
	})
}

// subs returns the bucket of the named log's subscriptions: nil if the log
// has none, ErrNotFound if there is no such log.
func subs(tx *bolt.Tx, log string) (*bolt.Bucket, error) {
	l, err := getLog(tx.Bucket(logsBucket), log)
	if err != nil {
		return nil, err
	}
	return tx.Bucket(subsBucket).Bucket(idKey(l.ID)), nil
}

// wrapSub is wrap for an operation on subscription name of log.
func wrapSub(op, log, name string, err error) error {
	switch {
	case errors.Is(err, ErrSubNotFound), errors.Is(err, ErrSubExist):
		return fmt.Errorf("%w: %q of log %q", err, name, log)
	default:
		return wrap(op, log, err)
	}
}

func getSub(bk *bolt.Bucket, name string) (Sub, error) {
	var v []byte
	if bk != nil {
		v = bk.Get([]byte(name))
	}
	if v == nil {
		return Sub{}, ErrSubNotFound
	}
	s, err := decodeSub(v)
	if err != nil {
		return Sub{}, err
	}
	s.Name = name
	return s, nil
}

func putSub(bk *bolt.Bucket, s Sub) error {
	v, err := encodeSub(s)
	if err != nil {
		return err
	}
	return bk.Put([]byte(s.Name), v)
}
