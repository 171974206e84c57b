package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/ternpb"
)

// TestBadInputKeepsServerUp sends the server what it must refuse, through
// the Go client, the CLI and raw gRPC: each gets the documented error, and
// the server goes on serving.
func TestBadInputKeepsServerUp(t *testing.T) {
	srv := startServer(t, t.TempDir())
	c := openClient(t, srv.addr)
	conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	api := ternpb.NewTernClient(conn)

	t.Run("unknown log", func(t *testing.T) {
		ctx := deadline(t)
		if _, err := c.OpenLog(ctx, "missing"); !errors.Is(err, tern.ErrNotFound) {
			t.Errorf("OpenLog of a missing log: %v, want ErrNotFound", err)
		}
		if err := c.DeleteLog(ctx, "missing"); !errors.Is(err, tern.ErrNotFound) {
			t.Errorf("DeleteLog of a missing log: %v, want ErrNotFound", err)
		}
		_, err := api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: "missing"})
		wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
		_, err = api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "missing"})
		wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
		for _, args := range [][]string{{"read", "missing"}, {"log", "describe", "missing"}} {
			_, stderr := runCLI(t, srv.addr, "", 1, args...)
			if !strings.Contains(stderr, `tern log create missing`) {
				t.Errorf("tern %s: the message does not say how to create the log:\n%s", strings.Join(args, " "), stderr)
			}
		}
	})

	t.Run("entry too large", func(t *testing.T) {
		ctx := deadline(t)
		l, err := c.CreateLog(ctx, "small", tern.LogOptions{MaxEntryBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		w, err := l.OpenWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		big := bytes.Repeat([]byte("x"), 2000)
		if _, err := w.Append(ctx, tern.Entry{Payload: big}); !errors.Is(err, tern.ErrTooLarge) {
			t.Errorf("Append of 2000 bytes to a log of 1024: %v, want ErrTooLarge", err)
		}
		if _, err := w.Append(ctx, tern.Entry{Payload: []byte("fits")}); err != nil {
			t.Fatal(err)
		}

		// The client checks the limit before sending: send it anyway.
		ow, err := api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "small"})
		if err != nil {
			t.Fatal(err)
		}
		epoch := ow.GetEpoch()
		_, err = api.Append(ctx, &ternpb.AppendRequest{Log: "small", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: big}}})
		wantStatus(t, err, codes.InvalidArgument, "TOO_LARGE")
		stream, err := api.AppendStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// One request of two batches: the one too large fails alone.
		req := &ternpb.AppendStreamRequest{Log: "small", Epoch: epoch, Batches: []*ternpb.Batch{
			{Entries: []*ternpb.Entry{{Payload: big}}},
			{Entries: []*ternpb.Entry{{Payload: []byte("fits")}}},
		}}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		var rs []*ternpb.AppendResult // in one response or more
		for len(rs) < 2 {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, resp.GetResults()...)
		}
		if len(rs) != 2 || rs[0].GetError().GetReason() != "TOO_LARGE" || rs[1].GetError() != nil {
			t.Errorf("AppendStream of a batch of 2000 bytes and one of 4 answered %v, want TOO_LARGE and an offset", rs)
		}
		stream.CloseSend()
		if _, err := stream.Recv(); err != io.EOF {
			t.Errorf("AppendStream ended with %v, want io.EOF", err)
		}

		_, stderr := runCLI(t, srv.addr, string(big)+"\n", 1, "append", "small")
		if !strings.Contains(stderr, "1024") {
			t.Errorf("tern append of a line of 2000 bytes: the message does not give the limit of 1024 bytes:\n%s", stderr)
		}
	})

	t.Run("invalid names", func(t *testing.T) {
		ctx := deadline(t)
		for _, name := range []string{"a//b", strings.Repeat("n", 300)} {
			if _, err := c.CreateLog(ctx, name, tern.LogOptions{}); !errors.Is(err, tern.ErrInvalidName) {
				t.Errorf("CreateLog(%.20q...): %v, want ErrInvalidName", name, err)
			}
			if _, err := c.OpenLog(ctx, name); !errors.Is(err, tern.ErrInvalidName) {
				t.Errorf("OpenLog(%.20q...): %v, want ErrInvalidName", name, err)
			}
			// The client checks names before sending: send them anyway.
			_, err := api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: name})
			wantStatus(t, err, codes.InvalidArgument, "INVALID_NAME")
			_, err = api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: name})
			wantStatus(t, err, codes.InvalidArgument, "INVALID_NAME")
			_, stderr := runCLI(t, srv.addr, "", 1, "log", "create", name)
			if !strings.Contains(stderr, "invalid name") {
				t.Errorf("tern log create %.20q...: the message does not say the name is invalid:\n%s", name, stderr)
			}
		}
		l, err := c.CreateLog(ctx, "named", tern.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.CreateSubscription(ctx, "a/b", tern.SubOptions{}); !errors.Is(err, tern.ErrInvalidName) {
			t.Errorf("CreateSubscription(a/b): %v, want ErrInvalidName", err)
		}
		_, err = api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "named", Name: "a/b"})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_NAME")
		logs, err := c.ListLogs(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range logs {
			if info.Name != "small" && info.Name != "named" {
				t.Errorf("the server has a log %.20q that no valid request created", info.Name)
			}
		}
	})

	t.Run("read below the start", func(t *testing.T) {
		ctx := deadline(t)
		l, err := c.CreateLog(ctx, "trunc", tern.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.CreateSubscription(ctx, "behind", tern.SubOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err := l.OpenWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.AppendBatch(ctx, make([]tern.Entry, 10)); err != nil {
			t.Fatal(err)
		}
		if err := l.Truncate(ctx, 5); err != nil {
			t.Fatal(err)
		}
		wantTruncated := func(what string, err error) {
			t.Helper()
			te, ok := errors.AsType[*tern.TruncatedError](err)
			if !ok || !errors.Is(err, tern.ErrTruncated) || te.Start != 5 {
				t.Errorf("%s: %v, want a *TruncatedError with Start 5", what, err)
			}
		}
		_, err = l.OpenReader(ctx, 2)
		wantTruncated("OpenReader(2) after Truncate(5)", err)
		_, err = l.Subscribe(ctx, "behind")
		wantTruncated("Subscribe of a subscription at 0 after Truncate(5)", err)
		// The client checks the start before it reads: read anyway.
		rs, err := api.Read(ctx, &ternpb.ReadRequest{Log: "trunc", From: 2})
		if err != nil {
			t.Fatal(err)
		}
		_, err = rs.Recv()
		wantStatus(t, err, codes.OutOfRange, "TRUNCATED")
		if info := errorInfo(err); info.GetMetadata()["start"] != "5" {
			t.Errorf("Read from 2 after Truncate(5): the error says %v, want start 5", info.GetMetadata())
		}
		runCLI(t, srv.addr, "", 1, "read", "trunc", "--from", "2")
		if got := readAll(t, l, 5, 10); len(got) != 5 {
			t.Errorf("read %d entries from 5 to 10", len(got))
		}
	})

	t.Run("malformed requests", func(t *testing.T) {
		ctx := deadline(t)
		var out []byte
		err := conn.Invoke(ctx, "/tern.v1.Tern/Append", &garbage, &out, grpc.ForceCodec(rawCodec{}))
		wantRefused(t, "Append of bytes that are not protobuf", err)
		for _, method := range []string{"/tern.v1.Tern/AppendStream", "/tern.v1.Tern/Subscribe"} {
			desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
			s, err := conn.NewStream(ctx, desc, method, grpc.ForceCodec(rawCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			err = s.SendMsg(&garbage)
			if err == nil {
				err = s.RecvMsg(&out)
			}
			if err == io.EOF { // the server ended the stream: RecvMsg says how
				err = s.RecvMsg(&out)
			}
			wantRefused(t, method+" of bytes that are not protobuf", err)
		}
		err = conn.Invoke(ctx, "/tern.v1.Tern/NoSuchMethod", &garbage, &out, grpc.ForceCodec(rawCodec{}))
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("an unknown method: %v, want Unimplemented", err)
		}

		// Well-formed messages that make no sense.
		ow, err := api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "small"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = api.Append(ctx, &ternpb.AppendRequest{Log: "small", Epoch: ow.GetEpoch()})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
		_, err = api.Append(ctx, &ternpb.AppendRequest{Log: "small", Epoch: 1 << 60, Entries: []*ternpb.Entry{{Payload: []byte("x")}}})
		wantStatus(t, err, codes.FailedPrecondition, "FENCED")
		rs, err := api.Read(ctx, &ternpb.ReadRequest{Log: "small", MaxBatch: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		_, err = rs.Recv()
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
		ss, err := api.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ss.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Ack_{Ack: &ternpb.SubscribeRequest_Ack{Offset: 3}}}); err != nil {
			t.Fatal(err)
		}
		_, err = ss.Recv()
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})

	// The server is still up, and works.
	if !srv.running() {
		t.Fatal("the server exited")
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + srv.httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s, want 200", path, resp.Status)
		}
	}
	ctx := deadline(t)
	l, err := c.OpenLog(ctx, "small")
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	off, err := w.Append(ctx, tern.Entry{Payload: []byte("still works")})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l, off, off+1); string(got[0].Payload) != "still works" {
		t.Errorf("read %q at %d, want the entry just appended", got[0].Payload, off)
	}
}

