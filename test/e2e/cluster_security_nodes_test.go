package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
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
	"github.com/ternwal/tern/internal/certs/certstest"
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

// A node that passes its own checks but that the live members would
// refuse does not join either: one without TLS (--insecure), and one whose
// certificate is of another CA that it trusts itself, with a node's
// subject. Before it joins, it connects to each member as it would to send
// replica data, and stops at the first that refuses it or that it refuses.
func TestClusterSecurityBadNode(t *testing.T) {
	sc := startSecureCluster(t)
	other := certstest.NewCA(t, "another CA")
	otherFile := filepath.Join(sc.dir, "other-ca.pem")
	other.WriteFile(t, otherFile)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"without TLS", append(sc.clusterArgs("n3"), "--insecure")},
		{"certificate of another CA", sc.nodeArgs(t, "n3", sc.nodeLeaf(t, other, "tern-node-n0"), otherFile)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedToJoin(t, tc.args, "and this node do not accept each other", "--tls-client-ca")
		})
	}
	sc.checkOnlyNodes(t)
	// The cluster goes on: a quorum log takes appends on the three.
	ctx := deadline(t)
	l, err := sc.client(t, "n0", "ops", nil).CreateLog(ctx, "b/after", tern.LogOptions{Mode: tern.ModeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[tern.Offset]string{}
	appendN(t, l, "e", 20, acked)
	checkAcked(t, l, acked)
}
