package meta

// The bbolt file
//
// OpenBolt keeps the store in one bbolt file. The file holds one top-level
// bucket:
//
//	logs                      bucket
//	  sequence                the bucket's bbolt sequence: the last log ID
//	                          assigned; IDs come from NextSequence, so they
//	                          start at 1 and are never reused, even after the
//	                          log that had one is deleted
//	  <name> -> <record>      one key per log: the key is the log's name as is
//	                          (any bytes; keys sort bytewise, which is the
//	                          order ListLogs returns)
//
// A record is a JSON object, version 1:
//
//	{"v":1,"id":7,"created_us":1700000000000000,"options":"AAEC","epoch":3,"start":10}
//
//	v           record version, always 1; any other value is rejected
//	id          Log.ID
//	created_us  Log.Created as microseconds since the Unix epoch, UTC
//	options     Log.Options, base64 (standard, padded); null for nil
//	epoch       Log.Epoch
//	start       Log.Start
//
// The name is not repeated in the record. Every change is one read-write
// transaction, which bbolt syncs to disk before it commits.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// lockTimeout is how long OpenBolt waits for the file lock. Another process
// that holds the store holds it for its lifetime, so waiting longer would only
// delay the error.
const lockTimeout = 100 * time.Millisecond

// recordVersion is the version written in, and required of, every record.
const recordVersion = 1

var logsBucket = []byte("logs")

// Bolt is a Store on a bbolt file. It is safe for concurrent use; writes are
// serialized by bbolt, reads run concurrently with them.
type Bolt struct {
	db *bolt.DB
}

var _ Store = (*Bolt)(nil)

// OpenBolt opens the store in the bbolt file at path, creating the file (not
// its directory) if it does not exist. The file is locked until Close; if
// another process, or another OpenBolt in this process, holds it, OpenBolt
// fails after a short wait with an error that wraps ErrLocked and names path.
func OpenBolt(path string) (*Bolt, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, &lockedError{path: path}
		}
		if _, ok := errors.AsType[*fs.PathError](err); ok {
			return nil, fmt.Errorf("meta: %w", err) // already names path
		}
		return nil, fmt.Errorf("meta: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(logsBucket)
		return err
	})
	if err != nil {
		_ = db.Close() // the init error is the one to report
		return nil, fmt.Errorf("meta: open %s: %w", path, err)
	}
	return &Bolt{db: db}, nil
}

// lockedError reports a store file locked by someone else. It wraps ErrLocked
// and reads "meta: open <path>: store is in use by another process".
type lockedError struct {
	path string
}

func (e *lockedError) Error() string {
	return "meta: open " + e.path + ": store is in use by another process"
}

func (e *lockedError) Unwrap() error { return ErrLocked }

// CreateLog implements Store. Only l.Name and l.Options are used; the new log
// has Epoch 0 and Start 0. Created is truncated to microseconds, the precision
// the file keeps.
func (b *Bolt) CreateLog(ctx context.Context, l Log) (Log, error) {
	if err := ctx.Err(); err != nil {
		return Log{}, err
	}
	l = Log{
		Name:    l.Name,
		Created: time.Now().UTC().Truncate(time.Microsecond),
		Options: l.Options,
	}
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(logsBucket)
		key := []byte(l.Name)
		if bk.Get(key) != nil {
			return ErrExist
		}
		id, err := bk.NextSequence()
		if err != nil {
			return err
		}
		l.ID = id
		return putLog(bk, l)
	})
	if err != nil {
		return Log{}, wrap("create", l.Name, err)
	}
	return l, nil
}

// Log implements Store.
func (b *Bolt) Log(ctx context.Context, name string) (Log, error) {
	if err := ctx.Err(); err != nil {
		return Log{}, err
	}
	var l Log
	err := b.db.View(func(tx *bolt.Tx) error {
		var err error
		l, err = getLog(tx.Bucket(logsBucket), name)
		return err
	})
	if err != nil {
		return Log{}, wrap("get", name, err)
	}
	return l, nil
}

