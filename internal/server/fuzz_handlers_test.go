package server

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ternwal/tern/client/ternpb"
)

// The fixture every input of FuzzHandlers finds: a log with a writer at
// fuzzEpoch, a few entries, and a subscription at offset 0.
const (
	fuzzLog   = "fuzz"
	fuzzSub   = "sub"
	fuzzEpoch = 1 // the first writer's, on a new log
	// fuzzMaxBytes is how much the fixture's log may grow before it is
	// created again.
	fuzzMaxBytes = 1 << 20
	// fuzzCallTimeout bounds one call: every call answers at once, except
	// the streams that wait at the tail, which the target does not wait for.
	fuzzCallTimeout = 10 * time.Second
)

// fuzzServer is a Server on a real gRPC server on 127.0.0.1 and a client of
// it, for a whole fuzzing run: started once, on the fuzz target (each input
// is a test of its own, whose cleanup would end it).
type fuzzServer struct {
	api  ternpb.TernClient
	logs map[string]*ternpb.LogInfo // as the last ListLogs gave them
}

func startFuzz(f *testing.F) *fuzzServer {
	f.Helper()
	fs := &fuzzServer{api: start(f).api}
	if err := fs.reset(); err != nil {
		f.Fatal(err)
	}
	return fs
}

// createFixture creates the fixture's log, with its writer, entries and
// subscription.
func (fs *fuzzServer) createFixture(ctx context.Context) error {
	_, err := fs.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: fuzzLog, Options: &ternpb.LogOptions{Fsync: "never", SegmentBytes: 64 << 10}})
	if err != nil {
		return err
	}
	w, err := fs.api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: fuzzLog})
	if err != nil {
		return err
	}
	if w.Epoch != fuzzEpoch {
		return errors.New("the fixture's writer has another epoch than fuzzEpoch")
	}
	for _, p := range []string{"a", "bb", "ccc"} {
		e := &ternpb.Entry{Payload: []byte(p), Properties: map[string][]byte{"k": []byte(p)}}
		if _, err := fs.api.Append(ctx, &ternpb.AppendRequest{Log: fuzzLog, Epoch: fuzzEpoch, Entries: []*ternpb.Entry{e}}); err != nil {
			return err
		}
	}
	return fs.resetSubs(ctx)
}

// resetSubs leaves the fixture's log with its subscription alone, at 0.
func (fs *fuzzServer) resetSubs(ctx context.Context) error {
	list, err := fs.api.ListSubscriptions(ctx, &ternpb.ListSubscriptionsRequest{Log: fuzzLog})
	if err != nil {
		return err
	}
	for _, s := range list.Subscriptions {
		if _, err := fs.api.DeleteSubscription(ctx, &ternpb.DeleteSubscriptionRequest{Log: fuzzLog, Name: s.Name}); err != nil {
			return err
		}
	}
	_, err = fs.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: fuzzLog, Name: fuzzSub})
	return err
}

// reset checks that the server answers a valid call (ListLogs), and puts
// the fixture back as an input may have left it: the logs it created
// deleted, the fixture's log created again if it was deleted, fenced,
// truncated or grew too large.
func (fs *fuzzServer) reset() error {
	ctx, cancel := context.WithTimeout(context.Background(), fuzzCallTimeout)
	defer cancel()
	list, err := fs.api.ListLogs(ctx, &ternpb.ListLogsRequest{})
	if err != nil {
		return err
	}
	fixture := false
	for _, info := range list.Logs {
		if info.Name == fuzzLog && info.Epoch == fuzzEpoch && info.Start == 0 && info.Bytes <= fuzzMaxBytes {
			fixture = true
			continue
		}
		if _, err := fs.api.DeleteLog(ctx, &ternpb.DeleteLogRequest{Name: info.Name}); err != nil {
			return err
		}
	}
	if !fixture {
		if err := fs.createFixture(ctx); err != nil {
			return err
		}
		if list, err = fs.api.ListLogs(ctx, &ternpb.ListLogsRequest{}); err != nil {
			return err
		}
	}
	fs.logs = map[string]*ternpb.LogInfo{}
	for _, info := range list.Logs {
		fs.logs[info.Name] = info
	}
	return nil
}

