package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// Readers and subscribers of a server's logs ride through its restart:
// stopped with SIGTERM, or killed with SIGKILL, and started again on the
// same directory and address while a writer appends before and after.
// A reader returns every entry once, in order; one opened FromEnd before
// the restart, which had returned nothing, returns the entries appended
// while it was away; a subscriber returns every entry at least once, and
// starts again no lower than the cursor committed before a SIGTERM.
func TestReadersResumeAcrossRestart(t *testing.T) {
	for _, how := range []string{"sigterm", "kill9"} {
		t.Run(how, func(t *testing.T) {
			srv, l := startWithLog(t, "resume", tern.LogOptions{})
			ctx := deadline(t)
			if _, err := l.CreateSubscription(ctx, "s", tern.SubOptions{}); err != nil {
				t.Fatal(err)
			}
			const before, after = 100, 100
			appendRange(t, l, 0, before)

			all, err := l.OpenReader(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer all.Close()
			fromEnd, err := l.OpenReader(ctx, tern.FromEnd)
			if err != nil {
				t.Fatal(err)
			}
			defer fromEnd.Close()
			sub, err := l.Subscribe(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()

			var mu sync.Mutex
			var read, delivered []tern.Offset
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			wg.Add(2)
			go func() { // every entry once, in order
				defer wg.Done()
				for next := tern.Offset(0); next < before+after; {
					e, err := all.Next(ctx)
					if err != nil {
						errs <- fmt.Errorf("reader at %d: %w", next, err)
						return
					}
					if e.Offset != next || string(e.Payload) != fmt.Sprintf("e-%d", next) {
						errs <- fmt.Errorf("reader returned offset %d (%q), want %d", e.Offset, e.Payload, next)
						return
					}
					next++
					mu.Lock()
					read = append(read, e.Offset)
					mu.Unlock()
				}
			}()
			go func() { // at least once, acknowledging each
				defer wg.Done()
				for {
					e, err := sub.Next(ctx)
					if err != nil {
						errs <- fmt.Errorf("subscriber: %w", err)
						return
					}
					if string(e.Payload) != fmt.Sprintf("e-%d", e.Offset) {
						errs <- fmt.Errorf("subscriber got %q at %d", e.Payload, e.Offset)
						return
					}
					mu.Lock()
					delivered = append(delivered, e.Offset)
					mu.Unlock()
					if err := sub.Ack(e.Offset); err != nil {
						errs <- fmt.Errorf("subscriber ack %d: %w", e.Offset, err)
						return
					}
					if e.Offset == before+after-1 {
						return
					}
				}
			}()
			waitUntil(t, "the reader and the subscriber at the tail", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(read) == before && len(delivered) >= before
			})
			var floor tern.Offset // the cursor the restart must not go below
			if how == "sigterm" {
				// The subscriber acknowledged everything; a stopping server
				// commits what it was told.
				waitUntil(t, "the acknowledgements on the server", func() bool {
					info, err := l.Subscription(ctx, "s")
					return err == nil && info.Cursor == before
				})
				floor = before
			}
			srv.down(how)
			mu.Lock()
			gone := len(delivered)
			mu.Unlock()
			srv.restart()

			// A new writer: the writer's session across restarts is another
			// test's.
			appendRange(t, l, before, before+after)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for i, off := range delivered[gone:] {
				if i == 0 && off < floor {
					t.Fatalf("the subscriber started again at %d after the restart, below the cursor %d committed before it", off, floor)
				}
			}
			seen := make(map[tern.Offset]bool)
			for _, off := range delivered {
				seen[off] = true
			}
			for off := range tern.Offset(before + after) {
				if !seen[off] {
					t.Fatalf("the subscriber never delivered offset %d", off)
				}
			}
			t.Logf("the subscriber delivered %d entries for %d (%d again)", len(delivered), before+after, len(delivered)-before-after)

			for want := tern.Offset(before); want < before+after; want++ {
				e, err := fromEnd.Next(ctx)
				if err != nil {
					t.Fatalf("reader opened FromEnd, at %d: %v", want, err)
				}
				if e.Offset != want {
					t.Fatalf("reader opened FromEnd before the restart returned offset %d, want %d", e.Offset, want)
				}
			}
		})
	}
}

// `tern read --follow` and `tern sub consume --follow` ride through a
// server's restart: they say on stderr that they lost the server and that
// they are back, and go on; read prints each entry once, in order; consume
// prints each at least once.
func TestFollowAcrossRestart(t *testing.T) {
	for _, how := range []string{"sigterm", "kill9"} {
		t.Run(how, func(t *testing.T) {
			srv, l := startWithLog(t, "follow", tern.LogOptions{})
			ctx := deadline(t)
			if _, err := l.CreateSubscription(ctx, "s", tern.SubOptions{}); err != nil {
				t.Fatal(err)
			}
			const before, after = 50, 50
			appendRange(t, l, 0, before)
			read := startTern(t, "tern read", "--server", srv.addr, "read", "follow", "--follow")
			consume := startTern(t, "tern sub consume", "--server", srv.addr, "sub", "consume", "follow", "s", "--follow")
			for _, p := range []*child{read, consume} {
				p.waitFor(fmt.Sprintf("%d entries", before), func(lines []string) bool { return len(lines) >= before })
			}
			srv.down(how)
			srv.restart()
			appendRange(t, l, before, before+after)
			lines := read.waitFor(fmt.Sprintf("%d entries", before+after), func(lines []string) bool { return len(lines) >= before+after })
			consumed := consume.waitFor(fmt.Sprintf("entry e-%d", before+after-1), func(lines []string) bool {
				return len(lines) > 0 && lines[len(lines)-1] == fmt.Sprintf("e-%d", before+after-1)
			})
			for _, p := range []*child{read, consume} {
				if p.exited() {
					t.Fatalf("%s exited (%v)", p.name, p.err)
				}
				p.cmd.Process.Signal(syscall.SIGINT)
				p.wait()
			}
			lines = read.lines()
			if len(lines) != before+after {
				t.Fatalf("tern read --follow printed %d lines, want %d", len(lines), before+after)
			}
			for i, line := range lines {
				if want := fmt.Sprintf("e-%d", i); line != want {
					t.Fatalf("tern read --follow printed %q at line %d, want %q", line, i, want)
				}
			}
			seen := make(map[string]bool)
			for _, line := range consumed {
				seen[line] = true
			}
			for i := range before + after {
				if !seen[fmt.Sprintf("e-%d", i)] {
					t.Fatalf("tern sub consume --follow never printed e-%d", i)
				}
			}
			for _, p := range []*child{read, consume} {
				stderr := p.errs.String()
				if !strings.Contains(stderr, "tern: lost the server at "+srv.addr+", reconnecting") || !strings.Contains(stderr, "tern: reconnected to the server at "+srv.addr) {
					t.Fatalf("%s said on stderr:\n%s\nwant that it lost the server and reconnected", p.name, stderr)
				}
			}
		})
	}
}

// A call on a server that is down fails once the client's RetryTimeout has
// passed, before its ctx ends, and says it cannot reach the server.
func TestCallFailsAfterRetryTimeout(t *testing.T) {
	srv := startServer(t, t.TempDir())
	ctx := deadline(t)
	c, err := tern.Open(ctx, tern.Options{Server: srv.addr, RetryTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateLog(ctx, "down", tern.LogOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.stop()
	_, err = c.OpenLog(ctx, "down")
	if err == nil || !strings.Contains(err.Error(), "cannot reach the tern server at "+srv.addr) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenLog on a stopped server: %v, want that it cannot reach the tern server at %s", err, srv.addr)
	}
}

// appendRange appends entries "e-from" to "e-(end-1)" with a new writer, and
// requires their offsets.
func appendRange(t *testing.T, l *tern.Log, from, end int) {
	t.Helper()
	ctx := deadline(t)
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := from; i < end; i++ {
		off, err := w.Append(ctx, tern.Entry{Payload: fmt.Appendf(nil, "e-%d", i)})
		if err != nil {
			t.Fatalf("append e-%d: %v", i, err)
		}
		if off != tern.Offset(i) {
			t.Fatalf("e-%d appended at %d", i, off)
		}
	}
}

// waitUntil polls ok until it holds.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, waitTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startTern runs the tern binary with args as a child whose stdout lines
// and stderr the test reads; the test's cleanup kills it.
func startTern(t *testing.T, name string, args ...string) *child {
	t.Helper()
	return startCmd(t, name, exec.Command(ternBin, args...), false)
}

// A reader and a subscriber of a quorum log, through a client of a node
// that stays up, ride through the kill -9 of the log's owner: once another
// node serves the log, the reader returns the entries appended there after
// the last one it returned, and the subscriber delivers them.
func TestReadersFollowOwnerMove(t *testing.T) {
	c := startCluster(t, 4)
	ctx := deadline(t)
	first := openClient(t, c.nodes["n0"].addr)
	l, err := first.CreateLog(ctx, "moving", tern.LogOptions{Mode: tern.ModeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateSubscription(ctx, "s", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}
	const before, after = 50, 50
	appendRange(t, l, 0, before)
	dead := c.owner(t)
	entry := "n0"
	if entry == dead {
		entry = "n1"
	}
	cl := openClient(t, c.nodes[entry].addr)
	l, err = cl.OpenLog(ctx, "moving")
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.OpenReader(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := l.Subscribe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range before {
		if e, err := r.Next(ctx); err != nil || e.Offset != tern.Offset(i) {
			t.Fatalf("reader before the move: offset %d, %v; want %d", e.Offset, err, i)
		}
		e, err := s.Next(ctx)
		if err != nil || e.Offset != tern.Offset(i) {
			t.Fatalf("subscriber before the move: offset %d, %v; want %d", e.Offset, err, i)
		}
		if err := s.Ack(e.Offset); err != nil {
			t.Fatal(err)
		}
	}

	c.nodes[dead].kill9()
	t.Logf("log served by %s, killed; the client is of %s", dead, entry)
	appendRange(t, l, before, before+after) // once the log is served again
	t.Logf("then served by %s", c.ownerOtherThan(t, dead))
	for i := before; i < before+after; i++ {
		e, err := r.Next(ctx)
		if err != nil || e.Offset != tern.Offset(i) || string(e.Payload) != fmt.Sprintf("e-%d", i) {
			t.Fatalf("reader after the move: offset %d (%q), %v; want %d", e.Offset, e.Payload, err, i)
		}
	}
	for {
		e, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("subscriber after the move: %v", err)
		}
		if string(e.Payload) != fmt.Sprintf("e-%d", e.Offset) {
			t.Fatalf("subscriber after the move got %q at %d", e.Payload, e.Offset)
		}
		if e.Offset == before+after-1 {
			break
		}
	}
}
