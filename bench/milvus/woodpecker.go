package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/milvus-io/milvus/pkg/v2/streaming/util/message"
	"github.com/zilliztech/woodpecker/common/config"
	wpetcd "github.com/zilliztech/woodpecker/common/etcd"
	"github.com/zilliztech/woodpecker/woodpecker"
	"github.com/zilliztech/woodpecker/woodpecker/log"

	"github.com/ternwal/tern/bench/peers/woodpecker/wpservice"
	"github.com/ternwal/tern/internal/meta"
)

// wpSystem is Woodpecker v0.1.35 through its own client API: embedded with
// local or MinIO storage, or a client of 3 LogStore processes (service
// mode). Milvus 2.6.0's impls/wp, its walimpls over Woodpecker, was written
// against Woodpecker v0.1.3 and does not build against v0.1.35 (its
// NewMinioHandlerWithClient, config types and metrics calls changed), so
// the same messages go through the calls impls/wp makes: LogWriter.Write
// of the message's payload and properties, and LogReader.ReadNext turned
// back into a Milvus message.
type wpSystem struct {
	name    string
	etcd    *meta.EmbeddedEtcd
	service *wpservice.Cluster
	client  woodpecker.Client
}

// openWoodpecker starts Woodpecker with storage "local", "minio" or
// "service" under dir, its metadata in an etcd in this process.
func openWoodpecker(ctx context.Context, env *env, storage, dir string) (_ system, err error) {
	s := &wpSystem{name: map[string]string{"local": "woodpecker", "minio": "woodpecker-minio", "service": "woodpecker-service"}[storage]}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if env.wpConfig == "" {
		return nil, errors.New("woodpecker needs its shipped config: --wp-config PATH (config/woodpecker.yaml of the module, go list -m -f '{{.Dir}}' github.com/zilliztech/woodpecker)")
	}
	wc, err := config.NewConfiguration(env.wpConfig)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", env.wpConfig, err)
	}
	if err := wpservice.RedirectLog(filepath.Join(dir, "woodpecker.log")); err != nil {
		return nil, err
	}
	wc.Log.Level = "warn"
	wc.Woodpecker.Storage.Type = storage
	wc.Woodpecker.Storage.RootPath = filepath.Join(dir, "wp")
	if s.etcd, err = meta.StartEtcd(ctx, filepath.Join(dir, "etcd"), nil); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	wc.Etcd.Endpoints = s.etcd.Endpoints()
	if storage != "local" {
		if env.minio.Endpoint == "" {
			return nil, fmt.Errorf("%s needs a MinIO: --minio HOST:PORT, with its credentials in $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY", s.name)
		}
		m := env.minio
		m.Bucket = s.name
		host, port, _ := net.SplitHostPort(m.Endpoint)
		wc.Minio.Address = host
		if wc.Minio.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("bad MinIO endpoint %q", m.Endpoint)
		}
		wc.Minio.AccessKeyID, wc.Minio.SecretAccessKey = m.AccessKey, m.Secret
		wc.Minio.UseSSL, wc.Minio.BucketName, wc.Minio.CreateBucket = false, m.Bucket, true
	}
	if storage != "service" {
		if s.client, err = woodpecker.NewEmbedClientFromConfig(ctx, wc); err != nil {
			return nil, fmt.Errorf("start embedded woodpecker: %w", err)
		}
		return s, nil
	}
	if env.logstore == "" {
		return nil, errors.New("woodpecker-service needs Woodpecker's LogStore server: --logstore PATH (go build -o PATH github.com/zilliztech/woodpecker/cmd)")
	}
	m := env.minio
	m.Bucket = s.name
	if s.service, err = wpservice.Start(ctx, wpservice.Options{
		Program: env.logstore, Config: env.wpConfig, Dir: dir, Etcd: wc.Etcd.Endpoints, MinIO: m, Started: env.started,
	}); err != nil {
		return nil, err
	}
	if err := s.service.Configure(wc, wc.Etcd.Endpoints, m); err != nil {
		return nil, err
	}
	if err := s.service.WaitQuorum(ctx, wc); err != nil {
		return nil, err
	}
	cli, err := wpetcd.GetRemoteEtcdClient(wc.Etcd.Endpoints)
	if err != nil {
		return nil, fmt.Errorf("etcd client for woodpecker: %w", err)
	}
	if s.client, err = woodpecker.NewClient(ctx, wc, cli, true); err != nil {
		return nil, fmt.Errorf("woodpecker client of the LogStores: %w", err)
	}
	return s, nil
}

func (s *wpSystem) names() (string, string) { return s.name, "durable" }

func (s *wpSystem) open(ctx context.Context, channel string) (target, error) {
	if err := s.client.CreateLog(ctx, channel); err != nil {
		return nil, fmt.Errorf("create log %s: %w", channel, err)
	}
	h, err := s.client.OpenLog(ctx, channel)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", channel, err)
	}
	w, err := h.OpenLogWriter(ctx)
	if err != nil {
		h.Close(ctx)
		return nil, fmt.Errorf("open writer of log %s: %w", channel, err)
	}
	return &wpTarget{handle: h, writer: w}, nil
}

func (s *wpSystem) pids() []int {
	if s.service == nil {
		return nil
	}
	return s.service.PIDs()
}

func (s *wpSystem) close() error {
	var errs []error
	if s.client != nil {
		errs = append(errs, s.client.Close(context.Background()))
		if s.service == nil {
			errs = append(errs, woodpecker.StopEmbedLogStore())
		}
	}
	if s.service != nil {
		errs = append(errs, s.service.Close())
	}
	if s.etcd != nil {
		errs = append(errs, s.etcd.Close())
	}
	return errors.Join(errs...)
}

// wpTarget is one Woodpecker log and its writer.
type wpTarget struct {
	handle log.LogHandle
	writer log.LogWriter
}

// wpMessage is what impls/wp writes for a Milvus message: its payload and
// properties.
func wpMessage(entry []byte) *log.WriteMessage {
	m := newMessage(entry)
	return &log.WriteMessage{Payload: m.Payload(), Properties: m.Properties().ToRawMap()}
}

func (t *wpTarget) Append(ctx context.Context, _ int, entries [][]byte) error {
	if len(entries) == 1 {
		return t.writer.Write(ctx, wpMessage(entries[0])).Err
	}
	results := make([]<-chan *log.WriteResult, len(entries))
	for i, e := range entries {
		results[i] = t.writer.WriteAsync(ctx, wpMessage(e))
	}
	var errs []error
	for _, r := range results {
		errs = append(errs, (<-r).Err)
	}
	return errors.Join(errs...)
}

func (t *wpTarget) Read(ctx context.Context, _ int, fromStart bool, ready func(), fn func(entry []byte) error) error {
	if !fromStart {
		return errors.New("the milvus workloads read from the start only")
	}
	from := log.EarliestLogMessageID()
	r, err := t.handle.OpenLogReader(ctx, &from, "bench")
	if err != nil {
		return fmt.Errorf("open reader: %w", err)
	}
	defer r.Close(context.WithoutCancel(ctx))
	ready()
	for {
		m, err := r.ReadNext(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("woodpecker: read: %w", err)
		}
		// As impls/wp's scanner does: a Milvus message of the entry.
		msg := message.NewImmutableMesasge(nil, m.Payload, m.Properties)
		if err := fn(msg.Payload()); err != nil {
			return err
		}
	}
}

func (t *wpTarget) Close() error {
	ctx := context.Background()
	return errors.Join(t.writer.Close(ctx), t.handle.Close(ctx))
}
