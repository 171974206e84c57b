package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/server"
)

// loopbackServer is what tern serve runs, in this process, for tern bench
// --grpc: an embedded etcd, a data directory, and the gRPC service on a
// loopback port, over TLS and with an auth file if its Security says so.
type loopbackServer struct {
	etcd *meta.EmbeddedEtcd
	c    *tern.Client
	srv  *server.Server
	gss  []*grpc.Server // the first serves addr
	addr string
	sec  *security
}

func startLoopbackServer(ctx context.Context, dir string, sec Security) (_ *loopbackServer, err error) {
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
	if s.sec, err = makeSecurity(dir, sec); err != nil {
		return nil, err
	}
	s.srv = server.New(s.c, server.Options{Policy: s.sec.policy, NoDedup: sec.NoDedup})
	if s.addr, err = s.serve(sec.TLS); err != nil {
		return nil, err
	}
	return s, nil
}

// serve serves the Server on one more loopback port, over TLS or not, and
// returns its address.
func (s *loopbackServer) serve(tlsOn bool) (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	gopts := grpcopts.Server()
	if tlsOn {
		// The configuration tern serve's listeners use, from the same files.
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(s.sec.certs.ServerConfig())))
	}
	gs := grpc.NewServer(gopts...)
	s.srv.Register(gs)
	s.gss = append(s.gss, gs)
	go gs.Serve(lis)
	return lis.Addr().String(), nil
}

// clientOptions are the options of a client of the server: its address,
// the TLS configuration that trusts its certificate, its token.
func (s *loopbackServer) clientOptions() tern.Options {
	return tern.Options{Server: s.addr, TLS: s.sec.clientTLS(), Token: s.sec.token}
}

func (s *loopbackServer) Close() error {
	var errs []error
	if s.srv != nil {
		errs = append(errs, s.srv.Close())
		for _, gs := range s.gss {
			gs.Stop()
		}
	}
	if s.c != nil {
		errs = append(errs, s.c.Close())
	}
	if s.etcd != nil {
		errs = append(errs, s.etcd.Close())
	}
	return errors.Join(errs...)
}
