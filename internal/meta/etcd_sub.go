package meta

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Subscriptions are keyed by their log's ID, which a read of the log's record
// gives. Every transaction on them compares the record's create revision, so
// it applies to the log that was read, not to one deleted since or created
// again under its name.

// CreateSub implements Store. Created is this process's clock, truncated to
// microseconds.
func (e *Etcd) CreateSub(ctx context.Context, log string, s Sub) (Sub, error) {
	if err := ctx.Err(); err != nil {
		return Sub{}, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	s = Sub{
		Name:    s.Name,
		Created: time.Now().UTC().Truncate(time.Microsecond),
		Cursor:  s.Cursor,
		Pin:     s.Pin,
	}
	v, err := encodeSub(s)
	if err != nil {
		return Sub{}, wrapSub("create subscription", log, s.Name, e.classify(ctx, err))
	}
	err = e.onLog(ctx, log, func(id uint64, exists clientv3.Cmp) (bool, error) {
		key := e.subKey(id, s.Name)
		resp, err := e.cli.Txn(ctx).
			If(exists, clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(v))).
			Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
			Commit()
		switch {
		case err != nil:
			return false, err
		case resp.Succeeded:
			return true, nil
		case resp.Responses[0].GetResponseRange().Count > 0:
			// DeleteLog deletes the subscriptions with the record, so
			// the log is still the one read: only the name failed.
			return false, ErrSubExist
		}
		return false, nil
	})
	if err != nil {
		return Sub{}, wrapSub("create subscription", log, s.Name, e.classify(ctx, err))
	}
	return s, nil
}

// Sub implements Store.
func (e *Etcd) Sub(ctx context.Context, log, name string) (Sub, error) {
	if err := ctx.Err(); err != nil {
		return Sub{}, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	var s Sub
	err := e.onLog(ctx, log, func(id uint64, exists clientv3.Cmp) (bool, error) {
		got, err := e.getSub(ctx, id, name, exists)
		if err != nil || got == nil {
			return false, err
		}
		s, err = decodeSub(got.Value)
		s.Name = name
		return true, err
	})
	if err != nil {
		return Sub{}, wrapSub("get subscription", log, name, e.classify(ctx, err))
	}
	return s, nil
}

// ListSubs implements Store.
func (e *Etcd) ListSubs(ctx context.Context, log string) ([]Sub, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	var list []Sub
	err := e.onLog(ctx, log, func(id uint64, exists clientv3.Cmp) (bool, error) {
		prefix := e.subPrefix(id)
		resp, err := e.cli.Txn(ctx).If(exists).Then(clientv3.OpGet(prefix, clientv3.WithPrefix())).Commit()
		if err != nil || !resp.Succeeded {
			return false, err
		}
		list = nil
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			name := strings.TrimPrefix(string(kv.Key), prefix)
			s, err := decodeSub(kv.Value)
			if err != nil {
				return false, fmt.Errorf("subscription %q: %w", name, err)
			}
			s.Name = name
			list = append(list, s)
		}
		return true, nil
	})
	if err != nil {
		return nil, wrap("list subscriptions", log, e.classify(ctx, err))
	}
	return list, nil
}

// DeleteSub implements Store.
func (e *Etcd) DeleteSub(ctx context.Context, log, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	err := e.onLog(ctx, log, func(id uint64, exists clientv3.Cmp) (bool, error) {
		resp, err := e.cli.Txn(ctx).If(exists).Then(clientv3.OpDelete(e.subKey(id, name))).Commit()
		switch {
		case err != nil || !resp.Succeeded:
			return false, err
		case resp.Responses[0].GetResponseDeleteRange().Deleted == 0:
			return false, ErrSubNotFound
		}
		return true, nil
	})
	return wrapSub("delete subscription", log, name, e.classify(ctx, err))
}

// CommitCursor implements Store. It does not write if the cursor is already
// at least cursor.
func (e *Etcd) CommitCursor(ctx context.Context, log, name string, cursor uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	var cur uint64
	err := e.updateSub(ctx, log, name, func(s *Sub) bool {
		cur = max(s.Cursor, cursor)
		if cur == s.Cursor {
			return false
		}
		s.Cursor = cur
		return true
	})
	if err != nil {
		return 0, wrapSub("commit cursor", log, name, e.classify(ctx, err))
	}
	return cur, nil
}

// SeekCursor implements Store.
func (e *Etcd) SeekCursor(ctx context.Context, log, name string, cursor uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	err := e.updateSub(ctx, log, name, func(s *Sub) bool {
		if s.Cursor == cursor {
			return false
		}
		s.Cursor = cursor
		return true
	})
	return wrapSub("seek cursor", log, name, e.classify(ctx, err))
}

// onLog reads the named log and calls fn with its ID and a comparison that
// holds while the log exists as read. fn returns done=false with a nil error
// if its transaction found the comparison false; onLog then reads the log
// again and calls fn again. It returns ErrNotFound if there is no such log.
func (e *Etcd) onLog(ctx context.Context, log string, fn func(id uint64, exists clientv3.Cmp) (done bool, err error)) error {
	for {
		l, created, err := e.getLog(ctx, log)
		if err != nil {
			return err
		}
		exists := clientv3.Compare(clientv3.CreateRevision(e.nameKey(log)), "=", created)
		if done, err := fn(l.ID, exists); done || err != nil {
			return err
		}
	}
}

// getSub reads subscription name of log id if exists holds. It returns nil
// and no error if exists does not hold, and ErrSubNotFound if there is no
// such subscription.
func (e *Etcd) getSub(ctx context.Context, id uint64, name string, exists clientv3.Cmp) (*kv, error) {
	resp, err := e.cli.Txn(ctx).If(exists).Then(clientv3.OpGet(e.subKey(id, name))).Commit()
	if err != nil || !resp.Succeeded {
		return nil, err
	}
	kv := first(resp, 0)
	if kv == nil {
		return nil, ErrSubNotFound
	}
	return kv, nil
}

// updateSub reads a subscription and lets fn change it; the change is
// committed if the subscription has not changed since it was read, and
// otherwise the whole is retried. fn returning false ends updateSub without
// a write.
func (e *Etcd) updateSub(ctx context.Context, log, name string, fn func(*Sub) bool) error {
	return e.onLog(ctx, log, func(id uint64, exists clientv3.Cmp) (bool, error) {
		kv, err := e.getSub(ctx, id, name, exists)
		if err != nil || kv == nil {
			return false, err
		}
		s, err := decodeSub(kv.Value)
		if err != nil {
			return false, err
		}
		s.Name = name
		if !fn(&s) {
			return true, nil
		}
		v, err := encodeSub(s)
		if err != nil {
			return false, err
		}
		// The subscription's mod revision changes with every write of it
		// and with its deletion, also by DeleteLog.
		key := e.subKey(id, name)
		resp, err := e.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(v))).
			Commit()
		if err != nil {
			return false, err
		}
		return resp.Succeeded, nil
	})
}
