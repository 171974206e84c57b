package server

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/ternwal/tern/internal/cluster"
)

// TestNodeLink: the detector's link to a node that serves is up and its
// probes answer; once the node's process is gone (its listener and
// connections closed, as the kernel does at kill -9), the link goes down
// and its address refuses probes.
func TestNodeLink(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	served := make(chan struct{})
	go func() { gs.Serve(lis); close(served) }()
	defer gs.Stop()

	p, err := dialPeer(cluster.Member{ID: "n1", Addr: lis.Addr().String()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := p.Probe(ctx); err != nil {
		t.Fatalf("probe of a node that serves: %v", err)
	}
	l := p.(*nodeLink)
	l.cc.Connect()
	for s := l.cc.GetState(); s != connectivity.Ready; s = l.cc.GetState() {
		if !l.cc.WaitForStateChange(ctx, s) {
			t.Fatalf("the link did not come up: %v", s)
		}
	}

	gs.Stop() // closes the listener and every connection
	<-served
	p.WaitDown(ctx)
	if ctx.Err() != nil {
		t.Fatal("the link stayed up after the node's connections closed")
	}
	if err := p.Probe(ctx); !errors.Is(err, cluster.ErrRefused) {
		t.Fatalf("probe of a node that is gone: %v, want ErrRefused", err)
	}
}
