package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/ternpb"
	"github.com/ternwal/tern/internal/cluster"
	"github.com/ternwal/tern/internal/meta"
)

// waitTimeout bounds every wait on the cluster; far above what any takes.
const waitTimeout = 20 * time.Second

// testCluster is an embedded etcd and an object store (a directory) that
// the nodes of a test share.
type testCluster struct {
	endpoints []string
	storage   string // the object store's URL
}

func startCluster(t *testing.T) *testCluster {
	t.Helper()
	e, err := meta.StartEtcd(t.Context(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return &testCluster{endpoints: e.Endpoints(), storage: "dir://" + t.TempDir()}
}

// testNode is a node of a cluster in this process: its membership, its
// tern.Client on its own data directory, and a Server called directly,
// without gRPC.
type testNode struct {
	srv  *Server
	c    *tern.Client
	node *cluster.Node
	dir  string
}

// join starts node id. It leaves the cluster at the end of the test, or
// when stop is called.
func (tc *testCluster) join(t *testing.T, id string) *testNode {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: tc.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	node, err := cluster.Join(t.Context(), cluster.Options{Client: cli, ID: id, Addr: "127.0.0.1:" + strconv.Itoa(7000+len(id)), TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c, err := tern.Open(t.Context(), tern.Options{Dir: dir, Etcd: tc.endpoints, Storage: tern.StorageOptions{URL: tc.storage}})
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{srv: New(c, Options{Cluster: node}), c: c, node: node, dir: dir}
	t.Cleanup(n.stop)
	return n
}

// stop leaves the cluster at once (the lease is revoked, so the others see
// the node go without waiting for its TTL), then closes the Server and the
// client.
func (n *testNode) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.node.Close(ctx)
	n.srv.Close()
	n.c.Close()
}

// createLogs creates the named logs through n in mode, and returns their
// IDs. A node refuses to create local logs: those are made by n's client,
// as they would have been before n joined a cluster, and then served by a
// call through n.
func (n *testNode) createLogs(t *testing.T, mode tern.Mode, names ...string) map[string]uint64 {
	t.Helper()
	ids := map[string]uint64{}
	for _, name := range names {
		opts := tern.LogOptions{Mode: mode}
		info, err := n.srv.CreateLog(t.Context(), &ternpb.CreateLogRequest{Name: name, Options: opts.Proto()})
		if mode == tern.ModeLocal {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "mode quorum or object") {
				t.Fatalf("a node created local log %s: %v", name, err)
			}
			if _, err := n.c.CreateLog(t.Context(), name, opts); err != nil {
				t.Fatal(err)
			}
			info, err = n.srv.DescribeLog(t.Context(), &ternpb.DescribeLogRequest{Name: name})
		}
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = info.Id
	}
	return ids
}

// waitOwners waits until, in n's view, each log of ids is owned by the node
// want returns for it ("" for none), and n serves those it owns: the view
// can show an Acquire before the Server has recorded what it took.
func waitOwners(t *testing.T, n *testNode, what string, ids map[string]uint64, want func(name string, id uint64) string) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		ch := n.node.Changed()
		wrong := ""
		for name, id := range ids {
			m, _ := n.node.Owner(id)
			if w := want(name, id); m.ID != w {
				wrong = fmt.Sprintf("log %s (%d) is owned by %q, want %q", name, id, m.ID, w)
				break
			}
			if mine := m.ID == n.node.ID(); n.srv.servesID(id) != mine {
				wrong = fmt.Sprintf("log %s (%d): owned by this node %v, served %v", name, id, mine, !mine)
				break
			}
		}
		if wrong == "" {
			return
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Millisecond): // for the Server, which signals nothing
		case <-deadline:
			t.Fatalf("%s: %s after %v", what, wrong, waitTimeout)
		}
	}
}

// assignee returns the ID of the node among ns that placement assigns id to.
func assignee(id uint64, ns ...*testNode) string {
	ms := make([]cluster.Member, len(ns))
	for i, n := range ns {
		ms[i] = n.node.Self()
	}
	a, _ := cluster.Assign(id, ms)
	return a.ID
}

