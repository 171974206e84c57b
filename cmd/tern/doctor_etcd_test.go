package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ternwal/tern/internal/meta"
)

// tern doctor etcd:// reads an etcd's state: a healthy one passes, one with
// the NOSPACE alarm raised fails naming it, and an endpoint nothing listens
// on is an error that says what to check.
func TestDoctorEtcd(t *testing.T) {
	srv, err := meta.StartEtcdWith(t.Context(), t.TempDir(), meta.EmbedOptions{QuotaBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	target := "etcd://" + strings.Join(srv.Endpoints(), ",")
	names := []string{"etcd alarms", "etcd auto-compaction", "etcd size against quota", "etcd free in file"}

	report := func(wantCode int) doctorReport {
		t.Helper()
		r := ternIn(t, t.TempDir(), "", "doctor", "--json", target)
		if r.code != wantCode {
			t.Fatalf("tern doctor %s: exit %d, want %d\nstdout: %s\nstderr: %s", target, r.code, wantCode, r.stdout, r.stderr)
		}
		var rep doctorReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("--json printed no report: %v\n%s", err, r.stdout)
		}
		if len(rep.Checks) != len(names) {
			t.Fatalf("checks %+v, want %q", rep.Checks, names)
		}
		for i, c := range rep.Checks {
			if c.Name != names[i] || c.Figure == "" || c.Threshold == "" || c.Result.System != "etcd" {
				t.Errorf("check %d: %+v, want %q", i, c, names[i])
			}
		}
		return rep
	}
	rep := report(0)
	for _, c := range rep.Checks {
		if c.Verdict != "ok" {
			t.Errorf("a fresh etcd: %+v, want ok", c)
		}
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := 0; ; i++ {
		_, err := cli.Put(t.Context(), fmt.Sprint("/fill/", i), strings.Repeat("x", 1<<20))
		if errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		if err != nil || i > 64 {
			t.Fatalf("filling etcd: put %d: %v", i, err)
		}
	}
	rep = report(1)
	if c := rep.Checks[0]; c.Verdict != "FAIL" || c.Figure != "NOSPACE" {
		t.Errorf("etcd at its quota: %+v, want NOSPACE, FAIL", c)
	}
	if c := rep.Checks[2]; c.Verdict == "ok" {
		t.Errorf("etcd at its quota: %+v, want warn or FAIL", c)
	}

	r := ternIn(t, t.TempDir(), "", "doctor", "etcd://127.0.0.1:1")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach etcd at 127.0.0.1:1") {
		t.Errorf("tern doctor on a dead endpoint: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = ternIn(t, t.TempDir(), "", "doctor", "etcd://nohost")
	if r.code != 2 || !strings.Contains(r.stderr, `endpoint "nohost"`) {
		t.Errorf("tern doctor etcd://nohost: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
