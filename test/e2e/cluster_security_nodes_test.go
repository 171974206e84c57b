package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/api/ternpb"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/certs/certstest"
	"github.com/ternwal/tern/internal/cluster"
	"github.com/ternwal/tern/internal/replica"
)

// replicaClient is a client of the replica service of the node at addr,
// over TLS with conf.
func replicaClient(t *testing.T, addr string, conf *tls.Config) ternpb.ReplicaClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, append(grpcopts.Dial(), grpc.WithTransportCredentials(credentials.NewTLS(conf)))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return ternpb.NewReplicaClient(cc)
}

// addStream opens an add connection to addr as a node would, over TLS
// with conf and the protocol replica.AddProtocol, and sends the preface,
// the segment to open and one fragment. It returns the message of the
// error frame the node answered with, or fails the test if it answered
// anything else.
func addStream(t *testing.T, addr string, conf *tls.Config, seg replica.SegmentID) string {
	t.Helper()
	conf = conf.Clone()
	conf.NextProtos = []string{replica.AddProtocol}
	c, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatalf("add connection to %s: %v", addr, err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != replica.AddProtocol {
		t.Fatalf("add connection to %s: the node chose the protocol %q, want %q", addr, p, replica.AddProtocol)
	}
	c.SetDeadline(time.Now().Add(waitTimeout))
	data := []byte("forged fragment")
	msg := []byte("TERNADD\x02")
	msg = binary.LittleEndian.AppendUint64(msg, seg.Log)
	msg = binary.LittleEndian.AppendUint64(msg, seg.Seq)
	msg = binary.LittleEndian.AppendUint64(msg, 1) // epoch
	msg = append(msg, 1)                           // a fragment
	msg = binary.LittleEndian.AppendUint64(msg, 0)
	msg = binary.LittleEndian.AppendUint32(msg, uint32(len(data)))
	msg = binary.LittleEndian.AppendUint32(msg, replica.FrameSum(0, data))
	msg = append(msg, data...)
	// The node may close the connection before it reads this: it refuses
	// the connection as soon as it is made.
	c.Write(msg)

	r := bufio.NewReader(c)
	kind, err := r.ReadByte()
	if err != nil {
		t.Fatalf("add connection to %s: no answer: %v", addr, err)
	}
	if kind != 3 {
		t.Fatalf("add connection to %s: the node answered a frame of kind %d, want an error (3)", addr, kind)
	}
	n, err := r.ReadByte()
	if err == nil {
		_, err = r.Discard(int(n)) // the reason
	}
	var size [2]byte
	if err == nil {
		_, err = io.ReadFull(r, size[:])
	}
	text := make([]byte, binary.LittleEndian.Uint16(size[:]))
	if err == nil {
		_, err = io.ReadFull(r, text)
	}
	if err != nil {
		t.Fatalf("add connection to %s: a torn error frame: %v", addr, err)
	}
	if b, err := r.ReadByte(); err == nil {
		t.Fatalf("add connection to %s: the node sent %#x after its error frame, want it to close the connection", addr, b)
	}
	return string(text)
}

// A client of the cluster's CA that is not a node, even one granted every
// permission on every log, cannot call the replica service nor add
// fragments to a replica: PERMISSION_DENIED, and an error frame on the add
// connection, after which the node stores nothing. A node's certificate
// may do both.
func TestClusterSecurityReplicaService(t *testing.T) {
	sc := startSecureCluster(t)
	ctx := deadline(t)
	ops := sc.client(t, "n0", "ops", nil)
	l, err := ops.CreateLog(ctx, "q", tern.LogOptions{Mode: tern.ModeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[tern.Offset]string{}
	appendN(t, l, "e", 10, acked)
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	segs := sc.segments(t, info.ID)
	open := segs[len(segs)-1]
	seg := &ternpb.ReplicaSegment{Log: info.ID, Seq: open.seq}
	replicaNode := open.Ensemble[0]
	addr := sc.nodes[replicaNode].addr

	app := sc.ca.Issue(t, certstest.LeafOptions{CommonName: "app-client", Client: true})
	// The app certificate is a principal with every grant, and a client:
	// it may use the Tern service.
	if _, err := sc.client(t, replicaNode, "", app).OpenLog(ctx, "q"); err != nil {
		t.Fatalf("OpenLog with the app's certificate: %v", err)
	}

	node := sc.clientTLS()
	node.Certificates = []tls.Certificate{sc.nodeLeaf(t, sc.ca, "tern-node-n1").TLSCertificate(t)}
	withApp := sc.clientTLS()
	withApp.Certificates = []tls.Certificate{app.TLSCertificate(t)}
	for _, caller := range []struct {
		name string
		conf *tls.Config
	}{{"the app's certificate", withApp}, {"no certificate", sc.clientTLS()}} {
		rc := replicaClient(t, addr, caller.conf)
		_, err := rc.List(ctx, &ternpb.ReplicaListRequest{Segment: seg})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("replica List with %s: %v, want PermissionDenied", caller.name, err)
		}
		_, err = rc.Fence(ctx, &ternpb.ReplicaFenceRequest{Segment: seg, Epoch: 1 << 40})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("replica Fence with %s: %v, want PermissionDenied", caller.name, err)
		}
		_, err = rc.Drop(ctx, &ternpb.ReplicaDropRequest{Segment: seg})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("replica Drop with %s: %v, want PermissionDenied", caller.name, err)
		}

		forged := replica.SegmentID{Log: 1 << 40, Seq: 1}
		msg := addStream(t, addr, caller.conf, forged)
		if !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "node") {
			t.Errorf("add connection with %s: the node answered %q, want a permission denied naming the nodes", caller.name, msg)
		}
		_, err = replicaClient(t, addr, node).List(ctx, &ternpb.ReplicaListRequest{Segment: &ternpb.ReplicaSegment{Log: forged.Log, Seq: forged.Seq}})
		if status.Code(err) != codes.NotFound {
			t.Errorf("replica List of the segment %v added with %s, by a node: %v, want NotFound: the node stored it", forged, caller.name, err)
		}
	}

	// A node's certificate: the same calls go through. The segment holds
	// the fragments the log's writer sent.
	resp, err := replicaClient(t, addr, node).List(ctx, &ternpb.ReplicaListRequest{Segment: seg})
	if err != nil {
		t.Fatalf("replica List with a node's certificate: %v", err)
	}
	if len(resp.GetSizes()) == 0 {
		t.Errorf("replica List of segment %d of q on %s: no fragments, want the log's", open.seq, replicaNode)
	}

	// Nothing the refused calls asked was done: the log is whole, and its
	// writer was not fenced.
	appendN(t, l, "more", 10, acked)
	checkAcked(t, l, acked)
	for _, want := range []string{"op=/tern.v1.Replica/List", `op="replica add stream"`} {
		if !strings.Contains(sc.nodes[replicaNode].stderr.String(), want) {
			t.Errorf("node %s did not audit the refused call: no %s in its log", replicaNode, want)
		}
	}
}

