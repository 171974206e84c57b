package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/ternpb"
)

// startLimited is start with the limits set, on the client and the gRPC
// server as Start sets them.
func startLimited(t *testing.T, lim Limits) *testServer {
	t.Helper()
	c, err := tern.Open(t.Context(), tern.Options{Dir: t.TempDir(),
		MaxLogs: lim.MaxLogs, MaxLogsPerPrefix: lim.MaxLogsPerPrefix, MaxSubscriptionsPerLog: lim.MaxSubscriptionsPerLog})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv := New(c, Options{Registerer: reg})
	g := grpc.NewServer(append(grpcopts.Server(), lim.serverOptions()...)...)
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(),
		append(grpcopts.Dial(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Close()
		g.Stop()
		c.Close()
	})
	return &testServer{srv: srv, api: ternpb.NewTernClient(conn), conn: conn, reg: reg}
}

func TestLimitsOverTheWire(t *testing.T) {
	ts := startLimited(t, Limits{MaxLogs: 3, MaxLogsPerPrefix: 1, MaxSubscriptionsPerLog: 1})
	ctx := t.Context()
	create := func(name string) error {
		_, err := ts.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: name})
		return err
	}
	if err := create("a/1"); err != nil {
		t.Fatal(err)
	}
	wantLimit := func(what string, err error, setting string) {
		t.Helper()
		wantStatus(t, err, codes.ResourceExhausted, "LIMIT")
		if !strings.Contains(status.Convert(err).Message(), setting) {
			t.Errorf("%s: %q does not name %s", what, status.Convert(err).Message(), setting)
		}
	}
	wantLimit("a second log under a/", create("a/2"), "--max-logs-per-prefix")
	for _, name := range []string{"b/1", "c"} {
		if err := create(name); err != nil {
			t.Fatal(err)
		}
	}
	wantLimit("a fourth log", create("d"), "--max-logs")
	_, err := ts.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "c", Name: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ts.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "c", Name: "s2"})
	wantLimit("a second subscription", err, "--max-subscriptions-per-log")
}

// A stream over the limit of one connection fails with RESOURCE_EXHAUSTED;
// the others, and unary calls, go on.
func TestStreamsPerConnection(t *testing.T) {
	ts := startLimited(t, Limits{MaxStreamsPerConnection: 3})
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// A follower that has read the entry is open, and counted.
	follow := func() error {
		stream, err := ts.api.Read(ctx, &ternpb.ReadRequest{Log: "l", Follow: true})
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	for i := range 3 {
		if err := follow(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	err := follow()
	wantStatus(t, err, codes.ResourceExhausted, "LIMIT")
	if !strings.Contains(status.Convert(err).Message(), "--max-streams-per-connection") {
		t.Errorf("%q does not name --max-streams-per-connection", status.Convert(err).Message())
	}
	if _, err := ts.api.DescribeLog(t.Context(), &ternpb.DescribeLogRequest{Name: "l"}); err != nil {
		t.Fatalf("a unary call at the stream limit: %v", err)
	}
}

// The server's streams are bounded all connections together: a client
// that opens many connections cannot make the server hold more streams
// (each of which may hold a few MiB while its client does not read). One
// that ends makes room.
func TestMaxStreams(t *testing.T) {
	ts := startWith(t, Options{MaxStreams: 2})
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 1)
	// Each follower on a connection of its own.
	follow := func(ctx context.Context) error {
		conn, err := grpc.NewClient(ts.conn.Target(), append(grpcopts.Dial(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		stream, err := ternpb.NewTernClient(conn).Read(ctx, &ternpb.ReadRequest{Log: "l", Follow: true})
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	first, cancelFirst := context.WithCancel(t.Context())
	defer cancelFirst()
	if err := follow(first); err != nil {
		t.Fatal(err)
	}
	if err := follow(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := follow(t.Context())
	wantStatus(t, err, codes.ResourceExhausted, "LIMIT")
	if !strings.Contains(status.Convert(err).Message(), "--max-streams") {
		t.Errorf("%q does not name --max-streams", status.Convert(err).Message())
	}
	cancelFirst()
	for {
		err := follow(t.Context())
		if err == nil {
			break
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("a stream once another ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the ended stream's handler returns
	}
}

func TestListLogsPages(t *testing.T) {
	ts := start(t)
	var want []string
	for i := range 12 {
		name := fmt.Sprintf("n/%02d", i)
		if _, err := ts.api.CreateLog(t.Context(), &ternpb.CreateLogRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	var got []string
	token := ""
	for pages := 1; ; pages++ {
		resp, err := ts.api.ListLogs(t.Context(), &ternpb.ListLogsRequest{Prefix: "n/", PageSize: 5, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Logs) > 5 || pages > 4 {
			t.Fatalf("page %d has %d logs", pages, len(resp.Logs))
		}
		for _, l := range resp.Logs {
			got = append(got, l.Name)
		}
		if resp.NextPageToken == "" {
			break
		}
		token = resp.NextPageToken
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages = %q, want %q", got, want)
	}
	resp, err := ts.api.ListLogs(t.Context(), &ternpb.ListLogsRequest{})
	if err != nil || len(resp.Logs) != 12 || resp.NextPageToken != "" {
		t.Fatalf("one default page: %d logs, token %q, %v", len(resp.GetLogs()), resp.GetNextPageToken(), err)
	}
	_, err = ts.api.ListLogs(t.Context(), &ternpb.ListLogsRequest{PageSize: -1})
	wantStatus(t, err, codes.InvalidArgument, "")
}

// A request over MaxRequestBytes is refused with RESOURCE_EXHAUSTED; one
// under it goes through.
func TestMaxRequestBytes(t *testing.T) {
	ts := startLimited(t, Limits{MaxRequestBytes: 1 << 20})
	epoch := ts.createLog(t, "l", nil)
	_, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: make([]byte, 2<<20)}}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 2 MiB request to a server that takes 1 MiB: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: make([]byte, 512<<10)}}}); err != nil {
		t.Fatalf("a 512 KiB request: %v", err)
	}
}

// A connection with no call for IdleConnectionTimeout is closed by the
// server; the client's next call connects again.
func TestIdleConnectionTimeout(t *testing.T) {
	ts := startLimited(t, Limits{IdleConnectionTimeout: 50 * time.Millisecond})
	ts.createLog(t, "l", nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for s := ts.conn.GetState(); s == connectivity.Ready; s = ts.conn.GetState() {
		if !ts.conn.WaitForStateChange(ctx, s) {
			t.Fatal("the idle connection is still open after a minute")
		}
	}
	if _, err := ts.api.DescribeLog(t.Context(), &ternpb.DescribeLogRequest{Name: "l"}); err != nil {
		t.Fatalf("a call after the idle close: %v", err)
	}
}
