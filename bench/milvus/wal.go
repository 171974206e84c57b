package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/milvus-io/milvus-proto/go-api/v2/commonpb"
	"github.com/milvus-io/milvus-proto/go-api/v2/msgpb"
	"github.com/milvus-io/milvus/pkg/v2/streaming/util/message"
	"github.com/milvus-io/milvus/pkg/v2/streaming/util/options"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"
)

// insertProperties are the properties of a Milvus insert message (its
// type, version, vchannel and header), which every appended message
// carries: what Milvus's streaming node hands its WAL is the message's
// payload and these properties.
var insertProperties = func() map[string]string {
	m, err := message.NewInsertMessageBuilderV1().
		WithHeader(&message.InsertMessageHeader{
			CollectionId: 1,
			Partitions:   []*message.PartitionSegmentAssignment{{PartitionId: 2, Rows: 1, BinarySize: 1024}},
		}).
		WithBody(&msgpb.InsertRequest{Base: &commonpb.MsgBase{MsgType: commonpb.MsgType_Insert}}).
		WithVChannel("bench-v1").
		BuildMutable()
	if err != nil {
		panic(err)
	}
	return m.Properties().ToRawMap()
}()

// newMessage is the Milvus message of one loadgen entry: the entry is its
// payload, as the streaming node builds it (NewMutableMessageBeforeAppend)
// before it calls WALImpls.Append. The message does not copy the entry.
func newMessage(entry []byte) message.MutableMessage {
	props := make(map[string]string, len(insertProperties))
	for k, v := range insertProperties {
		props[k] = v
	}
	return message.NewMutableMessageBeforeAppend(entry, props)
}

// walTarget is a loadgen target over one Milvus WAL (walimpls.WALImpls) of
// one channel: Append is WALImpls.Append, Read a ScannerImpls. The
// workloads use one log.
type walTarget struct {
	wal walimpls.WALImpls
}

func (t *walTarget) Append(ctx context.Context, _ int, entries [][]byte) error {
	if len(entries) == 1 {
		_, err := t.wal.Append(ctx, newMessage(entries[0]))
		return err
	}
	// WALImpls has no batch append: a batch (the catch-up's untimed
	// fill) is that many concurrent Appends.
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() { _, errs[i] = t.wal.Append(ctx, newMessage(e)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (t *walTarget) Read(ctx context.Context, _ int, fromStart bool, ready func(), fn func(entry []byte) error) error {
	policy := options.DeliverPolicyLatest()
	if fromStart {
		policy = options.DeliverPolicyAll()
	}
	s, err := t.wal.Read(ctx, walimpls.ReadOption{Name: "bench", DeliverPolicy: policy})
	if err != nil {
		return fmt.Errorf("open a scanner of %s: %w", t.wal.Channel().Name, err)
	}
	defer s.Close()
	ready()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-s.Chan():
			if !ok {
				return fmt.Errorf("the scanner of %s ended: %w", t.wal.Channel().Name, s.Error())
			}
			if err := fn(m.Payload()); err != nil {
				return err
			}
		}
	}
}

func (t *walTarget) Close() error {
	t.wal.Close()
	return nil
}
