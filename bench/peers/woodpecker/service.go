package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/zilliztech/woodpecker/common/config"
	"github.com/zilliztech/woodpecker/common/etcd"
	"github.com/zilliztech/woodpecker/woodpecker"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/bench/peers/woodpecker/wpservice"
)

// startService starts the LogStores of woodpecker-service (the
// woodpecker-logstore binary next to this driver) on the driver's etcd and
// the MinIO wc already points at, and a client of them. Each LogStore's PID
// is appended to lc.Dir/pids as it starts, for bench.sh to stop them should
// the driver die first.
func startService(ctx context.Context, wc *config.Configuration, lc loadgen.Config) (*wpservice.Cluster, woodpecker.Client, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	pids, err := os.OpenFile(filepath.Join(lc.Dir, "pids"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer pids.Close()
	m := wpservice.MinIO{Endpoint: fmt.Sprintf("%s:%d", wc.Minio.Address, wc.Minio.Port),
		AccessKey: wc.Minio.AccessKeyID, Secret: wc.Minio.SecretAccessKey, Bucket: wc.Minio.BucketName}
	c, err := wpservice.Start(ctx, wpservice.Options{
		Program: filepath.Join(filepath.Dir(exe), "woodpecker-logstore"),
		Config:  configPath(),
		Dir:     lc.Dir,
		Etcd:    wc.Etcd.Endpoints,
		MinIO:   m,
		Started: func(pid int) { pids.WriteString(strconv.Itoa(pid) + "\n") },
	})
	if err != nil {
		return nil, nil, err
	}
	if err := c.Configure(wc, wc.Etcd.Endpoints, m); err == nil {
		err = c.WaitQuorum(ctx, wc)
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	cli, err := etcd.GetRemoteEtcdClient(wc.Etcd.Endpoints)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("etcd client for woodpecker: %w", err)
	}
	client, err := woodpecker.NewClient(ctx, wc, cli, true)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("woodpecker client of the LogStores: %w", err)
	}
	return c, client, nil
}
