// Package wpservice runs Woodpecker v0.1.35 in service (quorum) mode on
// this machine: LogStore server processes (the "woodpecker server" command
// of github.com/zilliztech/woodpecker/cmd, which install.sh builds as
// woodpecker-logstore) on an etcd and a MinIO the caller started, and the
// configuration of a client that writes to them with 3 replicas acked at 2.
//
// A LogStore binds its gRPC, gossip and admin HTTP ports on 0.0.0.0 and has
// no option to bind anything else, so Start refuses to run unless this
// process is in a network namespace whose only interface is loopback (see
// CheckPrivateNetwork): bench.sh and bench/milvus/run.sh start the whole
// benchmark under "ip netns exec" in one made for the run.
//
// Durability, read from the v0.1.35 source: with storage type "service",
// a LogStore appends to a staged segment file on its local disk, and on each
// tick of woodpecker.logstore.segmentSyncPolicy.maxIntervalForService (1 ms
// shipped) writes the buffered block, fsyncs the file and only then
// acknowledges (server/storage/stagedstorage/writer_impl.go); sealed
// segments go to MinIO. The client's quorum settings are
// woodpecker.client.quorum.quorumSelectStrategy.replicas = 3, from which
// Woodpecker derives ensemble size 3, write quorum 3 and ack quorum
// 3/2+1 = 2 (common/config/configuration.go, GetAckQuorumSize): an append
// is acknowledged once two of the three LogStores have fsynced it.
package wpservice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	wplogger "github.com/zilliztech/woodpecker/common/logger"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zilliztech/woodpecker/common/config"
	wpclient "github.com/zilliztech/woodpecker/woodpecker/client"
	"github.com/zilliztech/woodpecker/woodpecker/quorum"
)

// Replicas is the ensemble size of the service-mode logs: Woodpecker writes
// every entry to all of them and acknowledges at a majority (2).
const Replicas = 3

// MinIO is the object store the LogStores stage sealed segments to.
type MinIO struct {
	Endpoint          string // host:port, plain HTTP
	AccessKey, Secret string
	Bucket            string // created by the LogStores if missing
}

// Options say what to start.
type Options struct {
	// Program is the woodpecker-logstore binary.
	Program string
	// Config is Woodpecker's shipped config/woodpecker.yaml, which every
	// LogStore starts from.
	Config string
	// Dir holds each node's data (Dir/lsN), its overrides (Dir/lsN.yaml)
	// and its output (Dir/lsN.log).
	Dir string
	// Etcd lists the client endpoints of the etcd for the metadata.
	Etcd []string
	// MinIO is the object store.
	MinIO MinIO
	// Nodes is the number of LogStores; zero means Replicas.
	Nodes int
	// Started, when not nil, is called with each LogStore's PID as soon as
	// it runs, so that a script can stop it should this process die first.
	Started func(pid int)
}

// Cluster is a set of running LogStores.
type Cluster struct {
	nodes []*node
}

type node struct {
	name, service, gossip, admin, log string
	cmd                               *exec.Cmd
	done                              chan struct{}
}

// CheckPrivateNetwork returns an error unless the only network interface
// this process sees is loopback: a LogStore listens on every interface.
func CheckPrivateNetwork() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list network interfaces: %w", err)
	}
	var others []string
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			others = append(others, i.Name)
		}
	}
	if len(others) > 0 {
		return fmt.Errorf("woodpecker's LogStores bind 0.0.0.0, and this process sees the interfaces %s: run it in a private network namespace with only loopback up (ip netns add NS; ip netns exec NS ip link set lo up; ip netns exec NS ...), as bench/peers/woodpecker/bench.sh does",
			strings.Join(others, ", "))
	}
	return nil
}

// Start starts the LogStores and waits until each answers its health
// check. On error it stops what it started.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if err := CheckPrivateNetwork(); err != nil {
		return nil, err
	}
	if o.Nodes == 0 {
		o.Nodes = Replicas
	}
	c := &Cluster{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for i := range o.Nodes {
		n := &node{name: fmt.Sprintf("ls%d", i), log: filepath.Join(o.Dir, fmt.Sprintf("ls%d.log", i))}
		for _, p := range []*string{&n.service, &n.gossip, &n.admin} {
			if *p, err = freePort(); err != nil {
				return nil, err
			}
		}
		c.nodes = append(c.nodes, n)
	}
	var gossipSeeds []string
	for _, n := range c.nodes {
		gossipSeeds = append(gossipSeeds, "127.0.0.1:"+n.gossip)
	}
	// Every node gets every gossip address, its own included, as
	// Woodpecker's docker-compose does: a LogStore with no seeds never
	// starts its gossip (server/service.go, Prepare), and joins retry
	// until the others are up.
	for _, n := range c.nodes {
		if err := c.start(ctx, o, n, gossipSeeds); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// start runs one LogStore with the given gossip seeds.
func (c *Cluster) start(ctx context.Context, o Options, n *node, seeds []string) error {
	data := filepath.Join(o.Dir, n.name)
	user := filepath.Join(o.Dir, n.name+".yaml")
	if err := os.WriteFile(user, []byte(overrides(o, data)), 0o644); err != nil {
		return err
	}
	out, err := os.OpenFile(n.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own descriptor
	args := []string{"server",
		"--node-name", n.name, "--data-dir", data, "--config", o.Config,
		"--service-port", n.service, "--gossip-port", n.gossip,
		"--advertise-service-addr", "127.0.0.1:" + n.service,
		"--advertise-gossip-addr", "127.0.0.1:" + n.gossip,
		"--external-default-config", filepath.Join(o.Dir, "no-default.yaml"),
		"--external-user-config", user,
	}
	args = append(args, "--seeds", strings.Join(seeds, ","))
	cmd := exec.Command(o.Program, args...)
	cmd.Env = append(os.Environ(), "METRICS_PORT="+n.admin)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the benchmark
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start woodpecker LogStore %s (%s): %w", n.name, o.Program, err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	if o.Started != nil {
		o.Started(cmd.Process.Pid)
	}
	go func() {
		cmd.Wait()
		close(n.done)
	}()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get("http://127.0.0.1:" + n.admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-n.done:
			return fmt.Errorf("woodpecker LogStore %s exited before it was healthy: see %s", n.name, n.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("woodpecker LogStore %s not healthy after 60s: see %s", n.name, n.log)
		}
	}
}

// overrides is a LogStore's external user configuration: Woodpecker's
// "server" command merges it over the shipped file.
func overrides(o Options, data string) string {
	host, port, _ := net.SplitHostPort(o.MinIO.Endpoint)
	return fmt.Sprintf(`etcd:
  endpoints: [%s]
minio:
  address: %s
  port: %s
  accessKeyID: %s
  secretAccessKey: %s
  bucketName: %s
  createBucket: true
woodpecker:
  storage:
    type: service
    rootPath: %s
log:
  level: warn
`, strings.Join(o.Etcd, ", "), host, port, o.MinIO.AccessKey, o.MinIO.Secret, o.MinIO.Bucket, data)
}

// Seeds are the LogStores' service addresses, the client's quorum pool.
func (c *Cluster) Seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, "127.0.0.1:"+n.service)
	}
	return s
}

