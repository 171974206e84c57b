package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/ternpb"
	"github.com/ternwal/tern/internal/auth"
)

// testPrincipal is a principal of a test's auth file, with its token.
type testPrincipal struct {
	name, token, grants, quotas string
}

// policyOf parses an auth file of the principals, each with a token of its
// own.
func policyOf(t testing.TB, ps ...testPrincipal) *auth.Policy {
	t.Helper()
	var b strings.Builder
	b.WriteString("principals:\n")
	for _, p := range ps {
		h, err := auth.HashToken(p.token)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  - name: %s\n    token_hash: %q\n    grants: %s\n", p.name, h, p.grants)
		if p.quotas != "" {
			fmt.Fprintf(&b, "    quotas: %s\n", p.quotas)
		}
	}
	pol, err := auth.Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return pol
}

func token(name string) string { return name + "-token-0123456789abcdef" }

// as is ctx carrying p's token ("" for none).
func as(ctx context.Context, tok string) context.Context {
	if tok == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// logBuffer is a slog JSON handler's output, safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// audits returns the audit lines written so far.
func (l *logBuffer) audits(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "audit" {
			out = append(out, m)
		}
	}
	return out
}

// authCall is one call of the Tern API on the log "a/x", made as the
// caller of ctx; i makes the names of what it creates or deletes unique.
type authCall func(ctx context.Context, ts *testServer, i int) error

// authCalls calls every method of the Tern service. The logs a/x (with an
// entry and a writer at epoch), a/del-<i> and the subscriptions s and
// s-del-<i> exist.
func authCalls(epoch func() uint64) map[string]authCall {
	return map[string]authCall{
		"CreateLog": func(ctx context.Context, ts *testServer, i int) error {
			_, err := ts.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: fmt.Sprintf("a/new-%d", i)})
			return err
		},
		"DescribeLog": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: "a/x"})
			return err
		},
		"ListLogs": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.ListLogs(ctx, &ternpb.ListLogsRequest{Prefix: "a/"})
			return err
		},
		"DeleteLog": func(ctx context.Context, ts *testServer, i int) error {
			_, err := ts.api.DeleteLog(ctx, &ternpb.DeleteLogRequest{Name: fmt.Sprintf("a/del-%d", i)})
			return err
		},
		"TruncateLog": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.TruncateLog(ctx, &ternpb.TruncateLogRequest{Name: "a/x", Before: 0})
			return err
		},
		"RepairLog": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.RepairLog(ctx, &ternpb.RepairLogRequest{Name: "a/x"})
			return err
		},
		"OpenWriter": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "a/y"})
			return err
		},
		"CloseWriter": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.CloseWriter(ctx, &ternpb.CloseWriterRequest{Log: "a/y", Epoch: 1})
			return err
		},
		"Append": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.Append(ctx, &ternpb.AppendRequest{Log: "a/x", Epoch: epoch(), Entries: []*ternpb.Entry{{Payload: []byte("p")}}})
			return err
		},
		"AppendStream": func(ctx context.Context, ts *testServer, _ int) error {
			st, err := ts.api.AppendStream(ctx)
			if err != nil {
				return err
			}
			if err := st.Send(&ternpb.AppendStreamRequest{Log: "a/x", Epoch: epoch(), Batches: []*ternpb.Batch{{Entries: []*ternpb.Entry{{Payload: []byte("p")}}}}}); err != nil && !errors.Is(err, io.EOF) { // EOF: the server ended the stream, and Recv says why
				return err
			}
			_, err = st.Recv()
			st.CloseSend()
			return err
		},
		"AppendTimeTick": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.AppendTimeTick(ctx, &ternpb.AppendTimeTickRequest{Log: "a/x", Epoch: epoch(), Time: 1})
			return err
		},
		"Read": func(ctx context.Context, ts *testServer, _ int) error {
			st, err := ts.api.Read(ctx, &ternpb.ReadRequest{Log: "a/x"})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		},
		"CreateSubscription": func(ctx context.Context, ts *testServer, i int) error {
			_, err := ts.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "a/x", Name: fmt.Sprintf("new-%d", i)})
			return err
		},
		"DescribeSubscription": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.DescribeSubscription(ctx, &ternpb.DescribeSubscriptionRequest{Log: "a/x", Name: "s"})
			return err
		},
		"ListSubscriptions": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.ListSubscriptions(ctx, &ternpb.ListSubscriptionsRequest{Log: "a/x"})
			return err
		},
		"DeleteSubscription": func(ctx context.Context, ts *testServer, i int) error {
			_, err := ts.api.DeleteSubscription(ctx, &ternpb.DeleteSubscriptionRequest{Log: "a/x", Name: fmt.Sprintf("s-del-%d", i)})
			return err
		},
		"Seek": func(ctx context.Context, ts *testServer, _ int) error {
			_, err := ts.api.Seek(ctx, &ternpb.SeekRequest{Log: "a/x", Name: "s", To: 0})
			return err
		},
		"Subscribe": func(ctx context.Context, ts *testServer, _ int) error {
			st, err := ts.api.Subscribe(ctx)
			if err != nil {
				return err
			}
			start := &ternpb.SubscribeRequest_Start{Log: "a/x", Name: "s"}
			if err := st.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Start_{Start: start}}); err != nil && !errors.Is(err, io.EOF) { // EOF: the server ended the stream, and Recv says why
				return err
			}
			_, err = st.Recv() // the entry of a/x
			st.CloseSend()
			return err
		},
	}
}