// logID returns the ID of the named log, from the metadata (through any
// node).
func logID(t *testing.T, c *tern.Client, name string) uint64 {
	t.Helper()
	infos, err := c.ListLogs(deadline(t), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.Name == name {
			return info.ID
		}
	}
	t.Fatalf("log %s is not listed", name)
	return 0
}

// A node whose certificate the others refuse, in a cluster whose nodes
// authenticate each other by mTLS: one that does not serve TLS (on
// loopback, with --insecure), or one with a certificate of another CA
// (impersonating n0, with that CA as its --tls-client-ca, so that its own
// check passes). It joins etcd, and is chosen into ensembles, but the
// others cannot reach it, nor it them. The logs the good nodes serve take
// appends at the quorum of the others, and the bad node receives no replica
// data of them. A log that placement hands to the bad node cannot be
// reached by a client that verifies the server's certificate.
func TestClusterSecurityBadNode(t *testing.T) {
	t.Run("without TLS", func(t *testing.T) {
		sc := startSecureCluster(t)
		bad := startServer(t, t.TempDir(), append(sc.clusterArgs("n3"), "--insecure")...)
		// Its replica service has no TLS and lets anyone in: this is how
		// the test sees what it holds.
		conn, err := replica.Dial(bad.addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		checkBadNode(t, sc, conn)
	})
	t.Run("certificate of another CA", func(t *testing.T) {
		sc := startSecureCluster(t)
		other := certstest.NewCA(t, "another CA")
		otherFile := filepath.Join(sc.dir, "other-ca.pem")
		other.WriteFile(t, otherFile)
		args := sc.nodeArgs(t, "n3", sc.nodeLeaf(t, other, "tern-node-n0"), otherFile)
		bad := startServerTLS(t, t.TempDir(), "", &tls.Config{RootCAs: other.Pool()}, nil, args...)
		// A node certificate of its CA is what it lets in.
		conf := &tls.Config{RootCAs: other.Pool(), Certificates: []tls.Certificate{sc.nodeLeaf(t, other, "tern-node-n1").TLSCertificate(t)}, ServerName: "127.0.0.1"}
		conn, err := replica.Dial(bad.addr, conf)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		checkBadNode(t, sc, conn)
	})
}

// checkBadNode creates logs in sc, whose 4th node, n3, is bad, and
// appends to each through n0: the logs that placement gives to a good node
// take every append, and bad, the replica service of n3, holds none of
// their segments; those that placement gives to n3 cannot be written.
func checkBadNode(t *testing.T, sc *secureCluster, bad *replica.Conn) {
	ctx := deadline(t)
	ops := sc.client(t, "n0", "ops", nil)
	members := []cluster.Member{{ID: "n0"}, {ID: "n1"}, {ID: "n2"}, {ID: "n3"}}
	good, lost := 0, 0
	for _, name := range []string{"b/0", "b/1", "b/2", "b/3", "b/4", "b/5", "b/6", "b/7"} {
		l, err := ops.CreateLog(ctx, name, tern.LogOptions{Mode: tern.ModeQuorum, SegmentBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		id := logID(t, ops, name)
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		w, err := l.OpenWriter(wctx)
		cancel()
		if a, _ := cluster.Assign(id, members); a.ID == "n3" {
			// Placement gives the log to the bad node: the client does not
			// talk to it.
			lost++
			if err == nil {
				t.Errorf("log %s: a writer opened on the bad node", name)
				w.Close()
			}
			t.Logf("log %s, placed on the bad node: %v", name, err)
			continue
		}
		owner := sc.ownerOf(t, id)
		if err != nil {
			t.Fatalf("log %s, served by %s: %v", name, owner, err)
		}
		w.Close()
		good++
		acked := map[tern.Offset]string{}
		appendN(t, l, "e", 100, acked)
		checkAcked(t, l, acked)
		in := 0
		for _, s := range sc.segments(t, id) {
			for _, node := range s.Ensemble {
				if node == "n3" {
					in++
				}
			}
			sizes, err := bad.List(ctx, replica.SegmentID{Log: id, Seq: s.seq})
			if !errors.Is(err, rpcerr.ErrSegmentNotFound) {
				t.Errorf("log %s, segment %d (ensemble %v): the bad node answered List with %v, %v; want it to hold none of it", name, s.seq, s.Ensemble, sizes, err)
			}
		}
		if in > 0 && !strings.Contains(sc.nodes[owner].stderr.String(), "replica unreachable for a new segment") {
			t.Errorf("log %s: its owner %s did not warn that n3 was unreachable for a segment", name, owner)
		}
		t.Logf("log %s served by %s: %d entries; the bad node was chosen into %d of its %d segments' ensembles", name, owner, len(acked), in, len(sc.segments(t, id)))
	}
	t.Logf("%d logs served by the good nodes took appends; %d were placed on the bad node", good, lost)
	if good == 0 {
		t.Fatal("every log was placed on the bad node")
	}
}
