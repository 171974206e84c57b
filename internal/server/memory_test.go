package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// sendsUntilStalled sends reqs on stream from a goroutine until they are
// all sent or the sends stop making progress (none completes for a
// second), and returns how many completed by then, and a channel that is
// closed once every send has returned.
func sendsUntilStalled(t *testing.T, stream ternpb.Tern_AppendStreamClient, reqs int, req func(i int) *ternpb.AppendStreamRequest) (int64, <-chan error) {
	t.Helper()
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := range reqs {
			if err := stream.Send(req(i)); err != nil {
				done <- err
				return
			}
			sent.Add(1)
		}
		done <- stream.CloseSend()
	}()
	last, still := int64(-1), 0
	for still < 5 {
		time.Sleep(200 * time.Millisecond)
		n := sent.Load()
		if n == int64(reqs) {
			return n, done
		}
		if n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	return last, done
}

// An AppendStream whose client sends 200 MiB faster than the disk takes
// it is read only while its unanswered bytes are under the stream's budget
// (here 4 MiB). Once the client reads, every batch is answered and in the
// log, and the append budget is all given back.
func TestAppendStreamUnansweredBytesBounded(t *testing.T) {
	ts := startWith(t, Options{AppendBytes: 64 << 20, StreamAppendBytes: 4 << 20})
	epoch := ts.createLog(t, "l", nil)
	stream, err := ts.api.AppendStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const reqs, size = 200, 1 << 20
	entry := func(i int) []byte {
		b := bytes.Repeat([]byte{byte(i)}, size)
		b[0], b[1] = byte(i>>8), byte(i)
		return b
	}
	sent, done := sendsUntilStalled(t, stream, reqs, func(i int) *ternpb.AppendStreamRequest {
		return streamReq("l", epoch, []*ternpb.Entry{{Payload: entry(i)}})
	})
	t.Logf("%d of %d requests sent before the client read an answer", sent, reqs)
	for i, r := range recvResults(t, stream, reqs) {
		if r.Error != nil || r.Offset != uint64(i) {
			t.Fatalf("result %d: %v, want offset %d", i, r, i)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	es := ts.readAll(t, "l", 0)
	if len(es) != reqs {
		t.Fatalf("read %d entries, want %d", len(es), reqs)
	}
	for i, e := range es {
		if !bytes.Equal(e.Payload, entry(i)) {
			t.Fatalf("entry %d is not what was appended", i)
		}
	}
	// The stream is over once the server has answered the last request.
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after the last result: %v, want io.EOF", err)
	}
	peak := ts.srv.streamPeak.Load()
	t.Logf("at most %d bytes unanswered", peak)
	if peak > (4<<20)+size {
		t.Errorf("the stream had %d bytes unanswered, over its budget of 4 MiB and one request", peak)
	}
	if inUse := ts.srv.appends.inUse(); inUse != 0 {
		t.Errorf("append budget in use %d after every append is durable, want 0", inUse)
	}
}

// An AppendStream whose client does not read its answers at all (its
// HTTP/2 window for them is full) stops being read once its unanswered
// bytes reach the stream's budget: the client's sends stall after the
// budget and what the server's receive window holds, instead of the server
// taking all it sends. Once the client reads, everything is answered.
func TestAppendStreamUnreadRepliesStopReading(t *testing.T) {
	ts := startWith(t, Options{AppendBytes: 64 << 20, StreamAppendBytes: 2 << 20})
	epoch := ts.createLog(t, "l", nil)
	// The smallest windows gRPC allows: 64 KiB of answers fill them.
	conn, err := grpc.NewClient(ts.conn.Target(), append(grpcopts.Dial(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := ternpb.NewTernClient(conn).AppendStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Requests of 2,000 batches of 1 KiB: each answer is a few KiB.
	const reqs, batches, size = 100, 2000, 1 << 10
	req := func(i int) *ternpb.AppendStreamRequest {
		r := &ternpb.AppendStreamRequest{Log: "l", Epoch: epoch}
		for j := range batches {
			p := bytes.Repeat([]byte{byte(j)}, size)
			p[0], p[1] = byte(i), byte(j>>8)
			r.Batches = append(r.Batches, &ternpb.Batch{Entries: []*ternpb.Entry{{Payload: p}}})
		}
		return r
	}
	sent, done := sendsUntilStalled(t, stream, reqs, req)
	t.Logf("%d of %d requests of 2 MiB sent to a client that reads no answer", sent, reqs)
	// The answers the windows hold (tens of KiB: a few requests'), the
	// budget (one request), the server's receive window (16 MiB: 8): far
	// from all of them.
	if sent > reqs/2 {
		t.Fatalf("%d of %d requests of 2 MiB were taken from a stream whose client reads no answer, with a budget of 2 MiB", sent, reqs)
	}
	rs := recvResults(t, stream, reqs*batches)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Error != nil || r.Offset != uint64(i) {
			t.Fatalf("result %d: %v, want offset %d", i, r, i)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after the last result: %v, want io.EOF", err)
	}
	if peak := ts.srv.streamPeak.Load(); peak > (2<<20)+batches*size {
		t.Errorf("the stream had %d bytes unanswered, over its budget of 2 MiB and one request", peak)
	}
}

// An append larger than the whole append budget can never fit: it fails
// with RESOURCE_EXHAUSTED (LIMIT) naming the setting, unary or streamed,
// and the stream goes on.
func TestAppendOverBudget(t *testing.T) {
	ts := startWith(t, Options{AppendBytes: 1 << 20})
	epoch := ts.createLog(t, "l", nil)
	big := make([]byte, 2<<20)
	_, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: big}}})
	wantStatus(t, err, codes.ResourceExhausted, "LIMIT")
	if !bytes.Contains([]byte(err.Error()), []byte("--memory-limit")) {
		t.Errorf("error %q does not name --memory-limit", err)
	}

	stream, err := ts.api.AppendStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][]byte{big, []byte("small")} {
		if err := stream.Send(streamReq("l", epoch, []*ternpb.Entry{{Payload: p}})); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	rs := recvResults(t, stream, 2)
	if rs[0].Error == nil || rs[0].Error.Reason != "LIMIT" {
		t.Errorf("result of the request over the budget: %v, want the error LIMIT", rs[0])
	}
	if rs[1].Error != nil || rs[1].Offset != 0 {
		t.Errorf("result of the next request: %v, want offset 0", rs[1])
	}
}

