package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// childEnv names the role a re-executed test binary plays instead of running
// the tests.
const childEnv = "TERN_E2E_CHILD"

// raceEnv, set to 1, builds the server with the race detector: slower, and
// worth it when looking for races in the server.
const raceEnv = "TERN_E2E_RACE"

// childLifetime bounds a child's life, so that no child outlives a test
// binary that was killed.
const childLifetime = 2 * time.Minute

// ternBin is the tern binary TestMain builds.
var ternBin string

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role, os.Args[1:]))
	}
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tern-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ternBin = filepath.Join(dir, "tern")
	args := []string{"build", "-o", ternBin}
	if os.Getenv(raceEnv) == "1" {
		args = append(args, "-race")
	}
	args = append(args, "github.com/ternwal/tern/cmd/tern")
	// go test puts the go command that runs it first in PATH.
	cmd := exec.Command("go", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	return m.Run()
}

// runChild plays role with args and returns the exit code.
func runChild(role string, args []string) int {
	if role == "etcd" {
		// As long as the test needs it: Pdeathsig ends it with the test
		// binary.
		return etcdChild(args)
	}
	time.AfterFunc(childLifetime, func() {
		say("error the child ran for %v; exiting", childLifetime)
		os.Exit(3)
	})
	ctx, cancel := context.WithTimeout(context.Background(), childLifetime)
	defer cancel()
	switch role {
	case "writer":
		return writerChild(ctx, args)
	case "consumer":
		return consumerChild(ctx, args)
	}
	say("error unknown role %q", role)
	return 2
}

// say prints one line on stdout at once (os.Stdout is not buffered).
func say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	fmt.Fprintln(os.Stdout, strings.ReplaceAll(line, "\n", " "))
}

// writerChild opens a writer (fencing the older ones) and appends
// "<prefix>-<n>" for n from 0, about -window appends in flight, -count of them or
// until an append fails. It prints "ack" for each acknowledgement, in order,
// and "fenced" or "error" for the first failure, then exits 0.
func writerChild(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("writer", flag.ContinueOnError)
	server := fs.String("server", "", "the server's gRPC address")
	logName := fs.String("log", "", "the log")
	prefix := fs.String("prefix", "w", "the payloads' prefix")
	count := fs.Int("count", 0, "how many entries to append; 0: until an append fails")
	window := fs.Int("window", 1, "how many appends may be in flight")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := tern.Open(ctx, tern.Options{Server: *server})
	if err != nil {
		say("error %v", err)
		return 1
	}
	l, err := c.OpenLog(ctx, *logName)
	if err != nil {
		say("error %v", err)
		return 1
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		say("error %v", err)
		return 1
	}
	say("open %d", w.Epoch())

	type queued struct {
		p       *tern.Pending
		payload string
	}
	// The producer blocks when the channel is full, until the oldest append
	// is answered: about window appends are in flight.
	q := make(chan queued, max(*window-1, 0))
	go func() {
		defer close(q)
		for n := 0; *count == 0 || n < *count; n++ {
			p := fmt.Sprintf("%s-%d", *prefix, n)
			q <- queued{w.AppendAsync(tern.Entry{Payload: []byte(p)}), p}
		}
	}()
	for a := range q {
		off, err := a.p.Wait(ctx)
		switch {
		case errors.Is(err, tern.ErrFenced):
			say("fenced %v", err)
			return 0
		case err != nil:
			say("error %v", err)
			return 0
		}
		say("ack %d %s", off, a.payload)
	}
	if err := w.Close(); err != nil {
		say("error close writer: %v", err)
		return 1
	}
	if err := c.Close(); err != nil {
		say("error close client: %v", err)
		return 1
	}
	say("done")
	return 0
}

// consumerChild subscribes and, for each entry, prints "got", waits -delay
// and acknowledges it, until it has acknowledged -last; then it closes the
// subscriber (which commits the cursor) and prints "done".
func consumerChild(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	server := fs.String("server", "", "the server's gRPC address")
	logName := fs.String("log", "", "the log")
	subName := fs.String("sub", "", "the subscription")
	last := fs.Uint64("last", 0, "the offset after whose acknowledgement to stop")
	delay := fs.Duration("delay", 0, "how long to wait between printing an entry and acknowledging it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := tern.Open(ctx, tern.Options{Server: *server})
	if err != nil {
		say("error %v", err)
		return 1
	}
	l, err := c.OpenLog(ctx, *logName)
	if err != nil {
		say("error %v", err)
		return 1
	}
	s, err := l.Subscribe(ctx, *subName)
	if err != nil {
		say("error %v", err)
		return 1
	}
	for {
		e, err := s.Next(ctx)
		if err != nil {
			say("error %v", err)
			return 1
		}
		say("got %d %s", e.Offset, e.Payload)
		time.Sleep(*delay)
		if err := s.Ack(e.Offset); err != nil {
			say("error %v", err)
			return 1
		}
		if uint64(e.Offset) >= *last {
			break
		}
	}
	if err := s.Close(); err != nil {
		say("error close subscriber: %v", err)
		return 1
	}
	if err := c.Close(); err != nil {
		say("error close client: %v", err)
		return 1
	}
	say("done")
	return 0
}