// Every method of the Tern service, called by every kind of principal:
// allowed exactly when a grant on a prefix of the log gives the method's
// permission; a call without credentials, or with a token of no principal,
// is UNAUTHENTICATED; every admin call and every refusal is audited.
func TestAuthorizationMatrix(t *testing.T) {
	principals := []testPrincipal{
		{name: "ops", grants: `[{prefix: "", allow: [read, append, subscribe, admin]}]`},
		{name: "reader", grants: `[{prefix: "a/", allow: [read]}]`},
		{name: "writer", grants: `[{prefix: "a/", allow: [append]}]`},
		{name: "subber", grants: `[{prefix: "a/", allow: [subscribe]}]`},
		{name: "admin", grants: `[{prefix: "a/", allow: [admin]}]`},
		{name: "elsewhere", grants: `[{prefix: "b/", allow: [read, append, subscribe, admin]}, {prefix: "a/x/", allow: [read, append, subscribe, admin]}]`},
	}
	for i := range principals {
		principals[i].token = token(principals[i].name)
	}
	var logs logBuffer
	ts := startWith(t, Options{Policy: policyOf(t, principals...), Audit: slog.New(slog.NewJSONHandler(&logs, nil))})
	ctx := t.Context()
	ops := as(ctx, token("ops"))

	// Everything the calls need, made by ops.
	const rounds = 10
	var epoch uint64
	mustOK := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustOK(ts.api.CreateLog(ops, &ternpb.CreateLogRequest{Name: "a/x"}))
	mustOK(ts.api.CreateLog(ops, &ternpb.CreateLogRequest{Name: "a/y"}))
	w, err := ts.api.OpenWriter(ops, &ternpb.OpenWriterRequest{Log: "a/x"})
	mustOK(w, err)
	epoch = w.GetEpoch()
	mustOK(ts.api.Append(ops, &ternpb.AppendRequest{Log: "a/x", Epoch: epoch, Entries: []*ternpb.Entry{{Payload: []byte("first")}}}))
	mustOK(ts.api.CreateSubscription(ops, &ternpb.CreateSubscriptionRequest{Log: "a/x", Name: "s"}))
	for i := range rounds {
		mustOK(ts.api.CreateLog(ops, &ternpb.CreateLogRequest{Name: fmt.Sprintf("a/del-%d", i)}))
		mustOK(ts.api.CreateSubscription(ops, &ternpb.CreateSubscriptionRequest{Log: "a/x", Name: fmt.Sprintf("s-del-%d", i)}))
	}

	calls := authCalls(func() uint64 { return epoch })
	for _, m := range ternpb.Tern_ServiceDesc.Methods {
		if calls[m.MethodName] == nil {
			t.Errorf("method %s is not in the matrix: add it to authCalls and to permissions", m.MethodName)
		}
	}
	for _, m := range ternpb.Tern_ServiceDesc.Streams {
		if calls[m.StreamName] == nil {
			t.Errorf("method %s is not in the matrix: add it to authCalls and to permissions", m.StreamName)
		}
	}

	grants := map[string][]auth.Permission{
		"ops": {auth.Read, auth.Append, auth.Subscribe, auth.Admin}, "reader": {auth.Read}, "writer": {auth.Append},
		"subber": {auth.Subscribe}, "admin": {auth.Admin}, "elsewhere": nil,
	}
	i := 0
	callers := append([]testPrincipal{{name: "anonymous"}, {name: "bad token", token: token("nobody")}}, principals[1:]...)
	callers = append(callers, principals[0]) // ops last: its OpenWriter fences the others' epoch
	for _, p := range callers {
		for _, method := range slices.Sorted(func(yield func(string) bool) {
			for m := range calls {
				if !yield(m) {
					return
				}
			}
		}) {
			i++
			cctx, cancel := context.WithTimeout(as(ctx, p.token), 10*time.Second)
			err := calls[method](cctx, ts, i%rounds)
			cancel()
			code := status.Code(err)
			perm := permissions[method]
			var want codes.Code
			switch {
			case p.token == "" || p.name == "bad token":
				want = codes.Unauthenticated
			case perm == "" || slices.Contains(grants[p.name], perm):
				want = codes.OK
			case method == "DescribeLog" && len(grants[p.name]) > 0:
				want = codes.OK // any permission: the clients describe a log to open it
			default:
				want = codes.PermissionDenied
			}
			switch {
			case want == codes.OK && (code == codes.PermissionDenied || code == codes.Unauthenticated):
				t.Errorf("%s %s: %v, want it allowed", p.name, method, err)
			case want != codes.OK && code != want:
				t.Errorf("%s %s: %v, want %s", p.name, method, err, want)
			case want == codes.PermissionDenied && !strings.Contains(err.Error(), `"a/`) || want == codes.PermissionDenied && !strings.Contains(err.Error(), string(perm)):
				t.Errorf("%s %s: %v, want the message to name the log and the permission %s", p.name, method, err, perm)
			}
		}
	}

	// The audit log has a line for each refusal and each admin call.
	lines := logs.audits(t)
	count := func(principal, op, outcome string) int {
		n := 0
		for _, l := range lines {
			if l["principal"] == principal && l["op"] == op && l["outcome"] == outcome {
				n++
			}
		}
		return n
	}
	for _, want := range []struct {
		principal, op, outcome string
	}{
		{"anonymous", "DeleteLog", "Unauthenticated"},
		{"unknown token", "Read", "Unauthenticated"},
		{"reader", "DeleteLog", "PermissionDenied"},
		{"writer", "Read", "PermissionDenied"},
		{"elsewhere", "Subscribe", "PermissionDenied"},
		{"admin", "DeleteLog", "OK"},
		{"admin", "CreateLog", "OK"},
		{"ops", "TruncateLog", "OK"},
	} {
		if count(want.principal, want.op, want.outcome) != 1 {
			t.Errorf("audit lines of %s %s %s: %d, want 1", want.principal, want.op, want.outcome, count(want.principal, want.op, want.outcome))
		}
	}
	for _, l := range lines {
		if l["op"] == "DeleteLog" && l["principal"] == "admin" && !strings.HasPrefix(fmt.Sprint(l["log"]), "a/del-") {
			t.Errorf("audit line %v: want the log deleted", l)
		}
	}
	if n := count("reader", "Read", "OK"); n != 0 {
		t.Errorf("%d audit lines of an allowed read: only admin calls and refusals are audited", n)
	}
	if got := auditEvents(t, ts, "DeleteLog", "PermissionDenied"); got < 3 {
		t.Errorf("tern_audit_events_total{DeleteLog,PermissionDenied} = %v, want one per refused principal (3 at least)", got)
	}
}

