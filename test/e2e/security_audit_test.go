package e2e

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
)

// audit is what an audit line says of a call.
type audit struct{ principal, op, log, outcome string }

// audits parses the lines msg=audit of a server's stderr (slog's text
// format: key=value, the value quoted when it needs it).
func audits(t *testing.T, stderr string) []audit {
	t.Helper()
	var out []audit
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, " msg=audit ") {
			continue
		}
		kv := map[string]string{}
		for rest := line; rest != ""; {
			rest = strings.TrimLeft(rest, " ")
			key, after, ok := strings.Cut(rest, "=")
			if !ok {
				break
			}
			var value string
			if strings.HasPrefix(after, `"`) {
				q, err := strconv.QuotedPrefix(after)
				if err != nil {
					t.Fatalf("audit line %q: %v", line, err)
				}
				value, _ = strconv.Unquote(q)
				after = after[len(q):]
			} else {
				value, after, _ = strings.Cut(after, " ")
				after = " " + after
			}
			kv[key], rest = value, after
		}
		out = append(out, audit{kv["principal"], kv["op"], kv["log"], kv["outcome"]})
	}
	return out
}

func countAudits(as []audit, want audit) int {
	n := 0
	for _, a := range as {
		if a == want {
			n++
		}
	}
	return n
}

