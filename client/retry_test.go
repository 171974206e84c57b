package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// The pauses between tries start about 10ms and double up to about 100ms,
// each drawn between half and all of its step, so that a log that moves is
// found about 100ms after its move at the latest.
func TestBackoff(t *testing.T) {
	var b backoff
	step := backoffFirst
	for i := range 40 {
		d := b.pause()
		if d < step/2 || d > step {
			t.Fatalf("pause %d is %v, want between %v and %v", i, d, step/2, step)
		}
		step = min(2*step, backoffMax)
	}
}

// Only what may pass is retried: an unreachable or departing node, and a
// log served elsewhere. An answer is final.
func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, "connection refused"), true},
		{rpcerr.StatusError(fmt.Errorf("%w: the server is shutting down", rpcerr.ErrClosed)), true},
		{rpcerr.StatusError(fmt.Errorf("%w: etcd does not answer", rpcerr.ErrUnavailable)), true},
		{rpcerr.StatusError(&rpcerr.NotOwnerError{Log: "l", Owner: "127.0.0.1:1"}), true},
		{rpcerr.StatusError(&rpcerr.NotOwnerError{Log: "l"}), true},
		{rpcerr.StatusError(fmt.Errorf("%w: subscription %q has a newer subscriber", rpcerr.ErrTakenOver, "s")), false},
		{rpcerr.StatusError(rpcerr.ErrNotFound), false},
		{rpcerr.StatusError(rpcerr.ErrSubNotFound), false},
		{rpcerr.StatusError(rpcerr.ErrFenced), false},
		{rpcerr.StatusError(&rpcerr.TruncatedError{Offset: 1, Start: 5}), false},
		{rpcerr.StatusError(rpcerr.ErrPermissionDenied), false},
		{rpcerr.StatusError(rpcerr.ErrLimit), false},
		{rpcerr.StatusError(rpcerr.ErrInvalid), false},
		{status.Error(codes.DeadlineExceeded, "deadline"), false},
		{status.Error(codes.Canceled, "canceled"), false},
		{status.Error(codes.Internal, "bug"), false},
		{io.EOF, false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	// ErrTakenOver still reads as ErrClosed.
	taken := rpcerr.Error(rpcerr.StatusError(fmt.Errorf("%w: subscription %q has a newer subscriber", rpcerr.ErrTakenOver, "s")))
	if !errors.Is(taken, ErrTakenOver) || !errors.Is(taken, ErrClosed) {
		t.Errorf("a taken-over subscriber's error %v matches neither ErrTakenOver nor ErrClosed", taken)
	}
}

// flaky is a server that fails its first calls with UNAVAILABLE, as a
// server does while it shuts down or its metadata store does not answer,
// then answers. It counts the calls of each kind.
type flaky struct {
	ternpb.UnimplementedTernServer
	mu        sync.Mutex
	fails     int // left
	created   map[string]bool
	calls     map[string]int
	lostReply bool // CreateLog and DeleteLog do the work, then fail as if the reply was lost (once)
}

func (f *flaky) fail(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[call]++
	if f.fails > 0 && call != "probe" {
		f.fails--
		return rpcerr.StatusError(fmt.Errorf("%w: the server is shutting down", rpcerr.ErrClosed))
	}
	return nil
}

