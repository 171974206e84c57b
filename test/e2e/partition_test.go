package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ternwal/tern"
)

// proxiedCluster is a testCluster whose nodes the other nodes and the
// clients reach only through a proxy each, in this process: a node's proxy
// can cut it off while its etcd lease, which it keeps directly, still lists
// it live.
type proxiedCluster struct {
	*testCluster
	proxies map[string]*toxiproxy.Proxy
}

// startProxiedCluster starts n nodes as startCluster does, each listening
// on a port of its own and advertising its proxy's.
func startProxiedCluster(t *testing.T, n int) *proxiedCluster {
	t.Helper()
	shared, start := startShared(t)
	ts := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	c := &proxiedCluster{testCluster: shared, proxies: map[string]*toxiproxy.Proxy{}}
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		p := toxiproxy.NewProxy(ts, id, "127.0.0.1:0", freeAddr(t))
		if err := p.Start(); err != nil { // sets p.Listen to the port it took
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		c.proxies[id] = p
		c.nodes[id] = start(t.TempDir(), p.Upstream, "--node-id", id, "--advertise", p.Listen)
	}
	return c
}

// partitionDirections are the toxiproxy streams a partition cuts: from
// the peers to the node, and back.
var partitionDirections = []string{"upstream", "downstream"}

// partition cuts node id off: its proxy still accepts connections and keeps
// those it has, and drops every byte either way. A black hole rather than
// a refused or reset connection: nothing tells the peers that it is gone,
// as when a switch or a firewall drops the packets.
func (c *proxiedCluster) partition(t *testing.T, id string) {
	t.Helper()
	blackhole(t, c.proxies[id])
}

// heal ends the partition of node id. Toxiproxy closes the connections the
// partition held (their bytes were dropped), and new ones go through.
func (c *proxiedCluster) heal(t *testing.T, id string) {
	t.Helper()
	unblackhole(t, c.proxies[id])
}

// blackhole makes p accept connections and keep those it has, and drop
// every byte either way.
func blackhole(t *testing.T, p *toxiproxy.Proxy) {
	t.Helper()
	for _, dir := range partitionDirections {
		toxic := fmt.Sprintf(`{"name": "partition-%s", "type": "timeout", "stream": %q, "attributes": {"timeout": 0}}`, dir, dir)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			t.Fatalf("cut %s off (%s): %v", p.Name, dir, err)
		}
	}
}

// unblackhole undoes blackhole.
func unblackhole(t *testing.T, p *toxiproxy.Proxy) {
	t.Helper()
	for _, dir := range partitionDirections {
		if err := p.Toxics.RemoveToxic(t.Context(), "partition-"+dir); err != nil {
			t.Fatalf("reconnect %s (%s): %v", p.Name, dir, err)
		}
	}
}

// waitLeftOut watches the segments of the only log from etcd revision
// rev, when node id was cut off, until k segments in a row are created on
// ensembles without id, and returns the ensembles of those created since
// rev. A segment that has id may start before the owner sees the
// partition, but none after one that left it out: the owner avoids a node
// that failed. Each ensemble is 3 of the 4 nodes by rendezvous hashing, so
// an owner that never rolled nor avoided id would leave it out of k in a
// row with probability 4^-k.
func (c *proxiedCluster) waitLeftOut(t *testing.T, id string, rev int64, k int) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	var created [][]string
	run := 0
	for resp := range c.etcd.Watch(ctx, "/tern/logs/", clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			kv := ev.Kv
			if ev.Type != clientv3.EventTypePut || kv.CreateRevision != kv.ModRevision || !strings.Contains(string(kv.Key), "/segments/") {
				continue
			}
			var seg struct {
				Ensemble []string `json:"ensemble"`
			}
			if err := json.Unmarshal(kv.Value, &seg); err != nil {
				t.Fatalf("segment %s: %v", kv.Key, err)
			}
			created = append(created, seg.Ensemble)
			switch {
			case !slices.Contains(seg.Ensemble, id):
				run++
			case run > 0:
				t.Fatalf("a segment on %v started after one that left %s out; the ensembles since the cut: %v", seg.Ensemble, id, created)
			}
			if run == k {
				return created
			}
		}
	}
	t.Fatalf("%s was not left out of %d segments in a row within %v; the ensembles since the cut: %v", id, k, waitTimeout, created)
	return nil
}

// TestClusterPartitionedReplica runs steady appends to a quorum log on
// four nodes and cuts a replica of the open segment, not the owner, off
// from every other node and from the client, while etcd still lists it
// live. Every append succeeds, the owner rolls to ensembles without the
// replica, and once the partition heals every acknowledged entry is read
// back at its offset, through the node that was cut off, offsets are
// dense, and no entry is there twice.
func TestClusterPartitionedReplica(t *testing.T) {
	c := startProxiedCluster(t, 4)
	ctx := t.Context()
	// Segments roll at least every 4 s, whatever the machine's speed: the
	// owner avoids a node that failed for 30 s, and three segments without
	// the cut node must start within that. (Under the race detector on a
	// loaded machine, a segment of 8,192 fragments took 18 s, and the third
	// one after the cut was free to take the node again.)
	opts := tern.LogOptions{Mode: tern.ModeQuorum, Ensemble: 3, AckQuorum: 2, SegmentAge: 4 * time.Second}
	ap := c.startAppending(t, opts, func(id string) string { return c.proxies[id].Listen })
	a, owner, seed := ap.acked, ap.owner, ap.seed
	a.waitMore(t, 300, "before the partition")

	// A replica of the open segment, neither the owner nor the seed.
	before := c.openEnsemble(t)
	var cut string
	for _, id := range before {
		if id != owner && id != seed {
			cut = id
			break
		}
	}
	resp, err := c.etcd.Get(ctx, "/tern/logs/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("owner %s, seed %s, open segment on %v: cutting %s off", owner, seed, before, cut)
	c.partition(t, cut)
	start := time.Now()
	a.waitMore(t, 300, "with a replica cut off")
	created := c.waitLeftOut(t, cut, resp.Header.Revision+1, 3)
	t.Logf("%s left out of 3 segments in a row, %v after it was cut off; the ensembles since: %v", cut, time.Since(start).Round(time.Millisecond), created)
	a.waitMore(t, 300, "on the new ensembles, with the replica still cut off")

	c.heal(t, cut)
	a.waitMore(t, 300, "after the partition healed")
	entries := ap.stop(t)
	// appendUntil gives each try its own payload, e-0, e-1, ...: one that
	// is missing was an append, or a writer's opening, that failed, and
	// with one replica of three cut off none should.
	got := map[string]bool{}
	for _, p := range entries {
		got[p] = true
	}
	for i := range len(entries) {
		if p := "e-" + strconv.Itoa(i); !got[p] {
			t.Errorf("%s was not acknowledged: an append failed, with one replica of three cut off", p)
			break
		}
	}
	// Through the node that was cut off.
	hlog, err := openClient(t, c.proxies[cut].Listen).OpenLog(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	end := checkAcked(t, hlog, entries)
	t.Logf("%d entries acknowledged through the partition, %d read", len(entries), end)
}
