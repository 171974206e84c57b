package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// testServer is a Server on a real gRPC server on 127.0.0.1, and a client
// of it.
type testServer struct {
	srv  *Server
	api  ternpb.TernClient
	conn *grpc.ClientConn
	reg  *prometheus.Registry
}

func start(t testing.TB) *testServer { t.Helper(); return startWith(t, Options{}) }

// startWith is start with the Server's options; their Registerer is the
// testServer's.
func startWith(t testing.TB, opts Options) *testServer {
	t.Helper()
	c, err := tern.Open(t.Context(), tern.Options{Dir: t.TempDir(), CommitInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	srv := New(c, opts)
	g := grpc.NewServer(grpcopts.Server()...)
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(),
		append(grpcopts.Dial(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("Server.Close: %v", err)
		}
		g.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Client.Close: %v", err)
		}
	})
	return &testServer{srv: srv, api: ternpb.NewTernClient(conn), conn: conn, reg: reg}
}

// createLog creates a log and opens a writer on it.
func (ts *testServer) createLog(t *testing.T, name string, opts *ternpb.LogOptions) (epoch uint64) {
	t.Helper()
	if _, err := ts.api.CreateLog(t.Context(), &ternpb.CreateLogRequest{Name: name, Options: opts}); err != nil {
		t.Fatal(err)
	}
	w, err := ts.api.OpenWriter(t.Context(), &ternpb.OpenWriterRequest{Log: name})
	if err != nil {
		t.Fatal(err)
	}
	return w.Epoch
}

// appendN appends n single-entry batches "<prefix>-<i>" and checks the
// offsets are dense.
func (ts *testServer) appendN(t *testing.T, log string, epoch uint64, n int) {
	t.Helper()
	info, err := ts.api.DescribeLog(t.Context(), &ternpb.DescribeLogRequest{Name: log})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		off := info.End + uint64(i)
		resp, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: log, Epoch: epoch, Entries: []*ternpb.Entry{{Payload: payload(off)}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Offset != off {
			t.Fatalf("append got offset %d, want %d", resp.Offset, off)
		}
	}
}

func payload(off uint64) []byte { return fmt.Appendf(nil, "entry-%d", off) }

// wantStatus checks err is a status with the code and, unless reason is
// empty, an ErrorInfo of that reason. It returns the ErrorInfo's metadata.
func wantStatus(t *testing.T, err error, code codes.Code, reason string) map[string]string {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || err == nil {
		t.Fatalf("got error %v, want a status %v", err, code)
	}
	if st.Code() != code {
		t.Fatalf("got %v (%q), want code %v", st.Code(), st.Message(), code)
	}
	if reason == "" {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.Reason != reason || info.Domain != rpcerr.Domain {
				t.Fatalf("got ErrorInfo %s/%s (%q), want %s/%s", info.Domain, info.Reason, st.Message(), rpcerr.Domain, reason)
			}
			return info.Metadata
		}
	}
	t.Fatalf("status %v %q has no ErrorInfo, want reason %s", st.Code(), st.Message(), reason)
	return nil
}

