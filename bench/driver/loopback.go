package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/server"
)

// loopbackServer is what tern serve runs, in this process, for tern bench
// --grpc: an embedded etcd, a data directory, and the gRPC service on a
// loopback port.
type loopbackServer struct {
	etcd *meta.EmbeddedEtcd
	c    *tern.Client
	srv  *server.Server
	gs   *grpc.Server
	addr string
}

func startLoopbackServer(ctx context.Context, dir string) (_ *loopbackServer, err error) {
	s := &loopbackServer{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.etcd, err = meta.StartEtcd(ctx, filepath.Join(dir, "etcd"), nil); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	if s.c, err = tern.Open(ctx, tern.Options{Dir: filepath.Join(dir, "data"), Etcd: s.etcd.Endpoints()}); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.srv = server.New(s.c, server.Options{})
	s.gs = grpc.NewServer(grpcopts.Server()...)
	s.srv.Register(s.gs)
	go s.gs.Serve(lis)
	s.addr = lis.Addr().String()
	return s, nil
}

func (s *loopbackServer) Close() error {
	var errs []error
	if s.srv != nil {
		errs = append(errs, s.srv.Close())
		s.gs.Stop()
	}
	if s.c != nil {
		errs = append(errs, s.c.Close())
	}
	if s.etcd != nil {
		errs = append(errs, s.etcd.Close())
	}
	return errors.Join(errs...)
}