func (f *flaky) DescribeLog(ctx context.Context, req *ternpb.DescribeLogRequest) (*ternpb.LogInfo, error) {
	if req.GetName() == "" {
		f.fail("probe")
		return nil, status.Error(codes.InvalidArgument, "no name")
	}
	if err := f.fail("describe"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.created[req.GetName()] {
		return nil, rpcerr.StatusError(rpcerr.ErrNotFound)
	}
	return &ternpb.LogInfo{Name: req.GetName(), Options: LogOptions{}.Proto()}, nil
}

func (f *flaky) CreateLog(ctx context.Context, req *ternpb.CreateLogRequest) (*ternpb.LogInfo, error) {
	f.mu.Lock()
	f.calls["create"]++
	exists, lost := f.created[req.GetName()], f.lostReply
	f.created[req.GetName()] = true
	f.lostReply = false
	f.mu.Unlock()
	switch {
	case lost:
		return nil, status.Error(codes.Unavailable, "the connection broke before the reply")
	case exists:
		return nil, rpcerr.StatusError(rpcerr.ErrExist)
	}
	return &ternpb.LogInfo{Name: req.GetName(), Options: req.GetOptions()}, nil
}

func (f *flaky) DeleteLog(ctx context.Context, req *ternpb.DeleteLogRequest) (*ternpb.DeleteLogResponse, error) {
	f.mu.Lock()
	f.calls["delete"]++
	exists, lost := f.created[req.GetName()], f.lostReply
	delete(f.created, req.GetName())
	f.lostReply = false
	f.mu.Unlock()
	switch {
	case lost:
		return nil, status.Error(codes.Unavailable, "the connection broke before the reply")
	case !exists:
		return nil, rpcerr.StatusError(rpcerr.ErrNotFound)
	}
	return &ternpb.DeleteLogResponse{}, nil
}

// serve starts srv on a port of its own and returns its address and a
// function that stops it.
func serve(t *testing.T, srv ternpb.TernServer, addr string) (string, func()) {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lis net.Listener
	var err error
	for range 100 { // the port of a server just stopped may linger a moment
		if lis, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	ternpb.RegisterTernServer(g, srv)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String(), g.Stop
}

func newFlaky(fails int) *flaky {
	return &flaky{fails: fails, created: map[string]bool{}, calls: map[string]int{}}
}

// A call that meets a server going away tries again until it answers.
func TestCallRetriesUnavailable(t *testing.T) {
	f := newFlaky(5)
	f.created["l"] = true
	addr, _ := serve(t, f, "")
	c, err := Open(t.Context(), Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.OpenLog(t.Context(), "l"); err != nil {
		t.Fatalf("OpenLog through 5 UNAVAILABLEs: %v", err)
	}
	if f.calls["describe"] != 6 {
		t.Fatalf("%d tries of DescribeLog, want 6", f.calls["describe"])
	}
}

// CreateLog and DeleteLog whose reply was lost are tried again, and the
// second try finding the work done is the success of the first.
func TestRetriedCreateAndDelete(t *testing.T) {
	f := newFlaky(0)
	addr, _ := serve(t, f, "")
	c, err := Open(t.Context(), Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f.lostReply = true
	if _, err := c.CreateLog(t.Context(), "l", LogOptions{}); err != nil {
		t.Fatalf("CreateLog whose first reply was lost: %v", err)
	}
	// Not retried, an existing log is ErrExist.
	if _, err := c.CreateLog(t.Context(), "l", LogOptions{}); !errors.Is(err, ErrExist) {
		t.Fatalf("CreateLog of an existing log: %v, want ErrExist", err)
	}
	f.lostReply = true
	if err := c.DeleteLog(t.Context(), "l"); err != nil {
		t.Fatalf("DeleteLog whose first reply was lost: %v", err)
	}
	if err := c.DeleteLog(t.Context(), "l"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("DeleteLog of a missing log: %v, want ErrNotFound", err)
	}
	if f.calls["create"] != 3 || f.calls["delete"] != 3 {
		t.Fatalf("%d CreateLog and %d DeleteLog calls, want 3 of each", f.calls["create"], f.calls["delete"])
	}
}

// A call on a server that is gone fails once RetryTimeout has passed, and
// says it cannot reach it; one whose ctx ends first fails with ctx's error.
func TestCallGivesUpAfterRetryTimeout(t *testing.T) {
	f := newFlaky(0)
	f.created["l"] = true
	addr, stop := serve(t, f, "")
	c, err := Open(t.Context(), Options{Server: addr, RetryTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop()
	_, err = c.OpenLog(t.Context(), "l")
	if err == nil || !strings.Contains(err.Error(), "cannot reach the tern server at "+addr) {
		t.Fatalf("OpenLog on a stopped server: %v, want cannot reach the tern server at %s", err, addr)
	}

	c2, err := func() (*Client, error) {
		addr, stop := serve(t, f, "")
		defer stop()
		return Open(t.Context(), Options{Server: addr})
	}()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := c2.OpenLog(ctx, "l"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenLog on a stopped server with a short ctx: %v, want DeadlineExceeded", err)
	}
}

// A call made while the server restarts on its address goes through once
// it is back.
func TestCallAcrossRestart(t *testing.T) {
	f := newFlaky(0)
	f.created["l"] = true
	addr, stop := serve(t, f, "")
	c, err := Open(t.Context(), Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop()
	done := make(chan error, 1)
	go func() {
		_, err := c.OpenLog(t.Context(), "l")
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the call meets no server for a while
	serve(t, f, addr)
	if err := <-done; err != nil {
		t.Fatalf("OpenLog across a restart: %v", err)
	}
}
