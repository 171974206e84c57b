package server

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/ternpb"
)

// readAll reads the log from an offset without following, checking that the
// offsets are dense and the stream ends.
func (ts *testServer) readAll(t *testing.T, log string, from uint64) []*ternpb.Entry {
	t.Helper()
	stream, err := ts.api.Read(t.Context(), &ternpb.ReadRequest{Log: log, From: from})
	if err != nil {
		t.Fatal(err)
	}
	var out []*ternpb.Entry
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if resp.Tick != nil {
			t.Fatalf("tick %v in a read without ticks", resp.Tick)
		}
		for _, e := range resp.Entries {
			if want := from + uint64(len(out)); e.Offset != want {
				t.Fatalf("read offset %d, want %d", e.Offset, want)
			}
			out = append(out, e)
		}
	}
}

// recv receives one response.
func recv(t *testing.T, stream interface {
	Recv() (*ternpb.ReadResponse, error)
}) *ternpb.ReadResponse {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// recvEntries receives responses until it has n entries, and fails on a
// tick.
func recvEntries(t *testing.T, stream interface {
	Recv() (*ternpb.ReadResponse, error)
}, n int) []*ternpb.Entry {
	t.Helper()
	var out []*ternpb.Entry
	for len(out) < n {
		resp := recv(t, stream)
		if resp.Tick != nil {
			t.Fatalf("got tick %v, want entries", resp.Tick)
		}
		out = append(out, resp.Entries...)
	}
	if len(out) != n {
		t.Fatalf("got %d entries, want %d", len(out), n)
	}
	return out
}

func TestReadToEnd(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", nil)
	if es := ts.readAll(t, "l", 0); len(es) != 0 {
		t.Fatalf("empty log: read %d entries", len(es))
	}
	ts.appendN(t, "l", epoch, 10)
	es := ts.readAll(t, "l", 0)
	if len(es) != 10 {
		t.Fatalf("read %d entries, want 10", len(es))
	}
	for i, e := range es {
		if !bytes.Equal(e.Payload, payload(uint64(i))) {
			t.Errorf("entry %d: payload %q", i, e.Payload)
		}
	}
	if es := ts.readAll(t, "l", 7); len(es) != 3 {
		t.Fatalf("from 7: read %d entries, want 3", len(es))
	}
	if es := ts.readAll(t, "l", 10); len(es) != 0 {
		t.Fatalf("from the end: read %d entries, want 0", len(es))
	}

	// max_batch bounds the entries of a response.
	stream, err := ts.api.Read(t.Context(), &ternpb.ReadRequest{Log: "l", MaxBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Entries) > 3 || len(resp.Entries) == 0 {
			t.Fatalf("response of %d entries with max_batch 3", len(resp.Entries))
		}
		n += len(resp.Entries)
	}
	if n != 10 {
		t.Fatalf("read %d entries, want 10", n)
	}
}

func TestReadLargeEntries(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", nil)
	big := bytes.Repeat([]byte("x"), 300<<10)
	for range 8 {
		if _, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: big}}}); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := ts.api.Read(t.Context(), &ternpb.ReadRequest{Log: "l"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Entries)*len(big) > maxResponseBytes {
			t.Fatalf("response of %d entries of %d bytes", len(resp.Entries), len(big))
		}
		n += len(resp.Entries)
	}
	if n != 8 {
		t.Fatalf("read %d entries, want 8", n)
	}
}

