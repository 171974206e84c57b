package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/milvus-io/milvus/pkg/v2/streaming/util/types"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/contrib/milvus"
	"github.com/ternwal/tern/internal/meta"
)

// ternSystem is Tern behind its Milvus backend (contrib/milvus): an
// embedded client for local and object logs, or a 3-node cluster of tern
// serve processes for quorum logs.
type ternSystem struct {
	variant string
	client  *tern.Client // embedded
	etcd    *meta.EmbeddedEtcd
	nodes   []*exec.Cmd
	opener  walimpls.OpenerImpls
}

// openTern starts Tern in mode "local", "object" or "quorum" under dir.
func openTern(ctx context.Context, env *env, mode, dir string) (_ system, err error) {
	s := &ternSystem{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	cfg := milvus.Config{Mode: mode}
	switch mode {
	case "local":
		s.variant = "durable"
		if s.client, err = tern.Open(ctx, tern.Options{Dir: filepath.Join(dir, "data")}); err != nil {
			return nil, err
		}
		cfg.Embedded = s.client
	case "object":
		s.variant = "object (MinIO)"
		url, err := env.bucket(ctx, "tern-object")
		if err != nil {
			return nil, err
		}
		opts := tern.Options{Dir: filepath.Join(dir, "data"), Storage: tern.StorageOptions{URL: url, AccessKey: env.minio.AccessKey, SecretKey: env.minio.Secret}}
		if s.client, err = tern.Open(ctx, opts); err != nil {
			return nil, err
		}
		cfg.Embedded = s.client
	case "quorum":
		s.variant = "quorum 3/2"
		if cfg.Nodes, err = s.startCluster(ctx, env, dir); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown tern mode %q", mode)
	}
	if s.opener, err = milvus.NewBuilder(cfg).Build(); err != nil {
		return nil, fmt.Errorf("build tern's milvus opener: %w", err)
	}
	return s, nil
}

// startCluster starts an etcd in this process and 3 tern serve nodes
// (env.tern) on it, offloading sealed segments to MinIO, and returns the
// nodes' addresses once each is ready.
func (s *ternSystem) startCluster(ctx context.Context, env *env, dir string) ([]string, error) {
	if env.tern == "" {
		return nil, errors.New("tern-quorum needs the tern binary: --tern PATH (go build -o PATH ./cmd/tern)")
	}
	url, err := env.bucket(ctx, "tern-quorum")
	if err != nil {
		return nil, err
	}
	if s.etcd, err = meta.StartEtcd(ctx, filepath.Join(dir, "etcd"), nil); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	var addrs []string
	for i := range 3 {
		id := fmt.Sprintf("n%d", i)
		addr, err := freeLoopback()
		if err != nil {
			return nil, err
		}
		web, err := freeLoopback()
		if err != nil {
			return nil, err
		}
		logFile := filepath.Join(dir, id+".log")
		out, err := os.Create(logFile)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(env.tern, "serve", "--data", filepath.Join(dir, id), "--listen", addr, "--http", web,
			"--node-id", id, "--etcd", strings.Join(s.etcd.Endpoints(), ","), "--storage", url, "--log-level", "warn")
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+env.minio.AccessKey, "AWS_SECRET_ACCESS_KEY="+env.minio.Secret)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		err = cmd.Start()
		out.Close()
		if err != nil {
			return nil, fmt.Errorf("start tern serve: %w", err)
		}
		s.nodes = append(s.nodes, cmd)
		env.started(cmd.Process.Pid)
		if err := waitReady(ctx, "http://"+web+"/readyz", logFile); err != nil {
			return nil, fmt.Errorf("tern node %s: %w", id, err)
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

func (s *ternSystem) names() (string, string) { return "tern", s.variant }

func (s *ternSystem) open(ctx context.Context, channel string) (target, error) {
	w, err := s.opener.Open(ctx, &walimpls.OpenOption{Channel: types.PChannelInfo{Name: channel, Term: 1, AccessMode: types.AccessModeRW}})
	if err != nil {
		return nil, err
	}
	return &walTarget{wal: w}, nil
}

func (s *ternSystem) pids() []int {
	var p []int
	for _, c := range s.nodes {
		p = append(p, c.Process.Pid)
	}
	return p
}

func (s *ternSystem) close() error {
	var errs []error
	if s.opener != nil {
		s.opener.Close()
	}
	if s.client != nil {
		errs = append(errs, s.client.Close())
	}
	errs = append(errs, stopAll(s.nodes, 30*time.Second))
	if s.etcd != nil {
		errs = append(errs, s.etcd.Close())
	}
	return errors.Join(errs...)
}

// stopAll sends SIGTERM to the processes, waits up to grace for them and
// kills those still there.
func stopAll(cmds []*exec.Cmd, grace time.Duration) error {
	done := make(chan error, len(cmds))
	for _, c := range cmds {
		c.Process.Signal(syscall.SIGTERM)
		go func() { done <- c.Wait() }()
	}
	var errs []error
	timeout := time.After(grace)
	for range cmds {
		select {
		case <-done:
		case <-timeout:
			for _, c := range cmds {
				c.Process.Kill()
			}
			errs = append(errs, fmt.Errorf("%s did not stop within %v of SIGTERM: killed", filepath.Base(cmds[0].Path), grace))
			timeout = nil
		}
	}
	return errors.Join(errs...)
}

// waitReady polls url until it answers 200.
func waitReady(ctx context.Context, url, logFile string) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready after 60s: see %s", logFile)
}

// freeLoopback returns a loopback address whose port was free a moment ago.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
