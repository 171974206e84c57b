package server

import (
	"context"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/ternwal/tern/client/ternpb"
)

// rawCodec sends and receives bytes as they are, to send what is not a
// valid message.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *v.(*[]byte) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

// garbage is not a valid protobuf message: a field with wire type 7.
var garbage = []byte{0x0f, 0xff, 0xff, 0xff, 0xff}

func TestBadInput(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", &ternpb.LogOptions{MaxEntryBytes: 100})
	ts.appendN(t, "l", epoch, 3)
	if _, err := ts.api.CreateSubscription(t.Context(), &ternpb.CreateSubscriptionRequest{Log: "l", Name: "s"}); err != nil {
		t.Fatal(err)
	}
	entry := []*ternpb.Entry{{Payload: []byte("x")}}
	// readErr is the error of a Read stream.
	readErr := func(ctx context.Context, req *ternpb.ReadRequest) error {
		stream, err := ts.api.Read(ctx, req)
		for err == nil {
			_, err = stream.Recv()
		}
		if err == io.EOF {
			return nil
		}
		return err
	}

	t.Run("unknown log", func(t *testing.T) {
		_, err := ts.api.DescribeLog(t.Context(), &ternpb.DescribeLogRequest{Name: "nope"})
		wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
		_, err = ts.api.OpenWriter(t.Context(), &ternpb.OpenWriterRequest{Log: "nope"})
		wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
		wantStatus(t, readErr(t.Context(), &ternpb.ReadRequest{Log: "nope"}), codes.NotFound, "LOG_NOT_FOUND")
		_, err = ts.api.CreateSubscription(t.Context(), &ternpb.CreateSubscriptionRequest{Log: "nope", Name: "s"})
		wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
		_, err = ts.api.DeleteLog(t.Context(), &ternpb.DeleteLogRequest{Name: "nope"})
		wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
	})
	t.Run("unknown subscription", func(t *testing.T) {
		_, err := ts.api.DescribeSubscription(t.Context(), &ternpb.DescribeSubscriptionRequest{Log: "l", Name: "nope"})
		wantStatus(t, err, codes.NotFound, "SUBSCRIPTION_NOT_FOUND")
		_, err = ts.api.Seek(t.Context(), &ternpb.SeekRequest{Log: "l", Name: "nope"})
		wantStatus(t, err, codes.NotFound, "SUBSCRIPTION_NOT_FOUND")
		_, err = ts.api.DeleteSubscription(t.Context(), &ternpb.DeleteSubscriptionRequest{Log: "l", Name: "nope"})
		wantStatus(t, err, codes.NotFound, "SUBSCRIPTION_NOT_FOUND")
	})
	for _, name := range []string{"", "a//b", strings.Repeat("a", 300), "/x", "x/", "a b", "é"} {
		t.Run("invalid name "+name[:min(len(name), 10)], func(t *testing.T) {
			_, err := ts.api.CreateLog(t.Context(), &ternpb.CreateLogRequest{Name: name})
			wantStatus(t, err, codes.InvalidArgument, "INVALID_NAME")
			_, err = ts.api.DescribeLog(t.Context(), &ternpb.DescribeLogRequest{Name: name})
			wantStatus(t, err, codes.InvalidArgument, "INVALID_NAME")
			_, err = ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: name, Epoch: epoch, Entries: entry})
			wantStatus(t, err, codes.InvalidArgument, "INVALID_NAME")
			wantStatus(t, readErr(t.Context(), &ternpb.ReadRequest{Log: name}), codes.InvalidArgument, "INVALID_NAME")
		})
	}
	t.Run("invalid subscription name", func(t *testing.T) {
		_, err := ts.api.CreateSubscription(t.Context(), &ternpb.CreateSubscriptionRequest{Log: "l", Name: "a/b"})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_NAME")
	})
	t.Run("invalid options", func(t *testing.T) {
		_, err := ts.api.CreateLog(t.Context(), &ternpb.CreateLogRequest{Name: "o", Options: &ternpb.LogOptions{Fsync: "sometimes"}})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("oversized entry", func(t *testing.T) {
		_, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: make([]byte, 101)}}})
		wantStatus(t, err, codes.InvalidArgument, "TOO_LARGE")
		_, err = ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Properties: map[string][]byte{"k": make([]byte, 100)}}}})
		wantStatus(t, err, codes.InvalidArgument, "TOO_LARGE")
	})
	t.Run("no entries", func(t *testing.T) {
		_, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: epoch})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("unknown epoch", func(t *testing.T) {
		for _, e := range []uint64{0, epoch + 1, epoch + 1000} {
			_, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: e, Entries: entry})
			wantStatus(t, err, codes.FailedPrecondition, "FENCED")
		}
	})
	t.Run("read beyond the end", func(t *testing.T) {
		wantStatus(t, readErr(t.Context(), &ternpb.ReadRequest{Log: "l", From: 4}), codes.OutOfRange, "OUT_OF_RANGE")
		wantStatus(t, readErr(t.Context(), &ternpb.ReadRequest{Log: "l", From: 4, Follow: true}), codes.OutOfRange, "OUT_OF_RANGE")
	})
	t.Run("absurd max_batch", func(t *testing.T) {
		wantStatus(t, readErr(t.Context(), &ternpb.ReadRequest{Log: "l", MaxBatch: 1 << 31}), codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("subscription out of range", func(t *testing.T) {
		_, err := ts.api.CreateSubscription(t.Context(), &ternpb.CreateSubscriptionRequest{Log: "l", Name: "far", From: 4})
		wantStatus(t, err, codes.OutOfRange, "OUT_OF_RANGE")
		_, err = ts.api.Seek(t.Context(), &ternpb.SeekRequest{Log: "l", Name: "s", To: 4})
		wantStatus(t, err, codes.OutOfRange, "OUT_OF_RANGE")
	})
	t.Run("subscribe starting with an ack", func(t *testing.T) {
		stream, err := ts.api.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(ack(0)); err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("malformed unary message", func(t *testing.T) {
		var out []byte
		in := garbage
		err := ts.conn.Invoke(t.Context(), ternpb.Tern_Append_FullMethodName, &in, &out, grpc.ForceCodec(rawCodec{}))
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	for _, method := range []struct {
		name string
		desc *grpc.StreamDesc
	}{
		{ternpb.Tern_AppendStream_FullMethodName, &ternpb.Tern_ServiceDesc.Streams[0]},
		{ternpb.Tern_Read_FullMethodName, &ternpb.Tern_ServiceDesc.Streams[1]},
		{ternpb.Tern_Subscribe_FullMethodName, &ternpb.Tern_ServiceDesc.Streams[2]},
	} {
		t.Run("malformed stream message "+method.name, func(t *testing.T) {
			stream, err := ts.conn.NewStream(t.Context(), method.desc, method.name, grpc.ForceCodec(rawCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			in := garbage
			if err := stream.SendMsg(&in); err != nil {
				t.Fatal(err)
			}
			for err == nil {
				var out []byte
				err = stream.RecvMsg(&out)
			}
			wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
		})
	}

	// The server still answers, and the writer still appends.
	ts.appendN(t, "l", epoch, 1)
	if es := ts.readAll(t, "l", 0); len(es) != 4 {
		t.Fatalf("read %d entries, want 4", len(es))
	}
}

func TestCloseEndsStreams(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 1)
	if _, err := ts.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "l", Name: "s"}); err != nil {
		t.Fatal(err)
	}
	read, err := ts.api.Read(ctx, &ternpb.ReadRequest{Log: "l", Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	recvEntries(t, read, 1)
	sub := ts.subscribe(t, ctx, "l", "s")
	recvEntries(t, sub, 1)
	if err := sub.Send(ack(0)); err != nil {
		t.Fatal(err)
	}
	app, err := ts.api.AppendStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Send(streamReq("l", epoch, []*ternpb.Entry{{Payload: []byte("x")}})); err != nil {
		t.Fatal(err)
	}
	if resp, err := app.Recv(); err != nil || len(resp.Results) != 1 || resp.Results[0].Error != nil {
		t.Fatalf("append: %v %v", resp, err)
	}
	ts.waitCursor(t, "l", "s", 1)
	// A Subscribe stream that never sends Start.
	idle, err := ts.api.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if err := ts.srv.Close(); err != nil {
		t.Fatal(err)
	}
	for name, recv := range map[string]func() error{
		"read":      func() error { _, err := read.Recv(); return err },
		"subscribe": func() error { _, err := sub.Recv(); return err },
		"append":    func() error { _, err := app.Recv(); return err },
		"idle":      func() error { _, err := idle.Recv(); return err },
	} {
		err := recv()
		for err == nil { // entries sent before the end
			err = recv()
		}
		t.Logf("%s: %v", name, err)
		wantStatus(t, err, codes.Unavailable, "CLOSED")
	}
	// New streams and writers are refused; the Server's writers are closed.
	_, err = ts.api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "l"})
	wantStatus(t, err, codes.Unavailable, "CLOSED")
	_, err = ts.api.Append(ctx, &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: []byte("x")}}})
	wantStatus(t, err, codes.FailedPrecondition, "FENCED")
	stream, err := ts.api.Read(ctx, &ternpb.ReadRequest{Log: "l"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantStatus(t, err, codes.Unavailable, "CLOSED")
}
