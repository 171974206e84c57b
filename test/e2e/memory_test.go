package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/ternpb"
)

// memoryLimit is the --memory-limit of the servers of these tests. Without
// the byte bounds each of them took the server past 1 GB.
const memoryLimit = 512 << 20

// rss is the server process's resident set (VmRSS) and the most it has
// been since it started (VmHWM), in bytes.
func (s *server) rss() (now, peak int64) {
	s.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		s.t.Fatalf("the server's memory: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			now = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	if now == 0 || peak == 0 {
		s.t.Fatalf("no VmRSS or VmHWM in /proc/%d/status", s.cmd.Process.Pid)
	}
	return now, peak
}

// checkMemory fails the test unless the server still runs, answers
// /readyz, and has never had more resident memory than its limit (but for
// a server built with the race detector, whose figures it only logs).
func (s *server) checkMemory(what string) {
	s.t.Helper()
	if !s.running() {
		s.t.Fatalf("tern serve exited (%v) under %s", s.err, what)
	}
	now, peak := s.rss()
	s.t.Logf("%s: RSS %d MiB now, %d MiB at most (--memory-limit %d MiB)", what, now>>20, peak>>20, memoryLimit>>20)
	// The race detector's shadow memory multiplies the server's.
	if peak > memoryLimit && os.Getenv(raceEnv) != "1" {
		s.t.Errorf("%s: the server's RSS reached %d MiB, over its --memory-limit of %d MiB", what, peak>>20, memoryLimit>>20)
	}
	resp, err := http.Get("http://" + s.httpAddr + "/readyz")
	if err != nil {
		s.t.Fatalf("/readyz after %s: %v", what, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Errorf("/readyz after %s: %d, want 200", what, resp.StatusCode)
	}
}

// rawConn is a gRPC connection to the server that a hostile client would
// use: the Tern API without the Go client's manners.
func rawConn(t *testing.T, addr string) ternpb.TernClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append(grpcopts.Dial(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ternpb.NewTernClient(conn)
}

// bigEntry is entry i of size bytes: i in its first 8 bytes, then a
// pattern of i.
func bigEntry(i, size int) []byte {
	b := bytes.Repeat([]byte{byte(i*7 + 1)}, size)
	binary.BigEndian.PutUint64(b, uint64(i))
	return b
}

// checkEntries reads the log from 0 and requires n entries, entry i being
// bigEntry(i, size).
func checkEntries(t *testing.T, l *tern.Log, n, size int) {
	t.Helper()
	es := readAll(t, l, 0, tern.Offset(n))
	if len(es) != n {
		t.Fatalf("read %d entries, want %d", len(es), n)
	}
	for i, e := range es {
		if !bytes.Equal(e.Payload, bigEntry(i, size)) {
			t.Fatalf("entry %d (%d bytes) is not what was appended", i, len(e.Payload))
		}
	}
}

// An AppendStream that sends 200 requests of 8 MiB and reads none of the
// answers until it has sent them all: the server stops reading the stream
// at its budget and holds at most the append budget of them in memory,
// instead of queuing them all (1.1 GB of RSS before the bounds). Every
// acknowledged entry is intact afterwards.
func TestAppendStreamFloodMemory(t *testing.T) {
	srv := startServer(t, t.TempDir(), "--memory-limit", strconv.Itoa(memoryLimit))
	ctx := deadline(t)
	c := openClient(t, srv.addr)
	l, err := c.CreateLog(ctx, "flood", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	api := rawConn(t, srv.addr)
	w, err := api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "flood"})
	if err != nil {
		t.Fatal(err)
	}
	const reqs, size = 200, tern.DefaultMaxEntryBytes
	sctx, cancel := context.WithTimeout(t.Context(), 5*waitTimeout)
	defer cancel()
	stream, err := api.AppendStream(sctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		req := &ternpb.AppendStreamRequest{Log: "flood", Epoch: w.Epoch,
			Batches: []*ternpb.Batch{{Entries: []*ternpb.Entry{{Payload: bigEntry(i, size)}}}}}
		if err := stream.Send(req); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	srv.checkMemory("200 requests of 8 MiB sent without reading an answer")
	got := 0
	for got < reqs {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d results: %v", got, err)
		}
		for _, r := range resp.Results {
			if r.Error != nil || r.Offset != uint64(got) {
				t.Fatalf("result %d: %v, want offset %d", got, r, got)
			}
			got++
		}
	}
	srv.checkMemory("the answers read")
	checkEntries(t, l, reqs, size)
	srv.checkMemory("the entries read back")
}

// Three readers and a subscriber of a log of 4 MiB entries that read
// nothing after they opened: each stream holds about one response, not
// the 1,024 entries a batch may hold (420 MB a reader before the bounds).
func TestStalledReadersMemory(t *testing.T) {
	srv := startServer(t, t.TempDir(), "--memory-limit", strconv.Itoa(memoryLimit))
	ctx := deadline(t)
	c := openClient(t, srv.addr)
	l, err := c.CreateLog(ctx, "big", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 150, 4 << 20 // 600 MiB: more than the memory limit
	for i := range n {
		if _, err := w.Append(ctx, tern.Entry{Payload: bigEntry(i, size)}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if _, err := l.CreateSubscription(ctx, "stalled", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.checkMemory("600 MiB appended")

	sctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	opened := make(chan error, 4)
	for range 3 { // each on a connection of its own, with windows of its own
		api := rawConn(t, srv.addr)
		rs, err := api.Read(sctx, &ternpb.ReadRequest{Log: "big", MaxBatch: 65536, Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { // the headers, and then nothing read
			defer wg.Done()
			_, err := rs.Header()
			opened <- err
			<-sctx.Done()
		}()
	}
	sub, err := rawConn(t, srv.addr).Subscribe(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Start_{Start: &ternpb.SubscribeRequest_Start{Log: "big", Name: "stalled"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = sub.Header()
	opened <- err
	for range 4 {
		if err := <-opened; err != nil {
			t.Fatal(err)
		}
	}
	// Let the streams fill what they can: the HTTP/2 windows, then the
	// server's sends block.
	for range 10 {
		time.Sleep(500 * time.Millisecond)
		srv.checkMemory("3 readers and a subscriber stalled")
	}
	checkEntries(t, l, n, size)
	srv.checkMemory("the entries read back while the others stall")
}