func TestReadFollow(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 2)
	stream, err := ts.api.Read(t.Context(), &ternpb.ReadRequest{Log: "l", From: 1, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	if es := recvEntries(t, stream, 1); es[0].Offset != 1 {
		t.Fatalf("first entry at %d, want 1", es[0].Offset)
	}
	ts.appendN(t, "l", epoch, 1)
	if es := recvEntries(t, stream, 1); es[0].Offset != 2 || !bytes.Equal(es[0].Payload, payload(2)) {
		t.Fatalf("followed entry %v, want offset 2", es[0])
	}
}

func TestReadTicks(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	epoch := ts.createLog(t, "l", nil)
	stream, err := ts.api.Read(ctx, &ternpb.ReadRequest{Log: "l", Ticks: true})
	if err == nil {
		_, err = stream.Recv()
	}
	wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")

	stream, err = ts.api.Read(ctx, &ternpb.ReadRequest{Log: "l", Follow: true, Ticks: true})
	if err != nil {
		t.Fatal(err)
	}
	ts.appendN(t, "l", epoch, 1)
	if es := recvEntries(t, stream, 1); es[0].Offset != 0 { // the reader is open: it sees the next tick
		t.Fatalf("entry at %d, want 0", es[0].Offset)
	}
	if _, err := ts.api.AppendTimeTick(ctx, &ternpb.AppendTimeTickRequest{Log: "l", Epoch: epoch, Time: 1234}); err != nil {
		t.Fatal(err)
	}
	ts.appendN(t, "l", epoch, 1)
	resp := recv(t, stream)
	if resp.Tick == nil || resp.Tick.Time != 1234 || resp.Tick.Offset != 1 || len(resp.Entries) != 0 {
		t.Fatalf("got %v, want tick 1234 at offset 1 alone", resp)
	}
	if es := recvEntries(t, stream, 1); es[0].Offset != 1 {
		t.Fatalf("entry after the tick at %d, want 1", es[0].Offset)
	}
}

func TestReadTruncated(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 10)
	if _, err := ts.api.TruncateLog(ctx, &ternpb.TruncateLogRequest{Name: "l", Before: 5}); err != nil {
		t.Fatal(err)
	}
	stream, err := ts.api.Read(ctx, &ternpb.ReadRequest{Log: "l", From: 2})
	if err == nil {
		_, err = stream.Recv()
	}
	md := wantStatus(t, err, codes.OutOfRange, "TRUNCATED")
	if md["start"] != "5" {
		t.Errorf("TRUNCATED metadata %v, want start 5", md)
	}
	if es := ts.readAll(t, "l", 5); len(es) != 5 {
		t.Errorf("read %d entries from the start, want 5", len(es))
	}
}

// subscribe starts a Subscribe stream.
func (ts *testServer) subscribe(t *testing.T, ctx context.Context, log, name string) ternpb.Tern_SubscribeClient {
	t.Helper()
	stream, err := ts.api.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := &ternpb.SubscribeRequest_Start{Log: log, Name: name}
	if err := stream.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Start_{Start: start}}); err != nil {
		t.Fatal(err)
	}
	return stream
}

func ack(off uint64) *ternpb.SubscribeRequest {
	return &ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Ack_{Ack: &ternpb.SubscribeRequest_Ack{Offset: off}}}
}

// closeSub ends a Subscribe stream cleanly: CloseSend, then drain to EOF.
func closeSub(t *testing.T, stream ternpb.Tern_SubscribeClient) {
	t.Helper()
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("ending the stream: %v", err)
		}
	}
}

