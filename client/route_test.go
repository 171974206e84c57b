package client

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// bouncer is a node of a cluster whose view lags: it sends calls about the
// log to its peer while its bounces last, then answers them.
type bouncer struct {
	ternpb.UnimplementedTernServer
	peer    string
	mu      *sync.Mutex
	bounces *int // left, shared by the two nodes
	deleted *bool
}

func (b *bouncer) bounce() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if *b.bounces == 0 {
		return nil
	}
	*b.bounces--
	return rpcerr.Status(&rpcerr.NotOwnerError{Log: "l", Owner: b.peer}).Err()
}

func (b *bouncer) DescribeLog(ctx context.Context, req *ternpb.DescribeLogRequest) (*ternpb.LogInfo, error) {
	if err := b.bounce(); err != nil {
		return nil, err
	}
	return &ternpb.LogInfo{Name: req.GetName(), Options: LogOptions{}.Proto()}, nil
}

func (b *bouncer) DeleteLog(ctx context.Context, req *ternpb.DeleteLogRequest) (*ternpb.DeleteLogResponse, error) {
	if err := b.bounce(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	*b.deleted = true
	b.mu.Unlock()
	return &ternpb.DeleteLogResponse{}, nil
}

// startBouncers starts two nodes that send calls to each other bounces
// times in all, and returns their addresses.
func startBouncers(t *testing.T, bounces int, deleted *bool) (string, string) {
	t.Helper()
	var lis [2]net.Listener
	for i := range lis {
		var err error
		if lis[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	mu := new(sync.Mutex)
	for i := range lis {
		g := grpc.NewServer()
		ternpb.RegisterTernServer(g, &bouncer{peer: lis[1-i].Addr().String(), mu: mu, bounces: &bounces, deleted: deleted})
		go g.Serve(lis[i])
		t.Cleanup(g.Stop)
	}
	return lis[0].Addr().String(), lis[1].Addr().String()
}

// While a log moves, the nodes' views lag and they may send a call back
// and forth a few times: the client follows until they agree, pausing as
// the bounces go on, and gives up with ErrNotOwner when they never do
// within RetryTimeout.
func TestRedirectsWhileViewsLag(t *testing.T) {
	var deleted bool
	first, _ := startBouncers(t, 7, &deleted)
	c, err := Open(t.Context(), Options{Server: first})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.OpenLog(t.Context(), "l"); err != nil {
		t.Fatalf("OpenLog after 7 redirects: %v", err)
	}
	first, _ = startBouncers(t, 5, &deleted)
	c2, err := Open(t.Context(), Options{Server: first})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.DeleteLog(t.Context(), "l"); err != nil || !deleted {
		t.Fatalf("DeleteLog after 5 redirects: %v (deleted: %v)", err, deleted)
	}

	first, _ = startBouncers(t, 1000000, &deleted)
	c3, err := Open(t.Context(), Options{Server: first, RetryTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, err := c3.OpenLog(t.Context(), "l"); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("OpenLog with nodes that never agree: %v, want ErrNotOwner", err)
	}
}