// Configure points a client configuration (loaded from the shipped file)
// at the cluster: storage type "service", the quorum pool, Replicas
// replicas, the etcd and the MinIO (for direct reads of sealed segments).
func (c *Cluster) Configure(wc *config.Configuration, etcd []string, m MinIO) error {
	wc.Woodpecker.Storage.Type = "service"
	wc.Woodpecker.Client.Quorum.BufferPools.Set([]config.QuorumBufferPool{{Name: "default-region-pool", Seeds: c.Seeds()}})
	wc.Woodpecker.Client.Quorum.SelectStrategy.Replicas.Set(Replicas)
	wc.Etcd.Endpoints = etcd
	host, port, err := net.SplitHostPort(m.Endpoint)
	if err != nil {
		return fmt.Errorf("bad MinIO endpoint %q: want host:port", m.Endpoint)
	}
	wc.Minio.Address = host
	if wc.Minio.Port, err = strconv.Atoi(port); err != nil {
		return fmt.Errorf("bad MinIO port in %q", m.Endpoint)
	}
	wc.Minio.AccessKeyID, wc.Minio.SecretAccessKey = m.AccessKey, m.Secret
	wc.Minio.UseSSL = false
	wc.Minio.BucketName = m.Bucket
	wc.Minio.CreateBucket = true
	if es, aq := wc.Woodpecker.Client.Quorum.GetEnsembleSize(), wc.Woodpecker.Client.Quorum.GetAckQuorumSize(); es != 3 || aq != 2 {
		return fmt.Errorf("woodpecker's quorum came out as ensemble %d, ack quorum %d: want 3 and 2", es, aq)
	}
	return nil
}

// WaitQuorum waits until a quorum of Replicas LogStores can be selected
// the way a client does it for a new segment (wc as Configure left it).
// LogStores find each other by gossip a few seconds after they answer
// their health check; until then a writer's first append waits, which a
// benchmark must not measure.
func (c *Cluster) WaitQuorum(ctx context.Context, wc *config.Configuration) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pool := wpclient.NewLogStoreClientPool(wc.Woodpecker.Logstore.GRPCConfig.GetClientMaxSendSize(), wc.Woodpecker.Logstore.GRPCConfig.GetClientMaxRecvSize())
	defer pool.Close(context.WithoutCancel(ctx))
	d, err := quorum.NewQuorumDiscovery(ctx, &wc.Woodpecker.Client.Quorum, pool)
	if err != nil {
		return err
	}
	q, err := d.SelectQuorum(ctx)
	if err != nil {
		return fmt.Errorf("woodpecker's LogStores did not form a quorum of %d within a minute: %w", Replicas, err)
	}
	if len(q.Nodes) != Replicas {
		return fmt.Errorf("woodpecker selected a quorum of %d LogStores: want %d", len(q.Nodes), Replicas)
	}
	return nil
}

// PIDs lists the LogStores that run.
func (c *Cluster) PIDs() []int {
	var pids []int
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.done:
		default:
			pids = append(pids, n.cmd.Process.Pid)
		}
	}
	return pids
}

// Close stops the LogStores (SIGTERM, then SIGKILL after 40 s: a LogStore
// gives itself 35 s to shut down) and waits for them.
func (c *Cluster) Close() error {
	for _, n := range c.nodes {
		if n.cmd != nil {
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	var errs []error
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.done:
		case <-time.After(40 * time.Second):
			n.cmd.Process.Kill()
			<-n.done
			errs = append(errs, fmt.Errorf("woodpecker LogStore %s did not stop within 40s of SIGTERM: killed", n.name))
		}
	}
	return errors.Join(errs...)
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p, nil
}

// RedirectLog sends the Woodpecker client's log, which goes to standard
// output by default (where a driver's results may go), to the file at path,
// warnings and above. It replaces Woodpecker's global logger.
func RedirectLog(path string) error {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	zc.Encoding = "console"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	zc.OutputPaths = []string{path}
	zc.ErrorOutputPaths = []string{path}
	l, err := zc.Build()
	if err != nil {
		return fmt.Errorf("open woodpecker log: %w", err)
	}
	// Documented as for tests, and the only way to move the output.
	wplogger.ReplaceGlobals(l)
	return nil
}
