package meta

// The bbolt file
//
// OpenBolt keeps the store in one bbolt file. The file holds two top-level
// buckets:
//
//	logs                      bucket
//	  sequence                the bucket's bbolt sequence: the last log ID
//	                          assigned; IDs come from NextSequence, so they
//	                          start at 1 and are never reused, even after the
//	                          log that had one is deleted
//	  <name> -> <record>      one key per log: the key is the log's name as is
//	                          (any bytes; keys sort bytewise, which is the
//	                          order ListLogs returns)
//	subs                      bucket
//	  <log ID>                bucket, one per log that has had a subscription:
//	                          the key is the log's ID, 8 bytes big-endian;
//	                          keyed by ID, not name, so a log created again
//	                          under a deleted one's name starts with none;
//	                          DeleteLog deletes it with the log
//	    <sub> -> <sub record> one key per subscription: its name as is (keys
//	                          sort bytewise, the order ListSubs returns)
//	segments                  bucket
//	  <log ID>                bucket, one per log that has had a segment,
//	                          keyed and deleted as in subs
//	    <seq> -> <segment record>
//	                          one key per segment: its Seq, 8 bytes
//	                          big-endian, so keys sort by Seq (the order
//	                          Segments returns and the one CreateSegment
//	                          finds the newest segment by)
//	installation              bucket, created by the first Installation
//	  id -> <install record>  the store's installation (bolt_install.go)
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
//	session     Log.Session; absent when 0 (every record written before
//	            sessions existed, whose epoch was the session)
//	shared      Log.Shared; absent when false
//	ended       Log.Ended; absent when false
//	installation
//	            Log.Installation; absent when empty (every record written
//	            before installations had IDs)
//
// A sub record is a JSON object, version 1:
//
//	{"v":1,"created_us":1700000000000000,"cursor":42,"pin":true}
//
//	v           record version, always 1; any other value is rejected
//	created_us  Sub.Created as microseconds since the Unix epoch, UTC
//	cursor      Sub.Cursor
//	pin         Sub.Pin
//
// A segment record is a JSON object, version 1 (here on several lines):
//
//	{"v":1,"epoch":3,"base":100,"created_ns":1700000000000000001,
//	 "sealed":true,"end":250,"bytes":4096,"max_time_ns":1700000000500000000,
//	 "objects":[{"key":"0","base":100,"bytes":3000},{"key":"1","base":180,"bytes":1096}]}
//
//	v            record version, always 1; any other value is rejected
//	epoch        Segment.Epoch
//	base         Segment.Base
//	created_ns   Segment.Created as nanoseconds since the Unix epoch; null
//	             for the zero time. Kept to the nanosecond because the
//	             caller sets it and compares what SealSegment returns; a
//	             time outside the years 1678-2262 is refused
//	sealed       Segment.Sealed
//	end          Segment.End
//	bytes        Segment.Bytes
//	max_time_ns  Segment.MaxTime
//	objects      Segment.Objects in order, null for nil; each object has
//	             key (a UTF-8 string; other keys are refused, as JSON
//	             would replace their bytes), base and bytes
//	ensemble, ack_quorum
//	             Segment.Ensemble and AckQuorum, left out when empty
//	logical_bytes
//	             Segment.LogicalBytes, left out when it is bytes (always
//	             for a segment without compressed batches, and in records
//	             written before it existed, whose compressed batches then
//	             count as stored)
//
// Names and Seqs are not repeated in the records. Every change is one
// read-write transaction, which bbolt syncs to disk before it commits. The
// etcd store (etcd.go) keeps the same three records.
//
// Writer claims are not in the file: the file lock makes this process the
// only one that can store an epoch, so the store tracks its claims in memory
// and ends each when it stores a newer epoch of the claim's log, deletes the
// log, or closes.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/ternwal/tern/internal/vfs"
)

// lockTimeout is how long OpenBolt waits for the file lock. Another process
// that holds the store holds it for its lifetime, so waiting longer would only
// delay the error.
const lockTimeout = 100 * time.Millisecond

// recordVersion is the version written in, and required of, every record.
const recordVersion = 1

var (
	logsBucket     = []byte("logs")
	subsBucket     = []byte("subs")
	segmentsBucket = []byte("segments")
)

// errClosed is returned by ClaimWriter on a closed store.
var errClosed = errors.New("store is closed")

// Bolt is a Store on a bbolt file. It is safe for concurrent use; writes are
// serialized by bbolt, reads run concurrently with them.
type Bolt struct {
	db *bolt.DB

	mu     sync.Mutex
	closed bool
	claims map[uint64]*boltClaim // by log ID: the log's claim, if not lost
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
		for _, name := range [][]byte{logsBucket, subsBucket, segmentsBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close() // the init error is the one to report
		return nil, fmt.Errorf("meta: open %s: %w", path, err)
	}
	// bbolt syncs the file, not the directory that holds its name.
	if err := vfs.OS.SyncDir(filepath.Dir(path)); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("meta: open %s: sync its directory: %w", path, err)
	}
	return &Bolt{db: db, claims: map[uint64]*boltClaim{}}, nil
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

