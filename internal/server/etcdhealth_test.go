package server

import (
	"net/http"
	"strings"
	"testing"

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