// The server's log has one audit line, with principal, operation, log and
// outcome, for each admin call (allowed or not) and each refused call, and
// none for an allowed read; /metrics counts them in
// tern_audit_events_total.
func TestAuditLog(t *testing.T) {
	authFile, tokens := writeAuthFile(t,
		principal{name: "ops", grants: [][2]string{{"", "read, append, subscribe, admin"}}},
		principal{name: "reader", grants: [][2]string{{"a/", "read"}}})
	srv := startSecure(t, nil, false, "--auth", authFile)
	ctx := deadline(t)
	ops := mustOpenAs(t, srv.addr, tokens["ops"], nil)
	reader := mustOpenAs(t, srv.addr, tokens["reader"], nil)

	for _, name := range []string{"a/1", "a/2"} {
		if _, err := ops.CreateLog(ctx, name, tern.LogOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := mustOpenLog(t, ops, "a/2").OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, w, "x", "y")
	if err := mustOpenLog(t, ops, "a/2").Truncate(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := ops.DeleteLog(ctx, "a/1"); err != nil {
		t.Fatal(err)
	}
	if err := ops.DeleteLog(ctx, "a/none"); !errors.Is(err, tern.ErrNotFound) {
		t.Fatalf("delete a/none: %v", err)
	}
	if err := reader.DeleteLog(ctx, "a/2"); !errors.Is(err, tern.ErrPermissionDenied) {
		t.Fatalf("reader's delete: %v", err)
	}
	if _, err := reader.CreateLog(ctx, "a/3", tern.LogOptions{}); !errors.Is(err, tern.ErrPermissionDenied) {
		t.Fatalf("reader's create: %v", err)
	}
	if _, err := mustOpenLog(t, reader, "a/2").OpenWriter(ctx); !errors.Is(err, tern.ErrPermissionDenied) {
		t.Fatalf("reader's writer: %v", err)
	}
	if es := readAll(t, mustOpenLog(t, reader, "a/2"), 1, 2); string(es[0].Payload) != "y" {
		t.Fatalf("reader's read: %q", es[0].Payload)
	}
	for _, token := range []string{"", "0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"} {
		if err := rawAppend(ctx, srv.addr, token, nil); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("unary Append with token %q: %v", token, err)
		}
	}

	as := audits(t, srv.stderr.String())
	for _, want := range []audit{
		{"ops", "CreateLog", "a/1", "OK"},
		{"ops", "CreateLog", "a/2", "OK"},
		{"ops", "TruncateLog", "a/2", "OK"},
		{"ops", "DeleteLog", "a/1", "OK"},
		{"ops", "DeleteLog", "a/none", "NotFound"},
		{"reader", "DeleteLog", "a/2", "PermissionDenied"},
		{"reader", "CreateLog", "a/3", "PermissionDenied"},
		{"reader", "OpenWriter", "a/2", "PermissionDenied"},
		{"anonymous", "Append", "", "Unauthenticated"},
		{"unknown token", "Append", "", "Unauthenticated"},
	} {
		if n := countAudits(as, want); n != 1 {
			t.Errorf("%d audit lines %+v, want 1", n, want)
		}
	}
	for _, a := range as {
		if a.principal == "reader" && a.outcome == "OK" || a.op == "Read" || a.op == "DescribeLog" {
			t.Errorf("audit line %+v: allowed calls other than admin ones are not audited", a)
		}
	}
	if t.Failed() {
		t.Logf("audit lines: %+v", as)
	}

	code, body := srv.get("/metrics", tokens["reader"])
	if code != 200 {
		t.Fatalf("/metrics with a token: %d\n%s", code, body)
	}
	for series, want := range map[string]float64{
		`tern_audit_events_total{operation="CreateLog",outcome="OK"}`:                2,
		`tern_audit_events_total{operation="DeleteLog",outcome="OK"}`:                1,
		`tern_audit_events_total{operation="DeleteLog",outcome="NotFound"}`:          1,
		`tern_audit_events_total{operation="TruncateLog",outcome="OK"}`:              1,
		`tern_audit_events_total{operation="DeleteLog",outcome="PermissionDenied"}`:  1,
		`tern_audit_events_total{operation="CreateLog",outcome="PermissionDenied"}`:  1,
		`tern_audit_events_total{operation="OpenWriter",outcome="PermissionDenied"}`: 1,
		`tern_audit_events_total{operation="Append",outcome="Unauthenticated"}`:      2,
	} {
		if got := metric(body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if code, _ := srv.get("/metrics", ""); code != 401 {
		t.Errorf("/metrics without a token: %d, want 401", code)
	}
}

// Quotas through tern serve --auth: past the logs quota CreateLog fails
// with ErrLimit (RESOURCE_EXHAUSTED) naming it, and works again once a log
// is deleted; an append larger than the burst fails naming
// append_burst_bytes, appends beyond the rate fail until the bucket
// refills; a second concurrent Subscribe fails past the subscriptions
// quota, and works once the first is closed. Each refusal is audited.
func TestQuotas(t *testing.T) {
	authFile, tokens := writeAuthFile(t, principal{name: "q", grants: [][2]string{{"q/", "read, append, subscribe, admin"}},
		quotas: "{logs: 2, append_bytes_per_second: 1KiB, append_burst_bytes: 4KiB, subscriptions: 1}"})
	srv := startSecure(t, nil, false, "--auth", authFile)
	ctx := deadline(t)
	c := mustOpenAs(t, srv.addr, tokens["q"], nil)

	for _, name := range []string{"q/1", "q/2"} {
		if _, err := c.CreateLog(ctx, name, tern.LogOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.CreateLog(ctx, "q/3", tern.LogOptions{})
	if !errors.Is(err, tern.ErrLimit) || !strings.Contains(err.Error(), "logs") || !strings.Contains(err.Error(), `"q"`) {
		t.Fatalf("a create past the logs quota: %v, want ErrLimit naming the quota logs and the principal", err)
	}
	if err := c.DeleteLog(ctx, "q/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLog(ctx, "q/3", tern.LogOptions{}); err != nil {
		t.Fatalf("a create under the logs quota again: %v", err)
	}

	l := mustOpenLog(t, c, "q/2")
	appendOne := func(size int) error {
		w, err := l.OpenWriter(ctx)
		if err != nil {
			return err
		}
		defer w.Close()
		_, err = w.Append(ctx, tern.Entry{Payload: bytes.Repeat([]byte("z"), size)})
		return err
	}
	if err := appendOne(5 << 10); !errors.Is(err, tern.ErrLimit) || !strings.Contains(err.Error(), "append_burst_bytes") {
		t.Fatalf("an append larger than the burst: %v, want ErrLimit naming append_burst_bytes", err)
	}
	if err := appendOne(4 << 10); err != nil {
		t.Fatalf("an append of the burst: %v", err)
	}
	if err := appendOne(4 << 10); !errors.Is(err, tern.ErrLimit) || !strings.Contains(err.Error(), "append_bytes_per_second") {
		t.Fatalf("an append past the rate: %v, want ErrLimit naming append_bytes_per_second", err)
	}
	eventually(t, "an append once the bucket refilled", func() bool { return appendOne(4<<10) == nil })

	for _, name := range []string{"s1", "s2"} {
		if _, err := l.CreateSubscription(ctx, name, tern.SubOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s1, err := l.Subscribe(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Subscribe(ctx, "s2"); !errors.Is(err, tern.ErrLimit) || !strings.Contains(err.Error(), "subscriptions") {
		t.Fatalf("a second Subscribe past the subscriptions quota: %v, want ErrLimit naming subscriptions", err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	var s2 *tern.Subscriber
	eventually(t, "a Subscribe once the first was closed", func() bool {
		s2, err = l.Subscribe(ctx, "s2")
		return err == nil
	})
	defer s2.Close()
	if e, err := s2.Next(ctx); err != nil || len(e.Payload) != 4<<10 {
		t.Fatalf("the second subscriber: %d bytes, %v", len(e.Payload), err)
	}

	as := audits(t, srv.stderr.String())
	for _, want := range []audit{
		{"q", "CreateLog", "q/3", "ResourceExhausted"},
		{"q", "CreateLog", "q/3", "OK"},
		{"q", "Subscribe", "q/2", "ResourceExhausted"},
	} {
		if n := countAudits(as, want); n != 1 {
			t.Errorf("%d audit lines %+v, want 1", n, want)
		}
	}
	if n := countAudits(as, audit{"q", "AppendStream", "q/2", "ResourceExhausted"}); n < 2 {
		t.Errorf("%d audit lines of appends over the quota, want 2 at least", n)
	}
}