// end returns the end of the named log as of the last reset.
func (fs *fuzzServer) end(name string) uint64 {
	if info, ok := fs.logs[name]; ok {
		return info.End
	}
	return 0
}

// fuzzMethod is a method of the Tern service: the request type the input
// decodes as, and the call. A stream's call sends the request as its first
// message and reads one response, or for AppendStream those that answer it.
type fuzzMethod struct {
	name string
	req  func() proto.Message
	call func(ctx context.Context, fs *fuzzServer, req proto.Message) error
}

func unary[Req proto.Message, Resp any](name string, call func(ternpb.TernClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) fuzzMethod {
	return fuzzMethod{
		name: name,
		req:  func() proto.Message { var r Req; return r.ProtoReflect().New().Interface() },
		call: func(ctx context.Context, fs *fuzzServer, req proto.Message) error {
			_, err := call(fs.api, ctx, req.(Req))
			return err
		},
	}
}

var fuzzMethods = []fuzzMethod{
	unary("CreateLog", ternpb.TernClient.CreateLog),
	unary("DescribeLog", ternpb.TernClient.DescribeLog),
	unary("ListLogs", ternpb.TernClient.ListLogs),
	unary("DeleteLog", ternpb.TernClient.DeleteLog),
	unary("TruncateLog", ternpb.TernClient.TruncateLog),
	unary("OpenWriter", ternpb.TernClient.OpenWriter),
	unary("Append", ternpb.TernClient.Append),
	unary("AppendTimeTick", ternpb.TernClient.AppendTimeTick),
	unary("CreateSubscription", ternpb.TernClient.CreateSubscription),
	unary("DescribeSubscription", ternpb.TernClient.DescribeSubscription),
	unary("ListSubscriptions", ternpb.TernClient.ListSubscriptions),
	unary("DeleteSubscription", ternpb.TernClient.DeleteSubscription),
	unary("Seek", ternpb.TernClient.Seek),
	{
		name: "AppendStream",
		req:  func() proto.Message { return new(ternpb.AppendStreamRequest) },
		call: func(ctx context.Context, fs *fuzzServer, req proto.Message) error {
			stream, err := fs.api.AppendStream(ctx)
			if err != nil {
				return err
			}
			if err := stream.Send(req.(*ternpb.AppendStreamRequest)); err != nil && err != io.EOF {
				return err
			}
			if err := stream.CloseSend(); err != nil {
				return err
			}
			// Every batch has its result, possibly over several responses
			// (a request without batches fails as one), and a failed one a
			// code a client can act on.
			want := max(len(req.(*ternpb.AppendStreamRequest).Batches), 1)
			for got := 0; got < want; {
				resp, err := stream.Recv()
				if err == io.EOF {
					return status.Errorf(codes.Internal, "fuzz: %d results for %d batches", got, want)
				}
				if err != nil {
					return err
				}
				for _, r := range resp.Results {
					if e := r.GetError(); e != nil {
						if err := checkCode(codes.Code(e.Code), e.Message); err != nil {
							return err
						}
					}
				}
				got += len(resp.Results)
			}
			return nil
		},
	},
	{
		name: "Read",
		req:  func() proto.Message { return new(ternpb.ReadRequest) },
		call: func(ctx context.Context, fs *fuzzServer, req proto.Message) error {
			r := req.(*ternpb.ReadRequest)
			stream, err := fs.api.Read(ctx, r)
			if err != nil {
				return err
			}
			// A reader that follows from the end waits there: once the
			// server has sent the headers (the reader is open), stop.
			// from_end (and from_start, on a log whose start is its end)
			// starts there whatever From says.
			info := fs.logs[r.Log]
			waits := r.Follow && (r.FromEnd || r.FromStart && info.GetStart() >= info.GetEnd() || !r.FromStart && r.From >= fs.end(r.Log))
			return firstResponse(stream, waits)
		},
	},
	{
		name: "Subscribe",
		req:  func() proto.Message { return new(ternpb.SubscribeRequest) },
		call: func(ctx context.Context, fs *fuzzServer, req proto.Message) error {
			start := req.(*ternpb.SubscribeRequest).GetStart()
			waits := false
			if start != nil {
				info, err := fs.api.DescribeSubscription(ctx, &ternpb.DescribeSubscriptionRequest{Log: start.Log, Name: start.Name})
				waits = err == nil && info.Cursor >= fs.end(start.Log)
			}
			stream, err := fs.api.Subscribe(ctx)
			if err != nil {
				return err
			}
			if err := stream.Send(req.(*ternpb.SubscribeRequest)); err != nil && err != io.EOF {
				return err
			}
			return firstResponse(stream, waits)
		},
	},
}

// firstResponse waits for a stream's headers, and for its first response
// unless waits says the server is waiting at the tail once it has sent the
// headers. The end of the stream (io.EOF) is no error.
func firstResponse(stream grpc.ClientStream, waits bool) error {
	md, err := stream.Header()
	if err != nil {
		return err
	}
	if md != nil && waits {
		return nil
	}
	err = stream.RecvMsg(new(ternpb.ReadResponse))
	if err == io.EOF {
		return nil
	}
	return err
}

// checkCode fails for the codes a malformed request must not get: Unknown
// (an error no one mapped), Internal (a panic, or an error the server does
// not know) and DataLoss (nothing here is damaged).
func checkCode(code codes.Code, msg string) error {
	switch code {
	case codes.Unknown, codes.Internal, codes.DataLoss:
		return status.Errorf(code, "fuzz: a request got %v: %s", code, msg)
	}
	return nil
}

// FuzzHandlers calls a method of the Tern service, chosen by method, with
// body decoded as its request (inputs that do not decode are skipped),
// through a real gRPC connection to a server started once per fuzzing
// process, whose state reset keeps close to a fixture between inputs. For
// AppendStream and Subscribe the request is the stream's first message.
// The server must not panic; each error must be a status with a code that
// says what was wrong with the request, never Unknown, Internal or
// DataLoss; a call must not hang; and the server must then still answer
// ListLogs.
func FuzzHandlers(f *testing.F) {
	fs := startFuzz(f)
	entries := []*ternpb.Entry{{Payload: []byte("x"), Properties: map[string][]byte{"p": []byte("v")}, TimeUnixNano: 1}}
	seeds := map[string][]proto.Message{
		"CreateLog": {
			&ternpb.CreateLogRequest{Name: "new"},
			&ternpb.CreateLogRequest{Name: "t/a-1", Options: &ternpb.LogOptions{Fsync: "interval:5ms", SegmentBytes: 1 << 20, SegmentAge: durationpb.New(time.Minute), MaxEntryBytes: 100}},
			&ternpb.CreateLogRequest{Name: "o", Options: &ternpb.LogOptions{Mode: "object"}},
			&ternpb.CreateLogRequest{Name: "q", Options: &ternpb.LogOptions{Mode: "quorum", Ensemble: 3, AckQuorum: 2}},
			&ternpb.CreateLogRequest{Name: "../x", Options: &ternpb.LogOptions{RetentionAge: &durationpb.Duration{Seconds: -1}}},
		},
		"DescribeLog":          {&ternpb.DescribeLogRequest{Name: fuzzLog}, &ternpb.DescribeLogRequest{}},
		"ListLogs":             {&ternpb.ListLogsRequest{Prefix: "f"}},
		"DeleteLog":            {&ternpb.DeleteLogRequest{Name: fuzzLog}, &ternpb.DeleteLogRequest{Name: "nope"}},
		"TruncateLog":          {&ternpb.TruncateLogRequest{Name: fuzzLog, Before: 2}, &ternpb.TruncateLogRequest{Name: fuzzLog, Before: 1 << 60}},
		"OpenWriter":           {&ternpb.OpenWriterRequest{Log: fuzzLog}},
		"Append":               {&ternpb.AppendRequest{Log: fuzzLog, Epoch: fuzzEpoch, Entries: entries}, &ternpb.AppendRequest{Log: fuzzLog, Epoch: 7, Entries: entries}, &ternpb.AppendRequest{Log: fuzzLog, Epoch: fuzzEpoch}},
		"AppendTimeTick":       {&ternpb.AppendTimeTickRequest{Log: fuzzLog, Epoch: fuzzEpoch, Time: 5}},
		"CreateSubscription":   {&ternpb.CreateSubscriptionRequest{Log: fuzzLog, Name: "s2", From: 1, Pin: true}, &ternpb.CreateSubscriptionRequest{Log: fuzzLog, Name: "s3", FromEnd: true}},
		"DescribeSubscription": {&ternpb.DescribeSubscriptionRequest{Log: fuzzLog, Name: fuzzSub}},
		"ListSubscriptions":    {&ternpb.ListSubscriptionsRequest{Log: fuzzLog}},
		"DeleteSubscription":   {&ternpb.DeleteSubscriptionRequest{Log: fuzzLog, Name: fuzzSub}},
		"Seek":                 {&ternpb.SeekRequest{Log: fuzzLog, Name: fuzzSub, To: 2}, &ternpb.SeekRequest{Log: fuzzLog, Name: fuzzSub, To: 1 << 40}},
		"AppendStream": {
			&ternpb.AppendStreamRequest{Log: fuzzLog, Epoch: fuzzEpoch, Batches: []*ternpb.Batch{{Entries: entries}, {}, {Entries: entries}}},
			&ternpb.AppendStreamRequest{Log: fuzzLog, Epoch: 2, Batches: []*ternpb.Batch{{Entries: entries}}},
			&ternpb.AppendStreamRequest{Log: fuzzLog},
		},
		"Read": {
			&ternpb.ReadRequest{Log: fuzzLog},
			&ternpb.ReadRequest{Log: fuzzLog, From: 1, MaxBatch: 1},
			&ternpb.ReadRequest{Log: fuzzLog, From: 1, Follow: true, Ticks: true},
			&ternpb.ReadRequest{Log: fuzzLog, From: 3, Follow: true},
			&ternpb.ReadRequest{Log: fuzzLog, From: 8, Follow: true, FromEnd: true},
			&ternpb.ReadRequest{Log: fuzzLog, Follow: true, FromStart: true},
			&ternpb.ReadRequest{Log: fuzzLog, From: 9, MaxBatch: 1 << 20},
		},
		"Subscribe": {
			&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Start_{Start: &ternpb.SubscribeRequest_Start{Log: fuzzLog, Name: fuzzSub, Ticks: true}}},
			&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Ack_{Ack: &ternpb.SubscribeRequest_Ack{Offset: 1}}},
		},
	}
	for i, m := range fuzzMethods {
		if len(seeds[m.name]) == 0 {
			f.Fatalf("no seed for %s", m.name)
		}
		for _, req := range seeds[m.name] {
			b, err := proto.Marshal(req)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), b)
		}
	}
	f.Fuzz(func(t *testing.T, method uint8, body []byte) {
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		req := m.req()
		if proto.Unmarshal(body, req) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), fuzzCallTimeout)
		err := m.call(ctx, fs, req)
		cancel()
		if err != nil {
			st, ok := status.FromError(err)
			if !ok {
				t.Fatalf("%s(%v): %v, not a status", m.name, req, err)
			}
			if st.Code() == codes.DeadlineExceeded {
				t.Fatalf("%s(%v) did not answer within %v", m.name, req, fuzzCallTimeout)
			}
			if err := checkCode(st.Code(), st.Message()); err != nil {
				t.Fatalf("%s(%v): %v", m.name, req, err)
			}
		}
		if err := fs.reset(); err != nil {
			t.Fatalf("after %s(%v): %v", m.name, req, err)
		}
		if err == nil && (m.name == "CreateSubscription" || m.name == "DeleteSubscription" || m.name == "Seek") {
			if err := fs.resetSubs(context.Background()); err != nil {
				t.Fatalf("after %s(%v): %v", m.name, req, err)
			}
		}
	})
}
