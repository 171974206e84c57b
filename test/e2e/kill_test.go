package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/miniotest"
)

// TestServerKill9 kills the server with SIGKILL while a writer in another
// process pipelines appends and a subscriber consumes, and restarts it on the
// same data directory: every acknowledged entry is there, the subscription
// goes on from a committed cursor, and the log takes appends again. The log
// is local ("local"), or in object mode on a real MinIO ("object"), where the
// kill interrupts uploads in flight.
func TestServerKill9(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		testServerKill9(t, startServer(t, t.TempDir()), tern.LogOptions{SegmentBytes: 64 << 10})
	})
	t.Run("object", func(t *testing.T) {
		m := miniotest.Start(t)
		srv := startServerEnv(t, t.TempDir(),
			[]string{"AWS_ACCESS_KEY_ID=" + m.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.SecretKey},
			"--storage", "s3://"+m.Bucket+"/e2e?endpoint="+m.Endpoint+"&tls=false")
		testServerKill9(t, srv, tern.LogOptions{Mode: tern.ModeObject, SegmentBytes: 64 << 10, FlushInterval: 2 * time.Millisecond})
	})
}

func testServerKill9(t *testing.T, srv *server, opts tern.LogOptions) {
	ctx := deadline(t)
	// The subscriber gives up a second after the kill, rather than ride
	// through the restart (resume_test.go has that).
	c, err := tern.Open(ctx, tern.Options{Server: srv.addr, RetryTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.CreateLog(ctx, "kill", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateSubscription(ctx, "tail", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}

	w := startChild(t, "writer", "writer", "-server", srv.addr, "-log", "kill", "-window", "64")

	// consume receives and acknowledges entries until stop says so or the
	// subscription fails.
	var acked atomic.Int64 // the last offset consume acknowledged (or tried to), or -1
	acked.Store(-1)
	consume := func(s *tern.Subscriber, stop func(n int) bool) error {
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		for n := 1; ; n++ {
			e, err := s.Next(ctx)
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("w-%d", e.Offset); string(e.Payload) != want {
				return fmt.Errorf("subscription delivered %q at %d, want %q", e.Payload, e.Offset, want)
			}
			// Stored first: an Ack that fails may still have reached the
			// server.
			acked.Store(int64(e.Offset))
			if err := s.Ack(e.Offset); err != nil {
				return err
			}
			if stop(n) {
				return nil
			}
		}
	}

	// A first subscriber acknowledges 500 entries and closes, which commits
	// its cursor: the cursor can never be below that.
	s, err := l.Subscribe(ctx, "tail")
	if err != nil {
		t.Fatal(err)
	}
	if err := consume(s, func(n int) bool { return n == 500 }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	committed := tern.Offset(acked.Load() + 1)
	before, err := l.Subscription(ctx, "tail")
	if err != nil {
		t.Fatal(err)
	}
	if before.Cursor != committed {
		t.Fatalf("after Close the subscription's cursor is %d, want %d", before.Cursor, committed)
	}

	// A second one consumes until the server dies.
	s, err = l.Subscribe(ctx, "tail")
	if err != nil {
		t.Fatal(err)
	}
	var consumed atomic.Int64
	consumerDone := make(chan error, 1)
	go func() {
		consumerDone <- consume(s, func(n int) bool { consumed.Store(int64(n)); return false })
	}()
	started := time.Now()
	w.waitFor("3000 acknowledgements and a second of consumption", func(lines []string) bool {
		return countPrefix(lines, "ack ") >= 3000 && consumed.Load() >= 300 && time.Since(started) >= time.Second
	})

	srv.kill9()
	lines := w.waitFor("an error once the server is dead", func(lines []string) bool {
		return countPrefix(lines, "error ") > 0 || countPrefix(lines, "fenced ") > 0
	})
	w.kill()
	lines = w.lines()
	failure := lastLine(lines)
	if !strings.HasPrefix(failure, "error ") {
		t.Errorf("the writer failed with %q, want an error that is not ErrFenced", failure)
	}
	t.Logf("the writer failed with: %s", strings.TrimPrefix(failure, "error "))
	select {
	case err := <-consumerDone:
		if err == nil {
			t.Fatal("the subscriber stopped without an error")
		}
		t.Logf("the subscriber failed with: %v", err)
	case <-time.After(waitTimeout):
		t.Fatalf("the subscriber did not fail within %v of the server's death", waitTimeout)
	}
	lastAck := tern.Offset(acked.Load())
	acks := events(t, lines, "ack")

	srv.restart()
	c = openClient(t, srv.addr)
	ctx = deadline(t)
	l, err = c.OpenLog(ctx, "kill")
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entries := readAll(t, l, 0, info.End)
	// One writer, pipelining: the log is its entries in the order sent, each
	// acknowledged one among them, and perhaps some it was not told about.
	for i, e := range entries {
		if want := fmt.Sprintf("w-%d", i); string(e.Payload) != want {
			t.Fatalf("offset %d holds %q, want %q", i, e.Payload, want)
		}
	}
	for _, a := range acks {
		if int(a.off) >= len(entries) {
			t.Fatalf("acknowledged offset %d (%q) is beyond the log's end %d after the restart", a.off, a.payload, info.End)
		}
		if got := string(entries[a.off].Payload); got != a.payload {
			t.Fatalf("acknowledged offset %d holds %q, want %q", a.off, got, a.payload)
		}
	}

	sub, err := l.Subscription(ctx, "tail")
	if err != nil {
		t.Fatal(err)
	}
	if sub.Cursor < committed || sub.Cursor > lastAck+1 {
		t.Fatalf("after the restart the subscription's cursor is %d, want between %d (committed by Close before the kill) and %d (after the last acknowledgement)", sub.Cursor, committed, lastAck+1)
	}
	nw, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	off, err := nw.Append(ctx, tern.Entry{Payload: []byte("after restart")})
	if err != nil {
		t.Fatal(err)
	}
	if off != info.End {
		t.Fatalf("the first append after the restart got offset %d, want the end %d", off, info.End)
	}
	if got := readAll(t, l, off, off+1); string(got[0].Payload) != "after restart" {
		t.Fatalf("read %q at %d after the restart", got[0].Payload, off)
	}
	// The entry appended above makes sure there is one to deliver.
	s, err = l.Subscribe(ctx, "tail")
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.Offset != sub.Cursor {
		t.Fatalf("the subscription resumed at %d, want its cursor %d", e.Offset, sub.Cursor)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d appends acknowledged before the kill, %d entries after the restart; subscription cursor %d (committed %d, last acknowledgement %d)",
		len(acks), info.End, sub.Cursor, committed, lastAck)
}
