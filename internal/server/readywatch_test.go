package server

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The server logs one line per change of what /readyz answers, not one per
// look: ready at start, not ready with the reason, ready again, and a
// change of the notes (a degraded log) alone.
func TestReadinessWatchLogsChanges(t *testing.T) {
	var fail, note atomic.Value
	fail.Store("")
	note.Store("")
	var asked atomic.Int64
	r := &readiness{}
	r.set("", func(context.Context) (string, []string) {
		asked.Add(1)
		var notes []string
		if n := note.Load().(string); n != "" {
			notes = append(notes, n)
		}
		return fail.Load().(string), notes
	})
	var out logBuffer
	logger := slog.New(slog.NewTextHandler(&out, nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.watch(ctx, logger, time.Millisecond) }()
	defer func() { cancel(); <-done }()

	// settle waits until the watcher has looked a few more times, so every
	// change so far is logged.
	settle := func() {
		t.Helper()
		n := asked.Load()
		for asked.Load() < n+3 {
			select {
			case <-done:
				t.Fatal("the watcher stopped")
			case <-time.After(time.Millisecond):
			}
		}
	}
	settle()
	fail.Store("metadata store does not answer: timeout")
	settle()
	settle()
	fail.Store("")
	settle()
	note.Store(`degraded log "a": damaged`)
	settle()

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"msg=ready", "msg=\"not ready\"", "msg=ready", "msg=\"readiness notes changed\""}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d (one per change):\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s\nwant %s", i+1, lines[i], w)
		}
	}
	if !strings.Contains(lines[1], "metadata store does not answer") {
		t.Errorf("the not ready line does not say why: %s", lines[1])
	}
}
