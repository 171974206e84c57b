package driver

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

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/meta"
)

// benchCluster is a cluster of tern serve processes on loopback, for
// Quorum and Failover: an embedded etcd in this process, and nodes n0, n1, ... each with a data directory of its own
// under dir (so all on one disk) and the same object store.
type benchCluster struct {
	dir     string
	exe     string
	storage string
	ttl     time.Duration
	etcd    *meta.EmbeddedEtcd
	cli     *clientv3.Client
	nodes   []*benchNode
}

// benchNode is one tern serve process of a benchCluster.
type benchNode struct {
	id, data, addr, http, logFile string
	cmd                           *exec.Cmd
	done                          chan struct{} // closed when the process has exited
}

// etcdRoot is the default prefix of Tern's keys in etcd, which the nodes use.
const etcdRoot = "/tern/"

// etcdTimeout bounds the etcd client's dial.
const etcdTimeout = 5 * time.Second

// startBenchCluster starts n nodes, with a lease of ttl each, storing
// sealed data at storage (a dir:// store under dir when empty). The
// nodes are exe run as tern serve; they inherit this process's environment
// (the object store's credentials).
func startBenchCluster(ctx context.Context, exe, dir string, n int, ttl time.Duration, storage string) (_ *benchCluster, err error) {
	if storage == "" {
		storage = "dir://" + filepath.Join(dir, "objects")
	}
	c := &benchCluster{dir: dir, exe: exe, storage: storage, ttl: ttl}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.etcd, err = meta.StartEtcd(ctx, filepath.Join(dir, "etcd"), nil); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	if c.cli, err = clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: etcdTimeout, Logger: zap.NewNop()}); err != nil {
		return nil, err
	}
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		node := &benchNode{id: id, data: filepath.Join(dir, id), logFile: filepath.Join(dir, id+".log")}
		if node.addr, err = freeLoopback(); err != nil {
			return nil, err
		}
		if node.http, err = freeLoopback(); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, node)
		if err := c.start(ctx, node); err != nil {
			return nil, err
		}
	}
	return c, nil
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

// start runs node, or runs it again on its data directory and addresses,
// and waits until it is ready.
func (c *benchCluster) start(ctx context.Context, node *benchNode) error {
	log, err := os.OpenFile(node.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own descriptor
	cmd := exec.Command(c.exe, "serve", "--data", node.data, "--listen", node.addr, "--http", node.http,
		"--node-id", node.id, "--node-ttl", c.ttl.String(), "--etcd", strings.Join(c.etcd.Endpoints(), ","),
		"--storage", c.storage, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the benchmark
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node %s: %w", node.id, err)
	}
	node.cmd, node.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		cmd.Wait()
		close(done)
	}(node.done)

	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(c.ttl + 30*time.Second) // a restarted node first waits for its old lease to lapse
	for {
		resp, err := hc.Get("http://" + node.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-node.done:
			return fmt.Errorf("node %s exited before it was ready: see %s", node.id, node.logFile)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s was not ready within %v: see %s", node.id, time.Until(deadline), node.logFile)
		}
	}
}

// kill9 kills node at once, as a crash would, and waits until it is gone.
func (c *benchCluster) kill9(node *benchNode) {
	node.cmd.Process.Signal(syscall.SIGKILL)
	<-node.done
}

// owner returns the node that serves the only log of the cluster, or nil
// while none does, from etcd.
func (c *benchCluster) owner(ctx context.Context) (*benchNode, error) {
	resp, err := c.cli.Get(ctx, etcdRoot+"owners/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	if len(resp.Kvs) > 1 {
		return nil, fmt.Errorf("%d logs are served: want the only one", len(resp.Kvs))
	}
	for _, n := range c.nodes {
		if n.id == string(resp.Kvs[0].Value) {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the log is served by %q, which is not a node of this benchmark", resp.Kvs[0].Value)
}

// pids lists the nodes' processes that run.
func (c *benchCluster) pids() []int {
	var pids []int
	for _, n := range c.nodes {
		select {
		case <-n.done:
		default:
			pids = append(pids, n.cmd.Process.Pid)
		}
	}
	return pids
}

// Close stops the nodes, gracefully, then etcd.
func (c *benchCluster) Close() error {
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
		case <-time.After(30 * time.Second):
			n.cmd.Process.Kill()
			<-n.done
			errs = append(errs, fmt.Errorf("node %s did not stop within 30s of SIGTERM: killed", n.id))
		}
	}
	if c.cli != nil {
		c.cli.Close()
	}
	if c.etcd != nil {
		errs = append(errs, c.etcd.Close())
	}
	return errors.Join(errs...)
}

// Cluster is a cluster of tern serve nodes started on this machine for a
// measure, and the quorum logs measured on it.
type Cluster struct {
	// Nodes is the number of nodes; Ensemble and AckQuorum are the logs'.
	Nodes, Ensemble, AckQuorum int
	// TTL is the nodes' lease (tern serve --node-ttl).
	TTL time.Duration
	// Storage is the URL of the object store the nodes offload sealed
	// segments to (see CheckStore), under a new prefix of the run's own;
	// empty, a directory in the run's.
	Storage string
	// Program is the tern binary: each node runs as "Program serve ...",
	// with this process's environment.
	Program string
}

// logOptions are the options of the quorum logs measured.
func (c Cluster) logOptions() tern.LogOptions {
	return tern.LogOptions{Mode: tern.ModeQuorum, Ensemble: c.Ensemble, AckQuorum: c.AckQuorum}
}

// variant names the logs measured as the report shows them: "quorum 3/2,
// 3 nodes".
func (c Cluster) variant() string {
	return fmt.Sprintf("quorum %d/%d, %d nodes", c.Ensemble, c.AckQuorum, c.Nodes)
}

// start starts the cluster in dir.
func (c Cluster) start(ctx context.Context, dir string) (*benchCluster, error) {
	storage := ""
	if c.Storage != "" {
		var err error
		if storage, err = runStore(c.Storage); err != nil {
			return nil, err
		}
	}
	return startBenchCluster(ctx, c.Program, dir, c.Nodes, c.TTL, storage)
}

// Quorum runs spec on quorum logs on a cluster c started under env.Dir.
func Quorum(ctx context.Context, env Env, spec loadgen.Spec, c Cluster) (*loadgen.Result, error) {
	bc, err := c.start(ctx, env.Dir)
	if err != nil {
		return nil, err
	}
	defer bc.Close()
	t, err := openTernTarget(ctx, tern.Options{Server: bc.nodes[0].addr}, "bench-", spec.Logs, c.logOptions())
	if err != nil {
		return nil, err
	}
	pids := bc.pids()
	r, err := loadgen.Run(ctx, spec, t, loadgen.RunOptions{Progress: env.Progress, PID: pids[0], PIDs: pids[1:]})
	if cerr := t.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	r.System, r.Version, r.Variant = "tern", env.Version, c.variant()
	// Every replica journals to the one disk under dir: the disk's
	// bandwidth is shared by this many.
	r.SetExtra("replicas_per_disk", float64(c.Ensemble))
	r.Notes = append(r.Notes, fmt.Sprintf("%d tern serve nodes on this machine, their journals on one disk, the client on gRPC over loopback; CPU s and peak RSS add up the nodes'", c.Nodes))
	if c.Storage == "" {
		r.Notes = append(r.Notes, "sealed segments offloaded to a directory on the journals' disk, a fourth write of every byte")
	} else {
		r.Notes = append(r.Notes, "sealed segments offloaded to "+c.Storage)
	}
	return r, nil
}