func TestLogsRoundTrip(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	opts := &ternpb.LogOptions{
		Fsync:            "interval:10ms",
		SegmentBytes:     1 << 20,
		SegmentAge:       durationpb.New(2 * time.Minute),
		RetentionAge:     durationpb.New(time.Hour),
		RetentionBytes:   1 << 30,
		RetentionEntries: 1000,
		MaxEntryBytes:    4096,
	}
	created, err := ts.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: "tenant/db/ch-1", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: "tenant/db/ch-2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	_, err = ts.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: "other"})
	wantStatus(t, err, codes.AlreadyExists, "LOG_EXISTS")

	got, err := ts.api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: "tenant/db/ch-1"})
	if err != nil {
		t.Fatal(err)
	}
	o := got.Options
	if o.Fsync != opts.Fsync || o.SegmentBytes != opts.SegmentBytes || o.SegmentAge.AsDuration() != 2*time.Minute ||
		o.RetentionAge.AsDuration() != time.Hour || o.RetentionBytes != opts.RetentionBytes ||
		o.RetentionEntries != opts.RetentionEntries || o.MaxEntryBytes != opts.MaxEntryBytes {
		t.Errorf("options did not survive: got %v, want %v", o, opts)
	}
	if got.Name != "tenant/db/ch-1" || got.Id != created.Id || got.CreatedUnixNano != created.CreatedUnixNano || got.CreatedUnixNano == 0 {
		t.Errorf("described %v, created %v", got, created)
	}
	def, err := ts.api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if def.Options.Fsync != "always" || def.Options.MaxEntryBytes != tern.DefaultMaxEntryBytes || def.Options.RetentionAge != nil {
		t.Errorf("default options: %v", def.Options)
	}

	list, err := ts.api.ListLogs(ctx, &ternpb.ListLogsRequest{Prefix: "tenant/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Logs) != 2 || list.Logs[0].Name != "tenant/db/ch-1" || list.Logs[1].Name != "tenant/db/ch-2" {
		t.Errorf("ListLogs(tenant/) = %v", list.Logs)
	}

	w, err := ts.api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "tenant/db/ch-1"})
	if err != nil {
		t.Fatal(err)
	}
	ts.appendN(t, "tenant/db/ch-1", w.Epoch, 10)
	if _, err := ts.api.TruncateLog(ctx, &ternpb.TruncateLogRequest{Name: "tenant/db/ch-1", Before: 4}); err != nil {
		t.Fatal(err)
	}
	got, err = ts.api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: "tenant/db/ch-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Start != 4 || got.End != 10 || got.Epoch != w.Epoch || got.Segments < 1 || got.Bytes <= 0 {
		t.Errorf("after truncation: %v", got)
	}
	_, err = ts.api.TruncateLog(ctx, &ternpb.TruncateLogRequest{Name: "tenant/db/ch-1", Before: 11})
	wantStatus(t, err, codes.OutOfRange, "OUT_OF_RANGE")

	if _, err := ts.api.DeleteLog(ctx, &ternpb.DeleteLogRequest{Name: "tenant/db/ch-1"}); err != nil {
		t.Fatal(err)
	}
	_, err = ts.api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: "tenant/db/ch-1"})
	wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
	_, err = ts.api.Append(ctx, &ternpb.AppendRequest{Log: "tenant/db/ch-1", Epoch: w.Epoch, Entries: []*ternpb.Entry{{Payload: []byte("x")}}})
	wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
	list, err = ts.api.ListLogs(ctx, &ternpb.ListLogsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Logs) != 2 {
		t.Errorf("ListLogs after delete = %v", list.Logs)
	}
}

