package server

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ternwal/tern/internal/meta"
)

// A server exports its etcd's state, and its quota is the one configured.
func TestEtcdMetrics(t *testing.T) {
	const quota = 64 << 20
	s, err := Start(t.Context(), Config{Data: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", EtcdRoot: "/tern/", EtcdQuotaBytes: quota})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	code, body := get(t, "http://"+s.HTTPAddr().String()+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		"tern_etcd_up 1\n",
		`tern_etcd_alarm{type="NOSPACE"} 0` + "\n",
		`tern_etcd_alarm{type="CORRUPT"} 0` + "\n",
		"tern_etcd_quota_bytes 6.7108864e+07\n",
		"tern_etcd_db_size_bytes ",
		"tern_etcd_db_size_in_use_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
}

// A node's lost lease fails /readyz; a standalone server has none to lose.
func TestLeaseCheck(t *testing.T) {
	if fail, _ := leaseCheck(nil, "")(t.Context()); fail != "" {
		t.Errorf("standalone: %q", fail)
	}
	lost := make(chan struct{})
	c := leaseCheck(lost, "n1")
	if fail, _ := c(t.Context()); fail != "" {
		t.Errorf("a node holding its lease: %q", fail)
	}
	close(lost)
	if fail, _ := c(t.Context()); !strings.Contains(fail, "node n1 lost its cluster lease") {
		t.Errorf("a node that lost its lease: %q", fail)
	}
}

// EtcdHealth's problem names the alarm and what to do.
func TestEtcdProblem(t *testing.T) {
	if p := (meta.EtcdHealth{}).Problem(); p != "" {
		t.Errorf("no alarm: %q", p)
	}
	p := meta.EtcdHealth{Alarms: []string{"CORRUPT", "NOSPACE"}}.Problem()
	for _, want := range []string{"etcd alarm NOSPACE", "--etcd-quota", "etcd alarm CORRUPT", "snapshot"} {
		if !strings.Contains(p, want) {
			t.Errorf("problem %q does not say %q", p, want)
		}
	}
}

// The server warns at start when an external etcd's auto-compaction looks
// off, and not once it has compacted.
func TestWarnUncompacted(t *testing.T) {
	srv, err := meta.StartEtcd(t.Context(), t.TempDir(), nil) // compacts after 5 minutes
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i <= meta.UncompactedRevisions; i += 8 {
				if _, err := cli.Put(t.Context(), "k", "v"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	warned := func() string {
		var logs strings.Builder
		warnUncompacted(t.Context(), cli, srv.Endpoints(), slog.New(slog.NewTextHandler(&logs, nil)))
		return logs.String()
	}
	if logs := warned(); !strings.Contains(logs, "auto-compaction looks off") || !strings.Contains(logs, "--auto-compaction-retention") {
		t.Errorf("no warning about an uncompacted etcd; logged:\n%s", logs)
	}
	resp, err := cli.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(t.Context(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if logs := warned(); logs != "" {
		t.Errorf("a warning about a compacted etcd:\n%s", logs)
	}
}
