package certs_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/ternwal/tern/internal/certs/certstest"
)

// subjectServer is a health service that records the subject of the
// client certificate of each call.
type subjectServer struct {
	*health.Server
	subjects chan string
}

func (s subjectServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			s.subjects <- ti.State.PeerCertificates[0].Subject.String()
		}
	}
	return s.Server.Check(ctx, req)
}

// gRPC over the Store's configurations, as tern serve and its nodes use
// them: ALPN h2 is negotiated, the client's certificate reaches the call.
func TestGRPC(t *testing.T) {
	ca := certstest.NewCA(t, "cluster")
	other := certstest.NewCA(t, "other")
	nodeA := store(t, files(t, true), nodeLeaf(t, ca, "node-a"), ca)
	nodeB := store(t, files(t, true), nodeLeaf(t, ca, "node-b"), ca)
	intruder := store(t, files(t, true), nodeLeaf(t, other, "intruder"), ca)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(nodeA.ServerConfig())))
	hs := subjectServer{health.NewServer(), make(chan string, 8)}
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)

	check := func(cfg credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(cfg))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(credentials.NewTLS(nodeB.ClientConfig("127.0.0.1"))); err != nil {
		t.Fatalf("node-b: %v", err)
	}
	if got := <-hs.subjects; got != "CN=node-b" {
		t.Errorf("the call sees %q, want CN=node-b", got)
	}
	if err := check(credentials.NewTLS(intruder.ClientConfig("127.0.0.1"))); err == nil {
		t.Error("a node of another CA was served")
	}
}
