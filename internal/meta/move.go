package meta

// Moving a data directory's metadata from its bbolt file into etcd
//
// A data directory made by an embedded program or the tern CLI keeps its
// metadata in a bbolt file; tern serve keeps it in etcd. Bolt.Contents reads
// everything the file holds and Etcd.Load writes it under the store's root,
// with the same log IDs, epochs, sessions, truncation points, cursors,
// segments and installation, so the logs' files and object keys (which
// carry the IDs and the installation) stay theirs.
//
// Load writes in batches of transactions and the install record last: a
// root with the record holds a whole load (or is another installation's),
// and one without it may hold part of an interrupted load, which Load
// clears and writes again.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Contents is all the metadata of a store.
type Contents struct {
	Installation Installation
	LastID       uint64 // the last log ID given out: new logs get higher ones
	Logs         []LogContents
}

// LogContents is one log's metadata.
type LogContents struct {
	Log      Log
	Subs     []Sub
	Segments []Segment // in Seq order
}

// ErrOtherInstallation is returned by Load when the etcd root already
// holds another installation's metadata.
var ErrOtherInstallation = errors.New("meta: the etcd root holds another installation's metadata")

// Contents reads the whole store in one read transaction. A store that has
// no installation yet gets one first, so the metadata moves with an
// identity.
func (b *Bolt) Contents(ctx context.Context) (Contents, error) {
	in, err := b.Installation(ctx)
	if err != nil {
		return Contents{}, err
	}
	c := Contents{Installation: in}
	err = b.db.View(func(tx *bolt.Tx) error {
		logs := tx.Bucket(logsBucket)
		c.LastID = logs.Sequence()
		return logs.ForEach(func(k, v []byte) error {
			l, err := decodeLog(v)
			if err != nil {
				return fmt.Errorf("log %q: %w", k, err)
			}
			l.Name = string(k)
			lc := LogContents{Log: l}
			if bk := tx.Bucket(subsBucket).Bucket(idKey(l.ID)); bk != nil {
				err := bk.ForEach(func(k, v []byte) error {
					s, err := decodeSub(v)
					if err != nil {
						return fmt.Errorf("log %q subscription %q: %w", l.Name, k, err)
					}
					s.Name = string(k)
					lc.Subs = append(lc.Subs, s)
					return nil
				})
				if err != nil {
					return err
				}
			}
			if bk := tx.Bucket(segmentsBucket).Bucket(idKey(l.ID)); bk != nil {
				err := bk.ForEach(func(k, v []byte) error {
					s, err := decodeSegmentAt(k, v)
					if err != nil {
						return fmt.Errorf("log %q: %w", l.Name, err)
					}
					lc.Segments = append(lc.Segments, s)
					return nil
				})
				if err != nil {
					return err
				}
			}
			c.Logs = append(c.Logs, lc)
			return nil
		})
	})
	if err != nil {
		return Contents{}, fmt.Errorf("meta: read %s: %w", b.db.Path(), err)
	}
	return c, nil
}

// Load writes c under the store's root. It returns nil without writing when
// the root already holds c's installation (an earlier Load finished), and
// ErrOtherInstallation when it holds another one; a root without an install
// record loses what it has under names/, ids and logs/ (an interrupted
// Load's part) before c is written.
func (e *Etcd) Load(ctx context.Context, c Contents) error {
	if err := e.load(ctx, c); err != nil {
		return fmt.Errorf("meta: load into etcd root %s: %w", e.root, err)
	}
	return nil
}

// The bounds of one transaction of Load, below etcd's defaults (128
// operations, 1.5 MiB a request).
const (
	loadBatchOps   = 100
	loadBatchBytes = 512 << 10
)

func (e *Etcd) load(ctx context.Context, c Contents) error {
	resp, err := e.cli.Get(ctx, e.installKey())
	if err != nil {
		return err
	}
	if len(resp.Kvs) > 0 {
		in, err := decodeStoredInstallation(e.installKey(), resp.Kvs[0].Value)
		if err != nil {
			return err
		}
		if in.ID == c.Installation.ID {
			return nil
		}
		return fmt.Errorf("%w: %s, not %s", ErrOtherInstallation, in.ID, c.Installation.ID)
	}
	for _, prefix := range []string{e.root + "names/", e.root + "logs/"} {
		if _, err := e.cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
			return err
		}
	}
	if _, err := e.cli.Delete(ctx, e.idsKey()); err != nil {
		return err
	}
	var ops []clientv3.Op
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		_, err := e.cli.Txn(ctx).Then(ops...).Commit()
		ops, size = ops[:0], 0
		return err
	}
	put := func(key string, v []byte) error {
		if len(ops) == loadBatchOps || size+len(key)+len(v) > loadBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		ops = append(ops, clientv3.OpPut(key, string(v)))
		size += len(key) + len(v)
		return nil
	}
	for _, lc := range c.Logs {
		l := lc.Log
		v, err := encodeLog(l)
		if err != nil {
			return fmt.Errorf("log %q: %w", l.Name, err)
		}
		if err := put(e.nameKey(l.Name), v); err != nil {
			return err
		}
		for _, s := range lc.Subs {
			v, err := encodeSub(s)
			if err != nil {
				return fmt.Errorf("log %q subscription %q: %w", l.Name, s.Name, err)
			}
			if err := put(e.subKey(l.ID, s.Name), v); err != nil {
				return err
			}
		}
		for _, s := range lc.Segments {
			v, err := encodeSegment(s)
			if err != nil {
				return fmt.Errorf("log %q segment %d: %w", l.Name, s.Seq, err)
			}
			if err := put(e.segKey(l.ID, s.Seq), v); err != nil {
				return err
			}
		}
		if n := len(lc.Segments); n > 0 {
			if err := put(e.segTailKey(l.ID), []byte(strconv.FormatUint(lc.Segments[n-1].Seq, 10))); err != nil {
				return err
			}
		}
	}
	if c.LastID > 0 {
		if err := put(e.idsKey(), []byte(strconv.FormatUint(c.LastID, 10))); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	key := e.installKey()
	txn, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(encodeInstallation(c.Installation)))).
		Commit()
	if err != nil {
		return err
	}
	if !txn.Succeeded {
		return fmt.Errorf("%w: another process stored an installation while this one loaded", ErrOtherInstallation)
	}
	return nil
}
