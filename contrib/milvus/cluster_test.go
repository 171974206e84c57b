//go:build test

package milvus

import (
	"testing"

	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"

	"github.com/ternwal/tern/client"
)

// TestFrameworkClusterQuorum runs Milvus's WAL framework against quorum logs
// on a cluster of three tern serve nodes, given all three.
func TestFrameworkClusterQuorum(t *testing.T) {
	c := startTernCluster(t, 3)
	watchdog(t, runTimeout, c.nodes...)
	walimpls.NewWALImplsTestFramework(t, frameworkMessages, NewBuilder(Config{Nodes: c.addrs(), Mode: "quorum"})).Run()
	checkChannelLogs(t, c.addrs(), client.ModeQuorum)
}

// TestFrameworkClusterOwnerKill runs Milvus's WAL framework against quorum
// logs on three nodes, and kills -9 the node that serves a channel's log
// once that log has 500 messages, and again at 2,500; each time another
// node takes the log over, and the killed one is started again, as its
// supervisor would (a cluster of three needs all three to start a segment:
// docs/cluster.md), and takes back the logs assigned to it.
func TestFrameworkClusterOwnerKill(t *testing.T) {
	c := startTernCluster(t, 3)
	watchdog(t, runTimeout, c.nodes...)
	d := disturbAt(t, c.addrs(), frameworkChannel, "owner kill", killOwnerDuring(t, c), disturbPoints...)
	walimpls.NewWALImplsTestFramework(t, frameworkMessages, NewBuilder(Config{Nodes: c.addrs(), Mode: "quorum"})).Run()
	d.finish(t)
	checkChannelLogs(t, c.addrs(), client.ModeQuorum)
}
