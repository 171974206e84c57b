// Command rocksdb-bench measures the RocksDB write-ahead log through
// loadgen, embedded in this process: one database per run in --dir, opened
// with RocksDB's default options (plus create_if_missing).
//
// A log is a key prefix: an entry's key is the log number (4 bytes,
// big-endian) then its sequence number in that log (8 bytes, big-endian), so
// keys sort in append order and one log is one contiguous key range. An
// Append is one WriteBatch of its entries and one DB.Write, which RocksDB
// makes atomic and writes to its WAL as one record.
//
// Variants:
//   - durable: WriteOptions.sync = true. Write returns after the WAL has been
//     fsynced; concurrent writers join the same write group, whose leader
//     writes and syncs for all of them (RocksDB's group commit). Close checks
//     the DB statistics and fails the run unless there was one WAL sync per
//     commit group.
//   - default: sync = false, RocksDB's default. Write returns once the
//     record is in the OS page cache: not durable at acknowledgement.
//
// Concurrency is RocksDB's own: loadgen's producers call Write from their
// own goroutines (64 at once in conc-4k and conc-64k). RocksDB has no
// asynchronous write, so async-100b is not run, and a pubsub round publishes
// with as many synchronous producers as the round has entries in flight
// (loadgen says so in the result's notes).
//
// Reading is an iterator over a log's key range from its first key. That is
// all catchup and pubsub need, since they read what was acknowledged before
// the read began. As in any RocksDB, the newest entries (up to the 64 MB
// memtable's worth) are read from memory, the rest from SST files, so a
// catch-up read smaller than a memtable says little. RocksDB has no way to
// wait for new keys, so a reader cannot follow the tail: e2e is not run.
//
// CPU time and peak memory are those of this process, which holds RocksDB
// and the load generator.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"
	"github.com/ternwal/tern/bench/loadgen"
)

// version is the librocksdb-dev version install.sh checks for.
const version = "7.8.3"

func main() {
	loadgen.Main(loadgen.Driver{
		System:   "rocksdb",
		Version:  version + " (grocksdb v1.7.14)",
		Variants: []string{"durable", "default"},
		Open:     open,
	})
}

type target struct {
	db      *grocksdb.DB
	wo      *grocksdb.WriteOptions
	durable bool
	// next holds each log's next sequence number.
	next []atomic.Uint64
}

func open(_ context.Context, cfg loadgen.Config) (loadgen.Target, error) {
	opts := grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	defer opts.Destroy()
	db, err := grocksdb.OpenDb(opts, cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("rocksdb: open %s: %w", cfg.Dir, err)
	}
	wo := grocksdb.NewDefaultWriteOptions()
	wo.SetSync(cfg.Variant == "durable")
	return &target{db: db, wo: wo, durable: wo.IsSync(), next: make([]atomic.Uint64, cfg.Spec.Logs)}, nil
}

func (t *target) Append(_ context.Context, log int, entries [][]byte) error {
	first := t.next[log].Add(uint64(len(entries))) - uint64(len(entries))
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	for i, e := range entries {
		wb.Put(key(log, first+uint64(i)), e) // Put copies key and value
	}
	return t.db.Write(t.wo, wb)
}

// Read iterates over log from its first key to its last, and fails if fn
// has not stopped it by then: every entry it is asked for was acknowledged
// before the read began, so a short log is a lost write.
func (t *target) Read(ctx context.Context, log int, fromStart bool, ready func(), fn func([]byte) error) error {
	if !fromStart {
		return errors.New("rocksdb: no reading from the tail: RocksDB cannot wait for new keys")
	}
	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	ro.SetIterateUpperBound(binary.BigEndian.AppendUint32(nil, uint32(log)+1))
	it := t.db.NewIterator(ro)
	defer it.Close()
	it.Seek(key(log, 0))
	ready()
	var n int64
	for ; it.Valid(); it.Next() {
		if err := fn(it.Value().Data()); err != nil {
			return err
		}
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("rocksdb: read log %d: %w", log, err)
	}
	return fmt.Errorf("rocksdb: log %d ended after %d entries", log, n)
}

// Notes reports RocksDB's write statistics for the result.
func (t *target) Notes() []string {
	groups, syncs, stall, err := t.stats()
	if err != nil {
		return []string{err.Error()}
	}
	return []string{fmt.Sprintf("%s commit groups, %s WAL syncs, write stalls %s", groups, syncs, stall)}
}

func (t *target) stats() (groups, syncs, stall string, err error) {
	stats := t.db.GetProperty("rocksdb.dbstats")
	g, s, st := statsRE[0].FindStringSubmatch(stats), statsRE[1].FindStringSubmatch(stats), statsRE[2].FindStringSubmatch(stats)
	if g == nil || s == nil || st == nil {
		return "", "", "", fmt.Errorf("rocksdb: unexpected rocksdb.dbstats, cannot check the WAL syncs:\n%s", stats)
	}
	return g[1], s[1], st[1], nil
}

// Close fails, for the durable variant, unless every commit group synced
// the WAL.
func (t *target) Close() error {
	groups, syncs, _, err := t.stats()
	t.wo.Destroy()
	t.db.Close()
	if err != nil {
		return err
	}
	// RocksDB prints both counts the same way (12345 as "12K"), so equal
	// counts print equal.
	if t.durable && (syncs == "0" || syncs != groups) {
		return fmt.Errorf("rocksdb: durable variant synced the WAL %s times for %s commit groups: sync did not take effect", syncs, groups)
	}
	return nil
}

// statsRE finds the cumulative commit groups, WAL syncs and stall time in
// the "rocksdb.dbstats" property.
var statsRE = [3]*regexp.Regexp{
	regexp.MustCompile(`Cumulative writes: .*, (\S+) commit groups`),
	regexp.MustCompile(`Cumulative WAL: .*, (\S+) syncs`),
	regexp.MustCompile(`Cumulative stall: (\S+ H:M:S, \S+ percent)`),
}

func key(log int, seq uint64) []byte {
	k := binary.BigEndian.AppendUint32(make([]byte, 0, 12), uint32(log))
	return binary.BigEndian.AppendUint64(k, seq)
}
