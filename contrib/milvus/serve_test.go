//go:build test

package milvus

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"

	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/miniotest"
)

// frameworkMessages is how many messages Milvus's framework appends to each
// of its three channels in each of its three terms.
const frameworkMessages = 1000

// frameworkChannel is in the name of every channel Milvus's framework
// opens ("test_<i>_<random>"), and so of their logs.
const frameworkChannel = "test_"

// disturbPoints are the sizes of a channel's log (of the 3,001 messages the
// framework appends to each) at which a test disturbs the servers: in the
// first term and in the third.
var disturbPoints = []client.Offset{frameworkMessages / 2, 5 * frameworkMessages / 2}

// runTimeout bounds a test that runs the framework once: it takes seconds.
const runTimeout = 4 * time.Minute

// TestFrameworkServeObject runs Milvus's WAL framework against a standalone
// tern serve whose logs are in object mode on MinIO.
func TestFrameworkServeObject(t *testing.T) {
	m := miniotest.Start(t)
	s := startTernServer(t, "tern serve", t.TempDir(), minioEnv(m), "--storage", storageURL(m, "standalone"))
	watchdog(t, runTimeout, s)
	walimpls.NewWALImplsTestFramework(t, frameworkMessages, NewBuilder(Config{Nodes: []string{s.addr}, Mode: "object"})).Run()
	checkChannelLogs(t, []string{s.addr}, client.ModeObject)
}

// TestFrameworkServeRestart runs Milvus's WAL framework against a
// standalone tern serve (its default mode: local) that is stopped with
// SIGTERM and started again on the same address and data in the middle of
// the run, twice: once a channel's log has 500 messages, and 2,500.
func TestFrameworkServeRestart(t *testing.T) {
	s := startTernServer(t, "tern serve", t.TempDir(), nil)
	watchdog(t, runTimeout, s)
	addrs := []string{s.addr}
	d := disturbAt(t, addrs, frameworkChannel, "restart", restartDuring(s), disturbPoints...)
	walimpls.NewWALImplsTestFramework(t, frameworkMessages, NewBuilder(Config{Nodes: addrs})).Run()
	d.finish(t)
	checkChannelLogs(t, addrs, client.ModeLocal)
}

// checkChannelLogs checks, through a thin client of addrs, that the
// framework's three channels are logs of the mode wanted, each holding the
// messages of its three terms and the one its truncation test appends,
// each once.
func checkChannelLogs(t *testing.T, addrs []string, want client.Mode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := client.Open(ctx, client.Options{Server: addrs[0], Nodes: addrs[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	infos, err := c.ListLogs(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, info := range infos {
		if !strings.Contains(info.Name, frameworkChannel) {
			continue
		}
		n++
		l, err := c.OpenLog(ctx, info.Name)
		if err != nil {
			t.Fatal(err)
		}
		if info, err = l.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if info.Options.Mode != want {
			t.Errorf("log %s is in mode %q, want %q", info.Name, info.Options.Mode, want)
		}
		if want := client.Offset(3*frameworkMessages + 1); info.End != want {
			t.Errorf("log %s ends at %d, want %d: one entry for each message appended, once", info.Name, info.End, want)
		}
		t.Logf("log %s: mode %s, [%d, %d), epoch %d", info.Name, info.Options.Mode, info.Start, info.End, info.Epoch)
	}
	if n != 3 {
		t.Errorf("%d logs are named *%s*, want the framework's 3 channels", n, frameworkChannel)
	}
}
