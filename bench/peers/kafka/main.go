// Command kafka-driver runs the loadgen workloads against Apache Kafka
// 4.3.1: one KRaft broker that is its own controller, started by bench.sh
// (--addr is its listener, --pid its process, whose CPU time and peak
// memory are reported), through the franz-go client.
//
// Each log of a workload is a topic with one partition and one replica, so
// a log is one ordered sequence, as in Tern. Every variant produces with
// acks=all (the Java client's default since Kafka 3.0; with one replica it
// means the leader's own append), idempotence on (both clients' default),
// no linger and no compression (the Java client's default; franz-go's
// would be snappy). Records, batches, requests and fetches may be up to
// 16 MiB, on the broker, the topics and the client alike, so that the
// 5,000,000-byte entries of pubsub-5m fit.
//
// Variants:
//
//   - durable: every topic has flush.messages=1, so the broker fsyncs the
//     partition after each appended batch, before it answers the produce
//     request: acknowledged means on disk, as in Tern. Open reads the
//     setting back with DescribeConfigs and fails if it did not take.
//   - default: Kafka's own, no flush setting (flush.messages is
//     Long.MAX_VALUE, which Open checks): acknowledged entries are in the
//     page cache, and the OS writes them back when it will. Kafka relies on
//     replication, here absent, for durability.
//
// What makes it fair: Append is one ProduceSync of the batch's entries and
// AppendAsync a Produce whose promise calls done. All producers share one
// client, which puts the records that wait for a partition into one batch
// per produce request (up to 5 requests in flight, the idempotent
// producer's limit): Kafka's group commit, one fsync per batch when
// durable. A reader is its own consumer client on the partition, from
// offset 0 or from the end offset listed just before it starts, which is
// why no entry appended after ready can be missed; ready is called once
// its first fetch is on the wire. It fetches up to 16 MiB at a time (the
// Java client's default is 1 MiB per partition) so that reading back is not
// bound by round trips.
package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// maxBytes bounds a record batch, a topic's messages and a fetch; the
	// broker's message.max.bytes in server.properties.in is the same.
	maxBytes = 16 << 20
	// setupTimeout bounds the wait for a broker that has just started to
	// create the topics and lead their partitions.
	setupTimeout = 2 * time.Minute
	// kafkaDefaultFlush is flush.messages when nothing sets it.
	kafkaDefaultFlush = "9223372036854775807"
)

func main() {
	loadgen.Main(loadgen.Driver{
		System:   "kafka",
		Version:  "4.3.1",
		Variants: []string{"durable", "default"},
		Open:     open,
	})
}

type kafka struct {
	addr   string
	topics []string
	cl     *kgo.Client // producer and admin
	adm    *kadm.Client
}

func open(ctx context.Context, cfg loadgen.Config) (loadgen.Target, error) {
	if cfg.Addr == "" {
		return nil, errors.New("--addr is required: the broker's listener, as bench/peers/kafka/bench.sh starts it")
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Addr),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(maxBytes),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), // every record to partition 0
	)
	if err != nil {
		return nil, err
	}
	k := &kafka{addr: cfg.Addr, cl: cl, adm: kadm.NewClient(cl)}
	for i := range cfg.Spec.Logs {
		k.topics = append(k.topics, fmt.Sprintf("log-%d", i))
	}
	if err := k.setup(ctx, cfg.Variant); err != nil {
		cl.Close()
		return nil, err
	}
	return k, nil
}

// setup creates the topics, checks their flush setting and waits until
// their partitions have a leader.
func (k *kafka) setup(ctx context.Context, variant string) error {
	configs := map[string]*string{"max.message.bytes": kadm.StringPtr(strconv.Itoa(maxBytes))}
	wantFlush := kafkaDefaultFlush
	if variant == "durable" {
		configs["flush.messages"] = kadm.StringPtr("1")
		wantFlush = "1"
	}
	err := retry(ctx, "create topics", func(ctx context.Context) error {
		created, err := k.adm.CreateTopics(ctx, 1, 1, configs, k.topics...)
		if err != nil {
			return err
		}
		for _, c := range created {
			// An earlier attempt may have created it and timed out.
			if c.Err != nil && !errors.Is(c.Err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("%s: %w (%s)", c.Topic, c.Err, c.ErrMessage)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	described, err := k.adm.DescribeTopicConfigs(ctx, k.topics...)
	if err != nil {
		return fmt.Errorf("describe topic configs: %w", err)
	}
	for _, topic := range k.topics {
		rc, err := described.On(topic, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return fmt.Errorf("describe configs of %s: %w", topic, err)
		}
		got := "(absent)"
		for _, c := range rc.Configs {
			if c.Key == "flush.messages" {
				got = c.MaybeValue()
			}
		}
		if got != wantFlush {
			return fmt.Errorf("topic %s has flush.messages=%s, want %s for the %s variant: the broker did not take the setting", topic, got, wantFlush, variant)
		}
	}

	return retry(ctx, "list end offsets", func(ctx context.Context) error {
		listed, err := k.adm.ListEndOffsets(ctx, k.topics...)
		if err != nil {
			return err
		}
		for _, topic := range k.topics {
			if _, ok := listed.Lookup(topic, 0); !ok {
				return fmt.Errorf("no partition 0 of %s yet", topic)
			}
		}
		return listed.Error()
	})
}

// retry calls f until it succeeds or setupTimeout passes: a broker accepts
// connections a little before it can serve requests.
func retry(ctx context.Context, what string, f func(context.Context) error) error {
	deadline := time.Now().Add(setupTimeout)
	for {
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w (is the broker at --addr up? bench/peers/kafka/bench.sh starts one)", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (k *kafka) Append(ctx context.Context, log int, entries [][]byte) error {
	recs := make([]*kgo.Record, len(entries))
	for i, e := range entries {
		recs[i] = &kgo.Record{Topic: k.topics[log], Value: e}
	}
	return k.cl.ProduceSync(ctx, recs...).FirstErr()
}

func (k *kafka) AppendAsync(ctx context.Context, log int, entry []byte, done func(error)) {
	k.cl.Produce(ctx, &kgo.Record{Topic: k.topics[log], Value: entry}, func(_ *kgo.Record, err error) { done(err) })
}

func (k *kafka) Read(ctx context.Context, log int, fromStart bool, ready func(), fn func(entry []byte) error) error {
	topic := k.topics[log]
	from := kgo.NewOffset().AtStart()
	if !fromStart {
		listed, err := k.adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return fmt.Errorf("list end offset of %s: %w", topic, err)
		}
		end, ok := listed.Lookup(topic, 0)
		if !ok {
			return fmt.Errorf("list end offset of %s: no partition 0", topic)
		}
		from = kgo.NewOffset().At(end.Offset)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: from}}),
		kgo.FetchMaxBytes(maxBytes),
		kgo.FetchMaxPartitionBytes(maxBytes),
		kgo.WithHooks(&firstFetch{ready: ready}),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fetches.Err(); err != nil {
			return fmt.Errorf("consume %s: %w", topic, err)
		}
		for it := fetches.RecordIter(); !it.Done(); {
			if err := fn(it.Next().Value); err != nil {
				return err
			}
		}
	}
}

func (k *kafka) Close() error {
	k.cl.Close()
	return nil
}

// firstFetch calls ready once the consumer has written its first fetch
// request, which asks for the offset the reader starts from.
type firstFetch struct {
	once  sync.Once
	ready func()
}

func (h *firstFetch) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.Fetch.Int16() && err == nil {
		h.once.Do(h.ready)
	}
}