// rawCodec sends and receives bytes as they are, to send what is not a
// valid message. Its name makes the server decode them as protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *v.(*[]byte) = bytes.Clone(data); return nil }
func (rawCodec) Name() string                       { return "proto" }

// garbage is not a protobuf message: a field of wire type 7, which does not
// exist.
var garbage = []byte{0x0f, 0xff, 0xff, 0xff, 0xff}

// wantRefused requires err to be the server's refusal of a message it could
// not decode: INVALID_ARGUMENT, not INTERNAL (which is for bugs) nor an error
// that says the server is gone.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	st, ok := status.FromError(err)
	switch {
	case err == nil:
		t.Errorf("%s: no error", what)
	case !ok:
		t.Errorf("%s: %v, want a gRPC status", what, err)
	case st.Code() != codes.InvalidArgument:
		t.Errorf("%s: %v, want InvalidArgument", what, err)
	}
}

// wantStatus requires err to be a status with code and the ErrorInfo reason
// of tern.proto.
func wantStatus(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	if got := status.Code(err); got != code || errorInfo(err).GetReason() != reason {
		t.Errorf("error %v (code %v, reason %q), want code %v, reason %q", err, got, errorInfo(err).GetReason(), code, reason)
	}
}

// errorInfo is the Tern ErrorInfo of a status error, or nil.
func errorInfo(err error) *errdetails.ErrorInfo {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "tern.dev" {
			return info
		}
	}
	return nil
}

// runCLI runs `tern --server addr args...` with stdin, requires exit code
// code, and returns its output.
func runCLI(t *testing.T, addr, stdin string, code int, args ...string) (stdout, stderr string) {
	t.Helper()
	return ternIO(t, stdin, code, append([]string{"--server", addr}, args...)...)
}