// ListLogs implements Store. It returns nil if no name starts with prefix.
func (b *Bolt) ListLogs(ctx context.Context, prefix string) ([]Log, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var logs []Log
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(logsBucket).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			l, err := decodeLog(v)
			if err != nil {
				return fmt.Errorf("log %q: %w", k, err)
			}
			l.Name = string(k)
			logs = append(logs, l)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("meta: list %q: %w", prefix, err)
	}
	return logs, nil
}

// DeleteLog implements Store. The log's ID is not reused.
func (b *Bolt) DeleteLog(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(logsBucket)
		if bk.Get([]byte(name)) == nil {
			return ErrNotFound
		}
		return bk.Delete([]byte(name))
	})
	return wrap("delete", name, err)
}

// BumpEpoch implements Store.
func (b *Bolt) BumpEpoch(ctx context.Context, name string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var epoch uint64
	err := b.update(name, func(l *Log) {
		l.Epoch++
		epoch = l.Epoch
	})
	if err != nil {
		return 0, wrap("bump epoch", name, err)
	}
	return epoch, nil
}

// AdvanceStart implements Store.
func (b *Bolt) AdvanceStart(ctx context.Context, name string, start uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var cur uint64
	err := b.update(name, func(l *Log) {
		l.Start = max(l.Start, start)
		cur = l.Start
	})
	if err != nil {
		return 0, wrap("advance start", name, err)
	}
	return cur, nil
}

// Close implements Store. It releases the file lock.
func (b *Bolt) Close() error {
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("meta: close: %w", err)
	}
	return nil
}

// update reads the named log, lets fn change it and writes it back, in one
// read-write transaction.
func (b *Bolt) update(name string, fn func(*Log)) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(logsBucket)
		l, err := getLog(bk, name)
		if err != nil {
			return err
		}
		fn(&l)
		return putLog(bk, l)
	})
}

// wrap adds the operation and the log name to err, once.
func wrap(op, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrExist):
		return fmt.Errorf("%w: %q", err, name)
	default:
		return fmt.Errorf("meta: %s %q: %w", op, name, err)
	}
}

func getLog(bk *bolt.Bucket, name string) (Log, error) {
	v := bk.Get([]byte(name))
	if v == nil {
		return Log{}, ErrNotFound
	}
	l, err := decodeLog(v)
	if err != nil {
		return Log{}, err
	}
	l.Name = name
	return l, nil
}

func putLog(bk *bolt.Bucket, l Log) error {
	v, err := encodeLog(l)
	if err != nil {
		return err
	}
	return bk.Put([]byte(l.Name), v)
}

// record is the persisted form of a Log, described at the top of this file.
type record struct {
	V         int    `json:"v"`
	ID        uint64 `json:"id"`
	CreatedUS int64  `json:"created_us"`
	Options   []byte `json:"options"`
	Epoch     uint64 `json:"epoch"`
	Start     uint64 `json:"start"`
}

// encodeLog returns the record for l; l.Name is the key and is not encoded.
// Created is kept to the microsecond.
func encodeLog(l Log) ([]byte, error) {
	return json.Marshal(record{
		V:         recordVersion,
		ID:        l.ID,
		CreatedUS: l.Created.UnixMicro(),
		Options:   l.Options,
		Epoch:     l.Epoch,
		Start:     l.Start,
	})
}

// decodeLog parses a record into a Log without its Name. The result does not
// alias v, which bbolt owns only for the transaction.
func decodeLog(v []byte) (Log, error) {
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return Log{}, fmt.Errorf("decode record: %w", err)
	}
	if r.V != recordVersion {
		return Log{}, fmt.Errorf("decode record: unsupported version %d", r.V)
	}
	return Log{
		ID:      r.ID,
		Created: time.UnixMicro(r.CreatedUS).UTC(),
		Options: r.Options,
		Epoch:   r.Epoch,
		Start:   r.Start,
	}, nil
}