func TestAppend(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 3)
	at := time.Unix(1700000000, 123)
	resp, err := ts.api.Append(ctx, &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{
		{Payload: payload(3), TimeUnixNano: at.UnixNano(), Properties: map[string][]byte{"k": []byte("v")}},
		{Payload: payload(4)},
		{Payload: payload(5)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Offset != 3 {
		t.Fatalf("batch at offset %d, want 3", resp.Offset)
	}
	ts.appendN(t, "l", epoch, 1)

	es := ts.readAll(t, "l", 0)
	if len(es) != 7 {
		t.Fatalf("read %d entries, want 7", len(es))
	}
	if es[3].TimeUnixNano != at.UnixNano() || string(es[3].Properties["k"]) != "v" {
		t.Errorf("entry 3: time %d properties %v, want %d and k=v", es[3].TimeUnixNano, es[3].Properties, at.UnixNano())
	}
	if d := time.Since(time.Unix(0, es[4].TimeUnixNano)); d < 0 || d > time.Minute {
		t.Errorf("entry 4 appended with time 0 has time %v, want the server's clock", time.Unix(0, es[4].TimeUnixNano))
	}
}

func TestAppendStreamPipelined(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", nil)
	stream, err := ts.api.AppendStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		req := streamReq("l", epoch, []*ternpb.Entry{{Payload: payload(uint64(i))}})
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i, r := range recvResults(t, stream, n) {
		if r.Error != nil || r.Offset != uint64(i) {
			t.Fatalf("result %d: %v, want offset %d", i, r, i)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after the last response: %v, want io.EOF", err)
	}
	if es := ts.readAll(t, "l", 0); len(es) != n {
		t.Fatalf("read %d entries, want %d", len(es), n)
	}
	if got := counter(t, ts.reg, "tern_append_entries_total"); got != n {
		t.Errorf("tern_append_entries_total = %v, want %d", got, n)
	}
}

func TestAppendStreamFailedBatch(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", &ternpb.LogOptions{MaxEntryBytes: 16})
	stream, err := ts.api.AppendStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	small := func(n int) []*ternpb.Entry {
		es := make([]*ternpb.Entry, n)
		for i := range es {
			es[i] = &ternpb.Entry{Payload: []byte("small")}
		}
		return es
	}
	type want struct {
		offset uint64
		code   codes.Code
		reason string
	}
	tooLarge := want{code: codes.InvalidArgument, reason: "TOO_LARGE"}
	reqs := []struct {
		req  *ternpb.AppendStreamRequest
		want []want
	}{
		{streamReq("l", epoch, small(1)), []want{{offset: 0}}},
		{streamReq("l", epoch, []*ternpb.Entry{{Payload: make([]byte, 17)}}), []want{tooLarge}},
		{streamReq("l", epoch, small(3)), []want{{offset: 1}}},
		{streamReq("l", epoch, append(small(2), &ternpb.Entry{Payload: make([]byte, 17)})), []want{tooLarge}},
		{streamReq("l", epoch, nil), []want{{code: codes.InvalidArgument, reason: "INVALID_ARGUMENT"}}},
		{streamReq("l", epoch+1, small(1)), []want{{code: codes.FailedPrecondition, reason: "FENCED"}}},
		{streamReq("nope", epoch, small(1)), []want{{code: codes.NotFound, reason: "LOG_NOT_FOUND"}}},
		{streamReq("l", epoch, small(1)), []want{{offset: 4}}},
		// Several batches in one request: each succeeds or fails alone.
		{streamReq("l", epoch, small(2), []*ternpb.Entry{{Payload: make([]byte, 17)}}, small(1)), []want{{offset: 5}, tooLarge, {offset: 7}}},
		{&ternpb.AppendStreamRequest{Log: "l", Epoch: epoch}, []want{{code: codes.InvalidArgument, reason: "INVALID_ARGUMENT"}}},
	}
	for _, r := range reqs {
		if err := stream.Send(r.req); err != nil {
			t.Fatal(err)
		}
	}
	stream.CloseSend()
	var wants []want
	for _, r := range reqs {
		wants = append(wants, r.want...)
	}
	for i, got := range recvResults(t, stream, len(wants)) {
		switch w := wants[i]; {
		case w.code == codes.OK && (got.Error != nil || got.Offset != w.offset):
			t.Errorf("result %d: offset %d error %v, want offset %d", i, got.Offset, got.Error, w.offset)
		case w.code != codes.OK && (got.Error == nil || codes.Code(got.Error.Code) != w.code || got.Error.Reason != w.reason || got.Offset != 0):
			t.Errorf("result %d: offset %d error %v, want %v %s", i, got.Offset, got.Error, w.code, w.reason)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after the last response: %v, want io.EOF", err)
	}
}

func TestFencing(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	old := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", old, 1)
	stream, err := ts.api.AppendStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	streamAppend := func() *ternpb.AppendResult {
		t.Helper()
		if err := stream.Send(streamReq("l", old, []*ternpb.Entry{{Payload: []byte("x")}})); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Results) != 1 {
			t.Fatalf("%d results for one batch", len(resp.Results))
		}
		return resp.Results[0]
	}
	if resp := streamAppend(); resp.Error != nil || resp.Offset != 1 {
		t.Fatalf("stream append: %v", resp)
	}
	w, err := ts.api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "l"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Epoch <= old {
		t.Fatalf("new epoch %d, old %d", w.Epoch, old)
	}
	checkFenced := func(t *testing.T, err error) {
		t.Helper()
		wantStatus(t, err, codes.FailedPrecondition, "FENCED")
		if !errors.Is(rpcerr.Error(err), tern.ErrFenced) {
			t.Errorf("rpcerr.Error(%v) does not match tern.ErrFenced", err)
		}
	}
	_, err = ts.api.Append(ctx, &ternpb.AppendRequest{Log: "l", Epoch: old, Entries: []*ternpb.Entry{{Payload: []byte("x")}}})
	checkFenced(t, err)
	if resp := streamAppend(); resp.Error == nil || resp.Error.Reason != "FENCED" || codes.Code(resp.Error.Code) != codes.FailedPrecondition {
		t.Fatalf("stream append with the old epoch: %v, want FENCED", resp)
	}
	if !errors.Is(rpcerr.FromProto(streamAppend().Error), tern.ErrFenced) {
		t.Fatal("the stream's batch error does not match tern.ErrFenced")
	}
	_, err = ts.api.AppendTimeTick(ctx, &ternpb.AppendTimeTickRequest{Log: "l", Epoch: old, Time: 1})
	checkFenced(t, err)
	for _, epoch := range []uint64{0, w.Epoch + 1} {
		_, err = ts.api.Append(ctx, &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: []byte("x")}}})
		checkFenced(t, err)
	}
	ts.appendN(t, "l", w.Epoch, 2)
	if _, err := ts.api.AppendTimeTick(ctx, &ternpb.AppendTimeTickRequest{Log: "l", Epoch: w.Epoch, Time: 1}); err != nil {
		t.Fatal(err)
	}
	info, err := ts.api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: "l"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != w.Epoch || info.End != 4 {
		t.Errorf("log epoch %d end %d, want %d and 4", info.Epoch, info.End, w.Epoch)
	}
}