// The clients' probe when they open, a DescribeLog of "", is answered
// InvalidArgument to any principal, and not audited as a refusal.
func TestProbeOfAnyPrincipal(t *testing.T) {
	var logs logBuffer
	reader := testPrincipal{name: "reader", token: token("reader"), grants: `[{prefix: "a/", allow: [read]}]`}
	ts := startWith(t, Options{Policy: policyOf(t, reader), Audit: slog.New(slog.NewJSONHandler(&logs, nil))})
	_, err := ts.api.DescribeLog(as(t.Context(), reader.token), &ternpb.DescribeLogRequest{Name: ""})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("DescribeLog of \"\" by a reader of a/: %v, want InvalidArgument", err)
	}
	if a := logs.audits(t); len(a) != 0 {
		t.Errorf("the probe was audited: %v", a)
	}
}

// ListLogs shows the caller only the logs it may read, in pages.
func TestListLogsReadable(t *testing.T) {
	ts := startWith(t, Options{Policy: policyOf(t,
		testPrincipal{name: "ops", token: token("ops"), grants: `[{prefix: "", allow: [admin, read]}]`},
		testPrincipal{name: "ac", token: token("ac"), grants: `[{prefix: "a/", allow: [read]}, {prefix: "c/", allow: [read]}, {prefix: "a/1/", allow: [read]}, {prefix: "", allow: [append]}]`},
		testPrincipal{name: "none", token: token("none"), grants: `[{prefix: "", allow: [append]}]`},
	)})
	ctx := t.Context()
	for _, n := range []string{"a/1", "a/2", "a/3", "b/1", "b/2", "c/1", "d/1"} {
		if _, err := ts.api.CreateLog(as(ctx, token("ops")), &ternpb.CreateLogRequest{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(tok, prefix string, size int32) []string {
		t.Helper()
		var names []string
		pageToken := ""
		for range 20 {
			resp, err := ts.api.ListLogs(as(ctx, tok), &ternpb.ListLogsRequest{Prefix: prefix, PageSize: size, PageToken: pageToken})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Logs) > int(size) {
				t.Fatalf("a page of %d logs, asked for %d", len(resp.Logs), size)
			}
			for _, l := range resp.Logs {
				names = append(names, l.Name)
			}
			if pageToken = resp.NextPageToken; pageToken == "" {
				return names
			}
		}
		t.Fatal("ListLogs never ends")
		return nil
	}
	for _, c := range []struct {
		tok, prefix string
		size        int32
		want        []string
	}{
		{token("ac"), "", 2, []string{"a/1", "a/2", "a/3", "c/1"}},
		{token("ac"), "", 100, []string{"a/1", "a/2", "a/3", "c/1"}},
		{token("ac"), "a/", 1, []string{"a/1", "a/2", "a/3"}},
		{token("ac"), "b/", 10, nil},
		{token("ac"), "a/2", 10, []string{"a/2"}},
		{token("none"), "", 10, nil},
		{token("ops"), "", 3, []string{"a/1", "a/2", "a/3", "b/1", "b/2", "c/1", "d/1"}},
	} {
		if got := list(c.tok, c.prefix, c.size); !slices.Equal(got, c.want) {
			t.Errorf("ListLogs(%q) as %s, pages of %d: %v, want %v", c.prefix, c.tok[:2], c.size, got, c.want)
		}
	}
}

// Quotas refuse what goes over them with RESOURCE_EXHAUSTED naming the
// quota, and let the principal go on once it is back under.
func TestQuotas(t *testing.T) {
	policy := policyOf(t,
		testPrincipal{name: "ops", token: token("ops"), grants: `[{prefix: "", allow: [admin, read, append, subscribe]}]`},
		testPrincipal{name: "small", token: token("small"), grants: `[{prefix: "q/", allow: [admin, read, append, subscribe]}]`,
			quotas: `{append_bytes_per_second: 500, append_burst_bytes: 4096, logs: 2, subscriptions: 1}`},
	)
	ts := startWith(t, Options{Policy: policy})
	ctx := as(t.Context(), token("small"))
	exhausted := func(err error, quota string) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), quota) || !strings.Contains(err.Error(), "small") {
			t.Fatalf("%v, want RESOURCE_EXHAUSTED naming the quota %s and the principal", err, quota)
		}
	}

	// Logs: two under q/; a third fails until one is deleted. Logs of
	// others elsewhere do not count.
	if _, err := ts.api.CreateLog(as(t.Context(), token("ops")), &ternpb.CreateLogRequest{Name: "z/other"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"q/1", "q/2"} {
		if _, err := ts.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := ts.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: "q/3"})
	exhausted(err, "logs")
	if _, err := ts.api.DeleteLog(ctx, &ternpb.DeleteLogRequest{Name: "q/2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: "q/3"}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}

	// Append bytes: the burst goes, the next append
	// over it fails, and appends go again once the bucket refilled.
	w, err := ts.api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "q/1"})
	if err != nil {
		t.Fatal(err)
	}
	entry := []*ternpb.Entry{{Payload: make([]byte, 3000)}}
	if _, err := ts.api.Append(ctx, &ternpb.AppendRequest{Log: "q/1", Epoch: w.Epoch, Entries: entry}); err != nil {
		t.Fatal(err)
	}
	_, err = ts.api.Append(ctx, &ternpb.AppendRequest{Log: "q/1", Epoch: w.Epoch, Entries: entry})
	exhausted(err, "append_bytes_per_second")
	// A reload of the auth file does not refill the bucket.
	ts.srv.SetPolicy(policy)
	_, err = ts.api.Append(ctx, &ternpb.AppendRequest{Log: "q/1", Epoch: w.Epoch, Entries: entry})
	exhausted(err, "append_bytes_per_second")
	_, err = ts.api.Append(ctx, &ternpb.AppendRequest{Log: "q/1", Epoch: w.Epoch, Entries: []*ternpb.Entry{{Payload: make([]byte, 5000)}}})
	exhausted(err, "append_burst_bytes") // larger than the bucket: never
	waitFor(t, "the append bucket to refill", func() bool {
		_, err := ts.api.Append(ctx, &ternpb.AppendRequest{Log: "q/1", Epoch: w.Epoch, Entries: entry})
		return err == nil
	})
	// ops has no quota.
	for range 3 {
		if _, err := ts.api.Append(as(t.Context(), token("ops")), &ternpb.AppendRequest{Log: "q/1", Epoch: w.Epoch, Entries: entry}); err != nil {
			t.Fatal(err)
		}
	}

	// Subscriptions: one consumed at a time.
	for _, n := range []string{"s1", "s2"} {
		if _, err := ts.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "q/1", Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	subscribe := func(sctx context.Context, name string) (ternpb.Tern_SubscribeClient, error) {
		st, err := ts.api.Subscribe(sctx)
		if err != nil {
			return nil, err
		}
		start := &ternpb.SubscribeRequest_Start{Log: "q/1", Name: name}
		if err := st.Send(&ternpb.SubscribeRequest{Request: &ternpb.SubscribeRequest_Start_{Start: start}}); err != nil && !errors.Is(err, io.EOF) { // EOF: the server ended the stream, and Recv says why
			return nil, err
		}
		_, err = st.Recv()
		return st, err
	}
	first, cancelFirst := context.WithCancel(ctx)
	if _, err := subscribe(first, "s1"); err != nil {
		t.Fatal(err)
	}
	_, err = subscribe(ctx, "s2")
	exhausted(err, "subscriptions")
	cancelFirst()
	waitFor(t, "the first subscription's slot to be given back", func() bool {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, err := subscribe(sctx, "s2")
		return err == nil
	})
}

// waitFor polls cond until it holds, failing the test after a generous
// while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// auditEvents is tern_audit_events_total{operation,outcome}.
func auditEvents(t *testing.T, ts *testServer, op, outcome string) float64 {
	t.Helper()
	return counterWith(t, ts.reg, "tern_audit_events_total", map[string]string{"operation": op, "outcome": outcome})
}