// CreateLog implements Store. Only l.Name, l.Options and l.Installation are
// used; the new log
// has Epoch 0 and Start 0. Created is truncated to microseconds, the precision
// the file keeps.
func (b *Bolt) CreateLog(ctx context.Context, l Log) (Log, error) {
	if err := ctx.Err(); err != nil {
		return Log{}, err
	}
	l = Log{
		Name:         l.Name,
		Created:      time.Now().UTC().Truncate(time.Microsecond),
		Options:      l.Options,
		Installation: l.Installation,
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
	return b.ListLogsPage(ctx, prefix, "", 0)
}

// ListLogsPage implements Store. It returns nil if no name is left.
func (b *Bolt) ListLogsPage(ctx context.Context, prefix, after string, limit int) ([]Log, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var logs []Log
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(logsBucket).Cursor()
		p := []byte(prefix)
		k, v := c.Seek(p)
		if after != "" && after >= prefix {
			a := []byte(after)
			if k, v = c.Seek(a); k != nil && bytes.Equal(k, a) {
				k, v = c.Next()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, p) && (limit <= 0 || len(logs) < limit); k, v = c.Next() {
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

// CountLogs implements Store: it walks the keys, without decoding records.
func (b *Bolt) CountLogs(ctx context.Context, prefix string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(logsBucket).Cursor()
		p := []byte(prefix)
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("meta: count %q: %w", prefix, err)
	}
	return n, nil
}

// DeleteLog implements Store. The log's ID is not reused. The log's
// subscriptions and segments are deleted with it and its claim, if any, is
// lost.
func (b *Bolt) DeleteLog(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(logsBucket)
		l, err := getLog(bk, name)
		if err != nil {
			return err
		}
		if err := bk.Delete([]byte(name)); err != nil {
			return err
		}
		for _, name := range [][]byte{subsBucket, segmentsBucket} {
			err := tx.Bucket(name).DeleteBucket(idKey(l.ID))
			if err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
				return err
			}
		}
		b.fence(l.ID)
		return nil
	})
	return wrap("delete", name, err)
}

// BumpEpoch implements Store. The log's claim, if any, is lost.
func (b *Bolt) BumpEpoch(ctx context.Context, name string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var epoch uint64
	err := b.update(name, func(l *Log) error {
		l.Epoch++
		epoch = l.Epoch
		b.fence(l.ID)
		return nil
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
	err := b.update(name, func(l *Log) error {
		l.Start = max(l.Start, start)
		cur = l.Start
		return nil
	})
	if err != nil {
		return 0, wrap("advance start", name, err)
	}
	return cur, nil
}

// Close implements Store. It releases the file lock; every claim made
// through b is lost.
func (b *Bolt) Close() error {
	b.mu.Lock()
	b.closed = true
	for id, c := range b.claims {
		c.lose()
		delete(b.claims, id)
	}
	b.mu.Unlock()
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("meta: close: %w", err)
	}
	return nil
}

// update reads the named log, lets fn change it and writes it back, in one
// read-write transaction that fn's error aborts.
func (b *Bolt) update(name string, fn func(*Log) error) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(logsBucket)
		l, err := getLog(bk, name)
		if err != nil {
			return err
		}
		if err := fn(&l); err != nil {
			return err
		}
		return putLog(bk, l)
	})
}

// idKey is a log ID as a key of the subs and segments buckets.
func idKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, id)
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
	// Session, Shared and Ended are omitted at their zero values, as in
	// the records written before sessions existed.
	Session uint64 `json:"session,omitempty"`
	Shared  bool   `json:"shared,omitempty"`
	Ended   bool   `json:"ended,omitempty"`
	// Installation is omitted when empty, as in the records written
	// before it existed.
	Installation string `json:"installation,omitempty"`
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
		Session:   l.Session,
		Shared:    l.Shared,
		Ended:     l.Ended,

		Installation: l.Installation,
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
		Session: r.Session,
		Shared:  r.Shared,
		Ended:   r.Ended,

		Installation: r.Installation,
	}, nil
}

// subRecord is the persisted form of a Sub, described at the top of this
// file.
type subRecord struct {
	V         int    `json:"v"`
	CreatedUS int64  `json:"created_us"`
	Cursor    uint64 `json:"cursor"`
	Pin       bool   `json:"pin"`
}

// encodeSub returns the sub record for s; s.Name is the key and is not
// encoded. Created is kept to the microsecond.
func encodeSub(s Sub) ([]byte, error) {
	return json.Marshal(subRecord{
		V:         recordVersion,
		CreatedUS: s.Created.UnixMicro(),
		Cursor:    s.Cursor,
		Pin:       s.Pin,
	})
}

// decodeSub parses a sub record into a Sub without its Name.
func decodeSub(v []byte) (Sub, error) {
	var r subRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return Sub{}, fmt.Errorf("decode sub record: %w", err)
	}
	if r.V != recordVersion {
		return Sub{}, fmt.Errorf("decode sub record: unsupported version %d", r.V)
	}
	return Sub{
		Created: time.UnixMicro(r.CreatedUS).UTC(),
		Cursor:  r.Cursor,
		Pin:     r.Pin,
	}, nil
}
