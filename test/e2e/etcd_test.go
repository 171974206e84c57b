package e2e

import (
	"flag"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdCluster is an etcd cluster of several members, each a process of its
// own (this test binary as an "etcd" child), as a Tern cluster's external
// etcd: a member can be killed with -9 or paused, and keeps its data
// directory and ports when it is started again.
type etcdCluster struct {
	t       *testing.T
	args    [][]string // each member's flags
	clients []string   // each member's client address
	mu      sync.Mutex
	members []*child // nil while stopped
}

func startEtcdCluster(t *testing.T, n int) *etcdCluster {
	t.Helper()
	// A port freeAddr found free may be taken (as the source port of a
	// connection of another package's tests) before the member binds it:
	// start again on other ports.
	for attempt := 1; ; attempt++ {
		c := &etcdCluster{t: t, members: make([]*child, n)}
		var initial []string
		for i := range n {
			client, peer := freeAddr(t), freeAddr(t)
			name := fmt.Sprintf("m%d", i)
			c.args = append(c.args, []string{"-name", name, "-dir", t.TempDir(), "-client", client, "-peer", peer})
			c.clients = append(c.clients, client)
			initial = append(initial, name+"=http://"+peer)
		}
		for i := range c.args {
			c.args[i] = append(c.args[i], "-initial-cluster", strings.Join(initial, ","))
		}
		if c.startAll() || attempt == 3 {
			return c
		}
		t.Logf("an etcd member's port was taken before it bound it; starting the cluster again on other ports")
		for i := range n {
			c.kill9(i)
		}
	}
}

// Endpoints returns the members' client addresses, host:port.
func (c *etcdCluster) Endpoints() []string { return c.clients }

// kill9 kills member i with SIGKILL, if it runs.
func (c *etcdCluster) kill9(i int) {
	c.mu.Lock()
	m := c.members[i]
	c.members[i] = nil
	c.mu.Unlock()
	if m != nil {
		m.kill()
	}
}

// pause stops member i with SIGSTOP, and returns what resumes it.
func (c *etcdCluster) pause(i int) func() {
	c.mu.Lock()
	m := c.members[i]
	c.mu.Unlock()
	if m == nil {
		return func() {}
	}
	m.cmd.Process.Signal(syscall.SIGSTOP)
	return func() { m.cmd.Process.Signal(syscall.SIGCONT) }
}

// start starts member i, unless it runs, and waits until it serves: a
// member serves once the cluster has a leader, so the members that are
// down start together, in startAll.
func (c *etcdCluster) start(i int) {
	c.t.Helper()
	c.launch(i).waitFor("etcd member ready", func(lines []string) bool { return countPrefix(lines, "ready") > 0 })
}

// launch starts member i unless it runs, and returns it.
func (c *etcdCluster) launch(i int) *child {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.members[i] == nil {
		c.members[i] = startChild(c.t, fmt.Sprintf("etcd member %d", i), "etcd", c.args[i]...)
	}
	return c.members[i]
}

// killAll kills every member; startAll starts those that are down.
func (c *etcdCluster) killAll() {
	for i := range c.args {
		c.kill9(i)
	}
}

// startAll starts the members that are down and waits until they serve.
// It returns false, leaving the rest to the caller, if one exited because
// its port was taken.
func (c *etcdCluster) startAll() bool {
	c.t.Helper()
	var ms []*child
	for i := range c.args {
		ms = append(ms, c.launch(i))
	}
	ready := func(lines []string) bool { return countPrefix(lines, "ready") > 0 }
	for _, m := range ms {
		if !m.readyOrPortTaken(ready) {
			return false
		}
	}
	return true
}

// etcdChild runs one etcd member until it is killed, and prints "ready"
// once it serves.
func etcdChild(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	name := fs.String("name", "", "the member's name")
	dir := fs.String("dir", "", "its data directory")
	client := fs.String("client", "", "host:port for clients")
	peer := fs.String("peer", "", "host:port for the other members")
	initial := fs.String("initial-cluster", "", "name=http://peer,... of every member")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = *name, *dir
	clientURL, peerURL := url.URL{Scheme: "http", Host: *client}, url.URL{Scheme: "http", Host: *peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster, cfg.InitialClusterToken = *initial, "tern-e2e"
	// A member restarted on its data directory rejoins the cluster it
	// holds, whatever the initial cluster flags say.
	// Half of etcd's defaults (100 ms, 1 s): quicker elections after a
	// member dies, with room for a loaded machine.
	cfg.TickMs, cfg.ElectionMs = 50, 500
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		say("error %v", err)
		return 1
	}
	select {
	case <-e.Server.ReadyNotify():
		say("ready")
	case err := <-e.Err():
		say("error %v", err)
		return 1
	}
	err = <-e.Err()
	say("error %v", err)
	return 1
}