// counter is the value of a counter without labels in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	var sum float64
	if mf := family(t, reg, name); mf != nil {
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// family is the metric family name in reg; nil if it is not exported.
func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// requests is tern_server_requests_total{method,code}.
func requests(t *testing.T, reg *prometheus.Registry, method string, code codes.Code) float64 {
	t.Helper()
	return counterWith(t, reg, "tern_server_requests_total", map[string]string{"method": method, "code": code.String()})
}

// counterWith is the value of the counter name with the labels in reg.
func counterWith(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestMetrics(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 3)
	_, err := ts.api.DescribeLog(t.Context(), &ternpb.DescribeLogRequest{Name: "nope"})
	wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
	ts.readAll(t, "l", 0)

	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"Append OK", requests(t, ts.reg, "Append", codes.OK), 3},
		{"DescribeLog NotFound", requests(t, ts.reg, "DescribeLog", codes.NotFound), 1},
		{"Read OK", requests(t, ts.reg, "Read", codes.OK), 1},
		{"tern_append_entries_total", counter(t, ts.reg, "tern_append_entries_total"), 3},
		{"tern_append_bytes_total", counter(t, ts.reg, "tern_append_bytes_total"), float64(3 * len(payload(0)))},
		{"tern_read_entries_total", counter(t, ts.reg, "tern_read_entries_total"), 3},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}

	// A second Server on the same registerer shares the collectors.
	New(nil, Options{Registerer: ts.reg})
}

// streamReq is an AppendStream request of the given batches.
// recvResults receives the next n results of an AppendStream, which the
// server may answer in any number of responses.
func recvResults(t *testing.T, stream ternpb.Tern_AppendStreamClient, n int) []*ternpb.AppendResult {
	t.Helper()
	var rs []*ternpb.AppendResult
	for len(rs) < n {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d of %d results: %v", len(rs), n, err)
		}
		if len(resp.Results) == 0 {
			t.Fatalf("after %d of %d results: a response with none", len(rs), n)
		}
		rs = append(rs, resp.Results...)
	}
	if len(rs) > n {
		t.Fatalf("%d results, want %d", len(rs), n)
	}
	return rs
}

func streamReq(log string, epoch uint64, batches ...[]*ternpb.Entry) *ternpb.AppendStreamRequest {
	req := &ternpb.AppendStreamRequest{Log: log, Epoch: epoch}
	for _, es := range batches {
		req.Batches = append(req.Batches, &ternpb.Batch{Entries: es})
	}
	return req
}
