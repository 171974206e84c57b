// Command pulsar is the benchmark driver for Apache Pulsar 4.2.4 in
// standalone mode (broker, one bookie and a RocksDB metadata store in one
// JVM), which bench.sh starts and passes as --addr (the broker's binary
// protocol port) and --pid. It speaks to it with pulsar-client-go v0.19.0.
//
// What is measured: every log is one non-partitioned persistent topic,
// written by one producer and read by a pulsar.Reader.
//
//   - Append of one entry is a synchronous Producer.Send. Send flushes the
//     client's batch at once, so it adds no batching delay. Append of
//     several entries (catchup-1g's writer) sends them asynchronously and
//     the last one synchronously, so they travel as batches, and returns
//     once all are acknowledged.
//   - AppendAsync is Producer.SendAsync with a callback. The producer's
//     MaxPendingMessages and the client's memory limit are raised to hold
//     what the workload keeps in flight; the batching delay is 1 ms (the
//     Java client's default; the Go client's is 10 ms, which would hold
//     back a round that keeps only 64 entries in flight).
//   - Read is a Reader from the earliest or the latest message; ready is
//     called once the reader exists on the broker. Its receive queue holds
//     at most 64 MiB of entries (1,000 entries, the default, unless they
//     are larger than 64 KiB).
//
// Durability: the broker acknowledges a message once the bookie has
// acknowledged its entry (ensemble, write and ack quorum 1), and the bookie
// acknowledges once the entry is written to its journal; journalSyncData
// decides whether that write is fsynced first.
//
//   - durable: journalSyncData=true, BookKeeper's own default (in 4.17.3,
//     ServerConfiguration.getJournalSyncData defaults to true). The journal
//     groups the fsync of entries that arrive within
//     journalMaxGroupWaitMSec=1 (standalone.conf's value).
//   - default: journalSyncData=false, as Pulsar's conf/standalone.conf
//     ships it ("Should the data be fsynced on journal before
//     acknowledgment"): acknowledged entries are in the page cache, and the
//     journal is fsynced about once a second
//     (journalPageCacheFlushIntervalMSec, 1000 by default).
//
// Both variants run the same standalone.conf.in otherwise. The standalone
// hands that file to its bookie as the base configuration (BKCluster in
// pulsar-metadata 4.2.4 falls back to its test defaults, which turn
// journalWriteData off, only when given none: read with javap). bench.sh
// reads the bookie's live configuration from the bookie's own admin
// endpoint, /api/v1/config/server_config, and refuses to run unless
// journalSyncData is what the variant says and journalWriteData is true.
// This driver cannot see the bookie: run it through bench.sh, or check the
// same way. Seen with strace during sync-1k: durable, one fdatasync of the
// journal file per group commit (about 300 a second); default, about one
// a second.
//
// Reads in catchup-1g may be served in part from memory even though the
// page cache is dropped: the bookie keeps the newest entries in its write
// cache (a quarter of the JVM's direct memory, 512 MiB with bench.sh's
// -XX:MaxDirectMemorySize=2g) until it flushes them to its entry log.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/ternwal/tern/bench/loadgen"
)

func main() {
	loadgen.Main(loadgen.Driver{
		System:   "pulsar",
		Version:  "4.2.4",
		Variants: []string{"durable", "default"},
		Open:     open,
	})
}

// readQueueBytes bounds what a reader's receive queue holds.
const readQueueBytes = 64 << 20

type target struct {
	client    pulsar.Client
	topics    []string
	producers []pulsar.Producer
	readQueue int
}

func open(ctx context.Context, cfg loadgen.Config) (loadgen.Target, error) {
	if cfg.Addr == "" {
		return nil, errors.New("--addr is required: the broker's 127.0.0.1:PORT (bench/peers/pulsar/bench.sh starts a standalone and passes it)")
	}
	s := cfg.Spec
	inFlight := s.InFlight * ((s.Producers + s.Logs - 1) / s.Logs) // per log
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:              "pulsar://" + cfg.Addr,
		Logger:           plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		MemoryLimitBytes: max(64<<20, 2*int64(inFlight)*int64(s.EntryBytes)),
	})
	if err != nil {
		return nil, fmt.Errorf("pulsar client for %s: %w", cfg.Addr, err)
	}
	t := &target{client: client, readQueue: min(1000, max(1, readQueueBytes/max(1, s.EntryBytes)))}
	run := time.Now().UnixNano()
	for i := range s.Logs {
		topic := fmt.Sprintf("persistent://public/default/bench-%d-log-%d", run, i)
		p, err := client.CreateProducer(pulsar.ProducerOptions{
			Topic:                   topic,
			MaxPendingMessages:      max(1000, inFlight),
			BatchingMaxPublishDelay: time.Millisecond,
		})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("producer on %s (is the standalone at %s up? bench.sh waits for it): %w", topic, cfg.Addr, err)
		}
		t.topics = append(t.topics, topic)
		t.producers = append(t.producers, p)
	}
	return t, nil
}

func (t *target) Append(ctx context.Context, log int, entries [][]byte) error {
	p := t.producers[log]
	if len(entries) == 1 {
		_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: entries[0]})
		return err
	}
	acks := make(chan error, len(entries)-1)
	for _, e := range entries[:len(entries)-1] {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: e}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			acks <- err
		})
	}
	_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: entries[len(entries)-1]})
	for range len(entries) - 1 {
		if e := <-acks; err == nil {
			err = e
		}
	}
	return err
}

func (t *target) AppendAsync(ctx context.Context, log int, entry []byte, done func(error)) {
	t.producers[log].SendAsync(ctx, &pulsar.ProducerMessage{Payload: entry}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		done(err)
	})
}

func (t *target) Read(ctx context.Context, log int, fromStart bool, ready func(), fn func(entry []byte) error) error {
	start := pulsar.LatestMessageID()
	if fromStart {
		start = pulsar.EarliestMessageID()
	}
	r, err := t.client.CreateReader(pulsar.ReaderOptions{
		Topic:             t.topics[log],
		StartMessageID:    start,
		ReceiverQueueSize: t.readQueue,
	})
	if err != nil {
		return fmt.Errorf("reader on %s: %w", t.topics[log], err)
	}
	defer r.Close()
	ready()
	for {
		msg, err := r.Next(ctx)
		if err != nil {
			return err
		}
		if err := fn(msg.Payload()); err != nil {
			return err
		}
	}
}

func (t *target) Close() error {
	for _, p := range t.producers {
		p.Close()
	}
	t.client.Close()
	return nil
}
