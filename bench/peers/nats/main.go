// Command nats-driver benchmarks NATS JetStream v2.15.2 with the loadgen
// workloads, against a nats-server that bench.sh started on 127.0.0.1.
//
// What is measured: each log of a workload is a JetStream stream ("LOG0",
// "LOG1", ...) with one subject ("log.0", ...), file storage, one replica,
// messages up to 8 MiB (the server's max_payload is set to match, and a
// stream's ingest queue, max_buffered_size, to 512 MiB rather than 128 MiB,
// so that pubsub-5m's 64 entries in flight are not refused). All producers
// share one client connection, as one application would.
//
//   - Append publishes each entry synchronously (jetstream.Publish waits for
//     the stream's PubAck); a batch is published as one PublishAsync per
//     entry and returns when every PubAck is in.
//   - AppendAsync is PublishAsync; the PubAckFuture of every entry is waited
//     on in publish order by one goroutine per log, which calls done. The
//     client's own limit on unacknowledged publishes
//     (WithPublishAsyncMaxPending) is set to the workload's in-flight figure
//     (at least 64), so that the load generator, not a client stall, bounds
//     what is in flight.
//   - Read is an ordered consumer (no acks, flow control by the client) from
//     the first message or from new ones; a pull buffers at most 500
//     messages (the client's default) and 32 MiB, so that 5 MB messages do
//     not queue gigabytes in the client or trip the server's 64 MiB
//     slow-consumer limit.
//
// Durability is set in the server's configuration, not here (bench.sh
// writes it and checks /jsz?config=true before each run):
//
//   - durable: jetstream { sync_interval: always }, so the server fsyncs
//     every message before it sends the PubAck (/jsz shows
//     "sync_always": true). Like Tern's default, an acknowledged entry is
//     on disk. There is no group commit: a stream writes and fsyncs its
//     queued messages one at a time, and sends their PubAcks once the whole
//     queue it took has been stored, so under pipelined or concurrent load
//     acks arrive in bursts.
//   - default: no sync_interval, NATS's own default: a PubAck means the
//     message is written to the stream's file (in the page cache), which is
//     fsynced every 2 minutes.
package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/ternwal/tern/bench/loadgen"
)

const (
	// maxMessageBytes fits pubsub-5m's 5 MB entries; bench.sh sets the
	// server's max_payload to the same.
	maxMessageBytes = 8 << 20
	// readBufferBytes bounds what one pull of a reader asks for.
	readBufferBytes = 32 << 20
)

func main() {
	loadgen.Main(loadgen.Driver{
		System:   "nats",
		Version:  "2.15.2",
		Variants: []string{"durable", "default"},
		Open:     open,
	})
}

// target is one connection to the server under test and its streams.
type target struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	streams  []string
	subjects []string
	// pending[i] carries the futures of log i's asynchronous appends, in
	// publish order, to the goroutine that waits on them.
	pending []chan pendingAck
	// publishing[i] keeps log i's publishes in the order of pending[i].
	publishing []sync.Mutex
	waiters    sync.WaitGroup
}

type pendingAck struct {
	ctx    context.Context
	future jetstream.PubAckFuture
	done   func(error)
}

func open(ctx context.Context, cfg loadgen.Config) (loadgen.Target, error) {
	if cfg.Addr == "" {
		return nil, errors.New("--addr is required: the nats-server to use (bench/peers/nats/bench.sh starts one)")
	}
	nc, err := nats.Connect("nats://"+cfg.Addr, nats.Name("tern-bench"))
	if err != nil {
		return nil, fmt.Errorf("connect to nats-server at %s (is it running? bench/peers/nats/bench.sh starts one): %w", cfg.Addr, err)
	}
	inFlight := max(cfg.Spec.InFlight*cfg.Spec.Producers, 64)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(inFlight))
	if err != nil {
		nc.Close()
		return nil, err
	}
	t := &target{
		nc:         nc,
		js:         js,
		pending:    make([]chan pendingAck, cfg.Spec.Logs),
		publishing: make([]sync.Mutex, cfg.Spec.Logs),
	}
	for i := range cfg.Spec.Logs {
		stream, subject := fmt.Sprintf("LOG%d", i), fmt.Sprintf("log.%d", i)
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name:       stream,
			Subjects:   []string{subject},
			Storage:    jetstream.FileStorage,
			Replicas:   1,
			MaxMsgSize: maxMessageBytes,
		})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("create stream %s: %w", stream, err)
		}
		t.streams = append(t.streams, stream)
		t.subjects = append(t.subjects, subject)
		// The load generator keeps at most inFlight entries unacknowledged,
		// so a send on this channel never waits.
		t.pending[i] = make(chan pendingAck, inFlight)
		t.waiters.Go(func() { awaitAcks(t.pending[i]) })
	}
	return t, nil
}

// awaitAcks calls done for each asynchronous append of one log as its
// PubAck (or error) arrives. A stream acknowledges in order, so waiting on
// the futures in publish order delays none of them.
func awaitAcks(pending <-chan pendingAck) {
	for p := range pending {
		select {
		case <-p.future.Ok():
			p.done(nil)
		case err := <-p.future.Err():
			p.done(err)
		case <-p.ctx.Done():
			p.done(p.ctx.Err())
		}
	}
}

func (t *target) Append(ctx context.Context, log int, entries [][]byte) error {
	if len(entries) == 1 {
		_, err := t.js.Publish(ctx, t.subjects[log], entries[0])
		return err
	}
	futures := make([]jetstream.PubAckFuture, 0, len(entries))
	for _, e := range entries {
		f, err := t.js.PublishAsync(t.subjects[log], e)
		if err != nil {
			return err
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (t *target) AppendAsync(ctx context.Context, log int, entry []byte, done func(error)) {
	mu := &t.publishing[log]
	mu.Lock()
	defer mu.Unlock()
	f, err := t.js.PublishAsync(t.subjects[log], entry)
	if err != nil {
		done(err)
		return
	}
	t.pending[log] <- pendingAck{ctx: ctx, future: f, done: done}
}

func (t *target) Read(ctx context.Context, log int, fromStart bool, ready func(), fn func(entry []byte) error) error {
	policy := jetstream.DeliverNewPolicy
	if fromStart {
		policy = jetstream.DeliverAllPolicy
	}
	// The server creates the consumer here, and with DeliverNew it starts
	// after the stream's last message at that moment.
	c, err := t.js.OrderedConsumer(ctx, t.streams[log], jetstream.OrderedConsumerConfig{DeliverPolicy: policy})
	if err != nil {
		return fmt.Errorf("create consumer on %s: %w", t.streams[log], err)
	}
	msgs, err := c.Messages(jetstream.PullMaxMessagesWithBytesLimit(jetstream.DefaultMaxMessages, readBufferBytes))
	if err != nil {
		return fmt.Errorf("consume %s: %w", t.streams[log], err)
	}
	defer msgs.Stop()
	ready()
	for {
		m, err := msgs.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("read %s: %w", t.streams[log], err)
		}
		if err := fn(m.Data()); err != nil {
			return err
		}
	}
}

// Close waits for the outstanding asynchronous appends to be answered, then
// closes the connection.
func (t *target) Close() error {
	for _, p := range t.pending {
		if p != nil {
			close(p)
		}
	}
	done := make(chan struct{})
	go func() { t.waiters.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.nc.Close()
		return errors.New("asynchronous appends still unanswered a minute after the run")
	}
	t.nc.Close()
	return nil
}