func (ts *testServer) describeSub(t *testing.T, log, name string) *ternpb.SubscriptionInfo {
	t.Helper()
	info, err := ts.api.DescribeSubscription(t.Context(), &ternpb.DescribeSubscriptionRequest{Log: log, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitCursor waits until the subscription's cursor (acknowledged, perhaps
// not yet committed) reaches want.
func (ts *testServer) waitCursor(t *testing.T, log, name string, want uint64) {
	t.Helper()
	for ts.describeSub(t, log, name).Cursor != want {
		time.Sleep(time.Millisecond)
	}
}

func TestSubscribe(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 10)
	created, err := ts.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "l", Name: "s", Pin: true})
	if err != nil {
		t.Fatal(err)
	}
	if created.Cursor != 0 || created.Lag != 10 || !created.Pin || created.Name != "s" || created.Log != "l" {
		t.Fatalf("created %v", created)
	}
	if _, err := ts.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "l", Name: "tail", FromEnd: true}); err != nil {
		t.Fatal(err)
	}
	_, err = ts.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "l", Name: "s"})
	wantStatus(t, err, codes.AlreadyExists, "SUBSCRIPTION_EXISTS")

	stream := ts.subscribe(t, ctx, "l", "s")
	es := recvEntries(t, stream, 10)
	for i, e := range es {
		if e.Offset != uint64(i) {
			t.Fatalf("entry %d at offset %d", i, e.Offset)
		}
	}
	if err := stream.Send(ack(3)); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(ack(6)); err != nil {
		t.Fatal(err)
	}
	closeSub(t, stream)
	if info := ts.describeSub(t, "l", "s"); info.Cursor != 7 || info.Lag != 3 {
		t.Fatalf("after acking 6 and closing: cursor %d lag %d, want 7 and 3", info.Cursor, info.Lag)
	}

	// Redelivery starts at the first unacknowledged entry.
	stream = ts.subscribe(t, ctx, "l", "s")
	if es := recvEntries(t, stream, 3); es[0].Offset != 7 {
		t.Fatalf("redelivery starts at %d, want 7", es[0].Offset)
	}
	ts.appendN(t, "l", epoch, 1)
	if es := recvEntries(t, stream, 1); es[0].Offset != 10 {
		t.Fatalf("followed entry at %d, want 10", es[0].Offset)
	}
	if err := stream.Send(ack(10)); err != nil {
		t.Fatal(err)
	}
	closeSub(t, stream)
	if info := ts.describeSub(t, "l", "s"); info.Cursor != 11 || info.Lag != 0 {
		t.Fatalf("cursor %d lag %d, want 11 and 0", info.Cursor, info.Lag)
	}

	// Seek, then Subscribe starts at the target.
	if _, err := ts.api.Seek(ctx, &ternpb.SeekRequest{Log: "l", Name: "s", To: 2}); err != nil {
		t.Fatal(err)
	}
	if info := ts.describeSub(t, "l", "s"); info.Cursor != 2 || info.Lag != 9 {
		t.Fatalf("after Seek: cursor %d lag %d, want 2 and 9", info.Cursor, info.Lag)
	}
	stream = ts.subscribe(t, ctx, "l", "s")
	if es := recvEntries(t, stream, 9); es[0].Offset != 2 {
		t.Fatalf("after Seek, delivery starts at %d, want 2", es[0].Offset)
	}
	closeSub(t, stream)

	list, err := ts.api.ListSubscriptions(ctx, &ternpb.ListSubscriptionsRequest{Log: "l"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Subscriptions) != 2 || list.Subscriptions[0].Name != "s" || list.Subscriptions[1].Name != "tail" || list.Subscriptions[1].Cursor != 10 {
		t.Fatalf("ListSubscriptions = %v", list.Subscriptions)
	}
	if _, err := ts.api.DeleteSubscription(ctx, &ternpb.DeleteSubscriptionRequest{Log: "l", Name: "tail"}); err != nil {
		t.Fatal(err)
	}
	_, err = ts.api.DescribeSubscription(ctx, &ternpb.DescribeSubscriptionRequest{Log: "l", Name: "tail"})
	wantStatus(t, err, codes.NotFound, "SUBSCRIPTION_NOT_FOUND")
}

