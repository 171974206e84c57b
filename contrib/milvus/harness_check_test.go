package milvus

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/miniotest"
)

// checkWriteThrough appends count entries with a thin client's writer, five
// in flight, to a new log named name (mode mode) while d disturbs the
// servers, and checks that every entry was acknowledged once, at its
// offset, and reads back once.
func checkWriteThrough(t *testing.T, addrs []string, name string, mode client.Mode, count int, disturb func() *disturbance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := client.Open(ctx, client.Options{Server: addrs[0], Nodes: addrs[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.CreateLog(ctx, name, client.LogOptions{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx, client.WithEpoch(1))
	if err != nil {
		t.Fatal(err)
	}
	d := disturb()
	inFlight := make(chan *client.Pending, 4)
	go func() {
		defer close(inFlight)
		for i := range count {
			inFlight <- w.AppendAsync(client.Entry{Payload: []byte(strconv.Itoa(i))})
		}
	}()
	i := 0
	for p := range inFlight {
		off, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if off != client.Offset(i) {
			t.Fatalf("append %d acknowledged at offset %d", i, off)
		}
		i++
	}
	d.finish(t)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := l.OpenReader(ctx, client.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range count {
		e, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if e.Offset != client.Offset(i) || string(e.Payload) != strconv.Itoa(i) {
			t.Fatalf("read offset %d payload %q, want offset %d payload %d", e.Offset, e.Payload, i, i)
		}
	}
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.End != client.Offset(count) {
		t.Fatalf("the log ends at %d after %d appends", info.End, count)
	}
}

// TestHarnessRestart checks the harness with the thin client: a standalone
// server on MinIO, restarted with SIGTERM while a writer appends.
func TestHarnessRestart(t *testing.T) {
	m := miniotest.Start(t)
	s := startTernServer(t, "tern serve", t.TempDir(), minioEnv(m), "--storage", storageURL(m, "standalone"))
	for _, mode := range []client.Mode{client.ModeLocal, client.ModeObject} {
		t.Run(string(mode), func(t *testing.T) {
			name := "harness-" + string(mode)
			checkWriteThrough(t, []string{s.addr}, name, mode, 1000, func() *disturbance {
				return disturbAfter(t, []string{s.addr}, name, 300, "restart", restartDuring(s))
			})
		})
	}
}

// TestHarnessOwnerKill checks the harness with the thin client: a quorum
// log on three nodes whose owner is killed with -9 while a writer appends.
func TestHarnessOwnerKill(t *testing.T) {
	c := startTernCluster(t, 3)
	start := time.Now()
	checkWriteThrough(t, c.addrs(), "harness-quorum", client.ModeQuorum, 1000, func() *disturbance {
		return disturbAfter(t, c.addrs(), "harness-quorum", 300, "owner kill", killOwnerDuring(t, c))
	})
	t.Logf("%v", time.Since(start))
}