// TestTakeOverWithoutCalls checks that a node takes the object logs that
// placement assigns to it and no live node serves, with no call about them:
// those another node gives up when the node joins, and all of them when
// that node leaves. A local log is left to the first call about it.
func TestTakeOverWithoutCalls(t *testing.T) {
	tc := startCluster(t)
	n0 := tc.join(t, "n0")
	objects := n0.createLogs(t, tern.ModeObject, "o0", "o1", "o2", "o3", "o4", "o5")
	local := n0.createLogs(t, tern.ModeLocal, "loc")
	all := map[string]uint64{"loc": local["loc"]}
	for name, id := range objects {
		all[name] = id
	}
	waitOwners(t, n0, "n0 alone", all, func(string, uint64) string { return "n0" })

	n1 := tc.join(t, "n1")
	moved := 0
	for _, id := range objects {
		if assignee(id, n0, n1) == "n1" {
			moved++
		}
	}
	if moved == 0 || moved == len(objects) {
		t.Fatalf("%d of %d object logs are assigned to n1: the test needs some on each node", moved, len(objects))
	}
	waitOwners(t, n1, "after n1 joined", objects, func(_ string, id uint64) string { return assignee(id, n0, n1) })

	n0.stop()
	waitOwners(t, n1, "after n0 left", objects, func(string, uint64) string { return "n1" })
	// adopt goes through the logs by name in one pass: "loc" comes first.
	if m, ok := n1.node.Owner(local["loc"]); ok {
		t.Fatalf("local log taken over by %s without a call", m.ID)
	}
	// The logs taken over are served: a call about one is answered here.
	if _, err := n1.srv.DescribeLog(t.Context(), &ternpb.DescribeLogRequest{Name: "o0"}); err != nil {
		t.Fatal(err)
	}
}

// TestListLogsOpensOnlyServed checks that a node lists every log, and
// opens only those it serves: the others are described from metadata.
func TestListLogsOpensOnlyServed(t *testing.T) {
	tc := startCluster(t)
	n0 := tc.join(t, "n0")
	ids := n0.createLogs(t, tern.ModeLocal, "l0", "l1", "l2", "l3")
	for name, id := range n0.createLogs(t, tern.ModeObject, "o0", "o1", "o2", "o3") {
		ids[name] = id
	}
	// Entries in every log, so that a log opened shows its end.
	for name := range ids {
		w, err := n0.srv.OpenWriter(t.Context(), &ternpb.OpenWriterRequest{Log: name})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := n0.srv.Append(t.Context(), &ternpb.AppendRequest{Log: name, Epoch: w.Epoch, Entries: []*ternpb.Entry{{Payload: []byte("x")}}}); err != nil {
				t.Fatal(err)
			}
		}
	}

	n1 := tc.join(t, "n1")
	// n0 gives up the logs placement assigns to n1; n1 takes the object
	// logs among them, and leaves the local ones to the first call.
	waitOwners(t, n1, "after n1 joined", ids, func(name string, id uint64) string {
		switch a := assignee(id, n0, n1); {
		case a == "n0":
			return "n0"
		case name[0] == 'o':
			return "n1"
		default:
			return ""
		}
	})
	elsewhere := map[string]bool{"local": false, "object": false}
	for name, id := range ids {
		if !n1.srv.servesID(id) {
			elsewhere[map[byte]string{'l': "local", 'o': "object"}[name[0]]] = true
		}
	}
	if !elsewhere["local"] || !elsewhere["object"] {
		t.Fatalf("n1 does not serve a log of each mode: %v", elsewhere)
	}

	// The logs taken over are opened in the background (warm): list once
	// n1 has opened the ones it serves, or at the deadline.
	var resp *ternpb.ListLogsResponse
	deadline := time.Now().Add(waitTimeout)
	for {
		var err error
		if resp, err = n1.srv.ListLogs(t.Context(), &ternpb.ListLogsRequest{}); err != nil {
			t.Fatal(err)
		}
		warm := true
		for _, info := range resp.Logs {
			if n1.srv.servesID(info.Id) && info.ExtentUnknown {
				warm = false
			}
		}
		if warm || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(resp.Logs) != len(ids) {
		t.Fatalf("n1 listed %d logs, want %d", len(resp.Logs), len(ids))
	}
	for _, info := range resp.Logs {
		id := ids[info.Name]
		if info.Id != id {
			t.Fatalf("log %s listed with ID %d, want %d", info.Name, info.Id, id)
		}
		served := n1.srv.servesID(id)
		if served && info.End != 3 {
			t.Errorf("log %s, served by n1: end %d, want 3", info.Name, info.End)
		}
		if !served && (info.End != info.Start || info.Options.GetMode() == "") {
			t.Errorf("log %s, not served by n1: %v, want its metadata, and end = start", info.Name, info)
		}
		// Opening a local log creates its directory.
		_, err := os.Stat(filepath.Join(n1.dir, "logs", strconv.FormatUint(id, 10)))
		if !served && !os.IsNotExist(err) {
			t.Errorf("log %s, not served by n1, has a directory on n1 (%v): n1 opened it", info.Name, err)
		}
	}
}

// TestCreateLogWhileAdopting checks that a node creating object logs while
// its balance loop adopts them answers every CreateLog: the adoption of a
// log just created must not close the handle the call describes it from.
func TestCreateLogWhileAdopting(t *testing.T) {
	tc := startCluster(t)
	n0 := tc.join(t, "n0")
	const workers, each = 4, 25
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("o%d-%d", w, i)
				opts := tern.LogOptions{Mode: tern.ModeObject}
				if _, err := n0.srv.CreateLog(t.Context(), &ternpb.CreateLogRequest{Name: name, Options: opts.Proto()}); err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