func TestSubscribeCanceled(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 5)
	if _, err := ts.api.CreateSubscription(t.Context(), &ternpb.CreateSubscriptionRequest{Log: "l", Name: "s"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stream := ts.subscribe(t, ctx, "l", "s")
	recvEntries(t, stream, 5)
	if err := stream.Send(ack(1)); err != nil {
		t.Fatal(err)
	}
	ts.waitCursor(t, "l", "s", 2)
	cancel()
	stream = ts.subscribe(t, t.Context(), "l", "s")
	if es := recvEntries(t, stream, 3); es[0].Offset != 2 {
		t.Fatalf("after a canceled stream, delivery starts at %d, want 2", es[0].Offset)
	}
	closeSub(t, stream)
}

func TestSubscribeAckErrors(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 3)
	if _, err := ts.api.CreateSubscription(t.Context(), &ternpb.CreateSubscriptionRequest{Log: "l", Name: "s"}); err != nil {
		t.Fatal(err)
	}
	drainErr := func(stream ternpb.Tern_SubscribeClient) error {
		for {
			if _, err := stream.Recv(); err != nil {
				return err
			}
		}
	}

	t.Run("ack not delivered", func(t *testing.T) {
		stream := ts.subscribe(t, t.Context(), "l", "s")
		recvEntries(t, stream, 3)
		if err := stream.Send(ack(3)); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, drainErr(stream), codes.OutOfRange, "OUT_OF_RANGE")
	})
	t.Run("second start", func(t *testing.T) {
		stream := ts.subscribe(t, t.Context(), "l", "s")
		start := &ternpb.SubscribeRequest_Start{Log: "l", Name: "s"}
		if err := stream.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Start_{Start: start}}); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, drainErr(stream), codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("ack first", func(t *testing.T) {
		stream, err := ts.api.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(ack(0)); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, drainErr(stream), codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("empty message", func(t *testing.T) {
		stream, err := ts.api.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&ternpb.SubscribeRequest{}); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, drainErr(stream), codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("unknown subscription", func(t *testing.T) {
		stream := ts.subscribe(t, t.Context(), "l", "nope")
		wantStatus(t, drainErr(stream), codes.NotFound, "SUBSCRIPTION_NOT_FOUND")
	})
	t.Run("deleted while subscribed", func(t *testing.T) {
		if _, err := ts.api.CreateSubscription(t.Context(), &ternpb.CreateSubscriptionRequest{Log: "l", Name: "gone"}); err != nil {
			t.Fatal(err)
		}
		stream := ts.subscribe(t, t.Context(), "l", "gone")
		recvEntries(t, stream, 3)
		if _, err := ts.api.DeleteSubscription(t.Context(), &ternpb.DeleteSubscriptionRequest{Log: "l", Name: "gone"}); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, drainErr(stream), codes.Unavailable, "CLOSED")
	})
	if info := ts.describeSub(t, "l", "s"); info.Cursor != 0 {
		t.Errorf("cursor %d after streams that acknowledged nothing valid, want 0", info.Cursor)
	}
}

// A Read from_start begins where the log starts now, one from_end (without
// follow) has nothing to send; both at once is a bad request.
func TestReadFromStartAndEnd(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 10)
	if _, err := ts.api.TruncateLog(t.Context(), &ternpb.TruncateLogRequest{Name: "l", Before: 4}); err != nil {
		t.Fatal(err)
	}
	read := func(req *ternpb.ReadRequest) ([]uint64, error) {
		stream, err := ts.api.Read(t.Context(), req)
		if err != nil {
			return nil, err
		}
		var offs []uint64
		for {
			resp, err := stream.Recv()
			if err == io.EOF {
				return offs, nil
			}
			if err != nil {
				return offs, err
			}
			for _, e := range resp.Entries {
				offs = append(offs, e.Offset)
			}
		}
	}
	if offs, err := read(&ternpb.ReadRequest{Log: "l", FromStart: true}); err != nil || len(offs) != 6 || offs[0] != 4 {
		t.Errorf("from_start after a truncation at 4: %v, %v; want 4 to 9", offs, err)
	}
	if offs, err := read(&ternpb.ReadRequest{Log: "l", FromEnd: true}); err != nil || len(offs) != 0 {
		t.Errorf("from_end without follow: %v, %v; want nothing", offs, err)
	}
	if _, err := read(&ternpb.ReadRequest{Log: "l", FromStart: true, FromEnd: true}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("from_start and from_end: %v, want INVALID_ARGUMENT", err)
	}
}