// Appends that fit wait for one another instead of failing: many unary
// appends, together over the budget, all succeed.
func TestAppendBudgetWaits(t *testing.T) {
	ts := startWith(t, Options{AppendBytes: 2 << 20})
	epoch := ts.createLog(t, "l", nil)
	const n = 16
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: make([]byte, 1<<20)}}})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if es := ts.readAll(t, "l", 0); len(es) != n {
		t.Fatalf("read %d entries, want %d", len(es), n)
	}
}

// A reader asked for many large entries with WithMaxBatchBytes gets at
// most about that many bytes per NextBatch (a larger entry alone), so that
// the server's Read and Subscribe streams hold one response's worth.
func TestNextBatchBytes(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	l, err := ts.srv.c.CreateLog(ctx, "l", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sizes := []int{300 << 10, 300 << 10, 300 << 10, 300 << 10, 3 << 20, 10, 10, 2 << 20}
	for _, n := range sizes {
		if _, err := w.AppendBatch(ctx, []tern.Entry{{Payload: make([]byte, n)}}); err != nil {
			t.Fatal(err)
		}
	}
	// One batch of many small entries, which a reader decodes at once.
	small := make([]tern.Entry, 4000)
	for i := range small {
		small[i].Payload = make([]byte, 1000)
	}
	if _, err := w.AppendBatch(ctx, small); err != nil {
		t.Fatal(err)
	}
	total := len(sizes) + len(small)
	if _, err := l.CreateSubscription(ctx, "s", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}

	r, err := l.OpenReader(ctx, 0, tern.WithMaxBatchBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sub, err := l.Subscribe(ctx, "s", tern.WithMaxBatchBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for name, next := range map[string]func(context.Context, int) ([]tern.Entry, error){"reader": r.NextBatch, "subscriber": sub.NextBatch} {
		got := 0
		for got < total {
			es, err := next(ctx, 1<<16)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			n := 0
			for _, e := range es {
				n += len(e.Payload)
			}
			if n > 1<<20 && len(es) > 1 {
				t.Fatalf("%s: NextBatch returned %d entries of %d bytes, over the 1 MiB asked", name, len(es), n)
			}
			got += len(es)
		}
		if got != total {
			t.Fatalf("%s: %d entries, want %d", name, got, total)
		}
	}
}

// The server's Read stream sends at most about 1 MiB of payload per
// response, a larger entry alone, also to a client that asks for the
// largest max_batch.
func TestReadResponsesBoundedByBytes(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "l", nil)
	sizes := []int{600 << 10, 600 << 10, 3 << 20, 100, 100, 900 << 10}
	for _, n := range sizes {
		if _, err := ts.api.Append(t.Context(), &ternpb.AppendRequest{Log: "l", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: make([]byte, n)}}}); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := ts.api.Read(t.Context(), &ternpb.ReadRequest{Log: "l", MaxBatch: maxReadBatch})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range resp.Entries {
			n += len(e.Payload)
		}
		if n > maxResponseBytes && len(resp.Entries) > 1 {
			t.Fatalf("a response of %d entries and %d bytes", len(resp.Entries), n)
		}
		got += len(resp.Entries)
	}
	if got != len(sizes) {
		t.Fatalf("read %d entries, want %d", got, len(sizes))
	}
}

// The append budget grants bytes in order of arrival, makes waiters wait
// until there is room, lets a canceled waiter go without taking any, and
// refuses at once what could never fit.
func TestBudget(t *testing.T) {
	b := newBudget(100, "--memory-limit")
	ctx := t.Context()
	if err := b.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if err := b.acquire(ctx, 101); !errors.Is(err, rpcerr.ErrLimit) || !strings.Contains(err.Error(), "--memory-limit") {
		t.Fatalf("acquire over the limit: %v, want ErrLimit naming --memory-limit", err)
	}
	big := make(chan error, 1)
	go func() { big <- b.acquire(ctx, 50) }() // waits: 60 + 50 > 100
	// Queued: with 40 free, only a waiter makes a try of 1 byte fail.
	for b.sem.TryAcquire(1) {
		b.sem.Release(1)
		time.Sleep(time.Millisecond)
	}
	// A small one arriving later waits behind it, though it would fit.
	small := make(chan error, 1)
	go func() { small <- b.acquire(ctx, 10) }()
	cctx, cancel := context.WithCancel(ctx)
	canceled := make(chan error, 1)
	go func() { canceled <- b.acquire(cctx, 40) }()
	for b.waiting() != 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled acquire: %v", err)
	}
	select {
	case err := <-small:
		t.Fatalf("a later acquire went before an earlier one (%v)", err)
	default:
	}
	b.release(60)
	if err := <-big; err != nil {
		t.Fatal(err)
	}
	if err := <-small; err != nil {
		t.Fatal(err)
	}
	if got := b.inUse(); got != 60 {
		t.Fatalf("in use %d, want 60", got)
	}
	b.release(60)
	if got := b.inUse(); got != 0 {
		t.Fatalf("in use %d after every release, want 0", got)
	}
}
