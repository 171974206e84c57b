package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/ternpb"
)

// matrixPrincipals are the principals of the authorization matrix: one
// per permission on "a/", one with everything on every log, and one with
// everything on "b/" alone.
var matrixPrincipals = []principal{
	{name: "reader", grants: [][2]string{{"a/", "read"}}},
	{name: "appender", grants: [][2]string{{"a/", "append"}}},
	{name: "subscriber", grants: [][2]string{{"a/", "subscribe"}}},
	{name: "admin", grants: [][2]string{{"a/", "admin"}}},
	{name: "ops", grants: [][2]string{{"", "read, append, subscribe, admin"}}},
	{name: "other", grants: [][2]string{{"b/", "read, append, subscribe, admin"}}},
}

// matrixGrants are the permissions of each on the logs under "a/".
var matrixGrants = map[string][]string{
	"reader": {"read"}, "appender": {"append"}, "subscriber": {"subscribe"}, "admin": {"admin"},
	"ops": {"read", "append", "subscribe", "admin"}, "other": nil,
}

// matrixOp is one operation of the Go API on a log under "a/", made by
// the principal who; perm is the permission it needs.
type matrixOp struct {
	name, perm string
	do         func(ctx context.Context, c *tern.Client, who string) error
}

// onLog opens name and calls f on it.
func onLog(name string, f func(ctx context.Context, l *tern.Log, who string) error) func(context.Context, *tern.Client, string) error {
	return func(ctx context.Context, c *tern.Client, who string) error {
		l, err := c.OpenLog(ctx, name)
		if err != nil {
			return err
		}
		return f(ctx, l, who)
	}
}

// onWriter opens a writer of name and calls f with it.
func onWriter(name string, f func(ctx context.Context, w *tern.Writer) error) func(context.Context, *tern.Client, string) error {
	return onLog(name, func(ctx context.Context, l *tern.Log, _ string) error {
		w, err := l.OpenWriter(ctx)
		if err != nil {
			return err
		}
		defer w.Close()
		return f(ctx, w)
	})
}

// matrixOps are every operation of the Go API that names a log. The logs
// a/x (with entries and the subscription s0) and a/t, and for each
// principal the log a/del-<who> and the subscription del-<who> of a/x,
// exist.
var matrixOps = []matrixOp{
	{"CreateLog", "admin", func(ctx context.Context, c *tern.Client, who string) error {
		_, err := c.CreateLog(ctx, "a/new-"+who, tern.LogOptions{})
		return err
	}},
	{"DescribeLog", "", onLog("a/x", func(ctx context.Context, l *tern.Log, _ string) error {
		_, err := l.Info(ctx)
		return err
	})},
	{"DeleteLog", "admin", func(ctx context.Context, c *tern.Client, who string) error { return c.DeleteLog(ctx, "a/del-"+who) }},
	{"TruncateLog", "admin", onLog("a/t", func(ctx context.Context, l *tern.Log, _ string) error { return l.Truncate(ctx, 1) })},
	{"RepairLog", "admin", onLog("a/t", func(ctx context.Context, l *tern.Log, _ string) error {
		_, err := l.Repair(ctx, false)
		return err
	})},
	{"OpenWriter+Append", "append", onWriter("a/x", func(ctx context.Context, w *tern.Writer) error {
		_, err := w.Append(ctx, tern.Entry{Payload: []byte("one")})
		return err
	})},
	{"AppendBatch+AppendAsync", "append", onWriter("a/x", func(ctx context.Context, w *tern.Writer) error {
		if _, err := w.AppendBatch(ctx, []tern.Entry{{Payload: []byte("b1")}, {Payload: []byte("b2")}}); err != nil {
			return err
		}
		p1, p2 := w.AppendAsync(tern.Entry{Payload: []byte("p1")}), w.AppendAsync(tern.Entry{Payload: []byte("p2")})
		_, err1 := p1.Wait(ctx)
		_, err2 := p2.Wait(ctx)
		return errors.Join(err1, err2)
	})},
	{"AppendTimeTick", "append", onWriter("a/x", func(ctx context.Context, w *tern.Writer) error { return w.AppendTimeTick(ctx, 7) })},
	{"Read", "read", onLog("a/x", func(ctx context.Context, l *tern.Log, _ string) error {
		r, err := l.OpenReader(ctx, 0)
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = r.Next(ctx)
		return err
	})},
	{"CreateSubscription", "subscribe", onLog("a/x", func(ctx context.Context, l *tern.Log, who string) error {
		_, err := l.CreateSubscription(ctx, "sub-"+who, tern.SubOptions{})
		return err
	})},
	{"DescribeSubscription", "subscribe", onLog("a/x", func(ctx context.Context, l *tern.Log, _ string) error {
		_, err := l.Subscription(ctx, "s0")
		return err
	})},
	{"ListSubscriptions", "subscribe", onLog("a/x", func(ctx context.Context, l *tern.Log, _ string) error {
		_, err := l.Subscriptions(ctx)
		return err
	})},
	{"DeleteSubscription", "subscribe", onLog("a/x", func(ctx context.Context, l *tern.Log, who string) error {
		return l.DeleteSubscription(ctx, "del-"+who)
	})},
	{"Seek", "subscribe", onLog("a/x", func(ctx context.Context, l *tern.Log, _ string) error { return l.Seek(ctx, "s0", 0) })},
	{"Subscribe", "subscribe", onLog("a/x", func(ctx context.Context, l *tern.Log, _ string) error {
		s, err := l.Subscribe(ctx, "s0")
		if err != nil {
			return err
		}
		if _, err := s.Next(ctx); err != nil {
			s.Close()
			return err
		}
		return s.Close()
	})},
}

// Every operation of the Go API, by every principal, through tern serve
// --auth: allowed exactly when a grant gives its permission on the log,
// else ErrPermissionDenied naming the principal, the permission and the
// log; ListLogs shows what each may read; no token or a bad one is
// ErrUnauthenticated; and a reader's tern log delete prints one line.
func TestAuthMatrix(t *testing.T) {
	authFile, tokens := writeAuthFile(t, matrixPrincipals...)
	srv := startSecure(t, nil, false, "--auth", authFile)
	runMatrix(t, srv.addr, nil, func(who string) (string, *tls.Config) { return tokens[who], nil })

	code, _, errs := ternEnv(t, []string{"TERN_TOKEN=" + tokens["reader"]}, "", "--server", srv.addr, "log", "delete", "a/x")
	wantOneLine(t, "tern log delete as a reader", code, errs, "permission denied", `"reader"`, `"a/x"`, `"admin"`)
	code, _, errs = ternEnv(t, nil, "", "--server", srv.addr, "log", "list")
	wantOneLine(t, "tern log list without a token", code, errs, "not authenticated", "TERN_TOKEN")
}

// The matrix over TLS, the reader identified by its client certificate
// (subject CN=reader) instead of a token; a certificate of the CA that no
// principal's subject matches is ErrUnauthenticated.
func TestAuthMatrixMTLS(t *testing.T) {
	p := newPKI(t)
	ps := slices.Clone(matrixPrincipals)
	ps[0].subject = "CN=reader"
	authFile, tokens := writeAuthFile(t, ps...)
	srv := startSecure(t, p, true, "--auth", authFile)
	_, _, readerCert := p.client(t, "reader")
	runMatrix(t, srv.addr, p.clientTLS(), func(who string) (string, *tls.Config) {
		if who == "reader" {
			return "", p.clientTLS(readerCert)
		}
		return tokens[who], p.clientTLS()
	})

	_, _, strangerCert := p.client(t, "stranger")
	if _, err := openAs(t, srv.addr, "", p.clientTLS(strangerCert)); !errors.Is(err, tern.ErrUnauthenticated) || !strings.Contains(err.Error(), "CN=stranger") {
		t.Errorf("Open with a certificate of no principal: %v, want ErrUnauthenticated naming CN=stranger", err)
	}
}

// runMatrix sets up the logs as ops and runs every matrixOp as every
// principal (and without credentials, and with a bad token), with the
// credentials creds returns; base is the TLS of a client without a
// certificate.
func runMatrix(t *testing.T, addr string, base *tls.Config, creds func(who string) (string, *tls.Config)) {
	ctx := deadline(t)
	token, conf := creds("ops")
	ops := mustOpenAs(t, addr, token, conf)
	for _, name := range []string{"a/x", "a/t", "b/y"} {
		l, err := ops.CreateLog(ctx, name, tern.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := l.OpenWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, w, "e0", "e1", "e2")
		w.Close()
	}
	x := mustOpenLog(t, ops, "a/x")
	if _, err := x.CreateSubscription(ctx, "s0", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range matrixPrincipals {
		if _, err := ops.CreateLog(ctx, "a/del-"+p.name, tern.LogOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := x.CreateSubscription(ctx, "del-"+p.name, tern.SubOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	for _, p := range matrixPrincipals {
		token, conf := creds(p.name)
		c := mustOpenAs(t, addr, token, conf)
		granted := matrixGrants[p.name]
		for _, op := range matrixOps {
			err := op.do(ctx, c, p.name)
			allowed := slices.Contains(granted, op.perm) || op.perm == "" && len(granted) > 0
			switch {
			case allowed && err != nil:
				t.Errorf("%s %s: %v, want it allowed", p.name, op.name, err)
			case !allowed && !errors.Is(err, tern.ErrPermissionDenied):
				t.Errorf("%s %s: %v, want ErrPermissionDenied", p.name, op.name, err)
			case !allowed && (!strings.Contains(err.Error(), fmt.Sprintf("principal %q", p.name)) || !strings.Contains(err.Error(), `log "a/`)):
				t.Errorf("%s %s: %v, want the message to name the principal and the log", p.name, op.name, err)
			case !allowed && len(granted) > 0 && !strings.Contains(err.Error(), fmt.Sprintf("%q", op.perm)):
				t.Errorf("%s %s: %v, want the message to name the permission %q", p.name, op.name, err, op.perm)
			}
		}
		// The unary Append, which the Go client does not use: past the
		// guard, the epoch decides.
		err := rawAppend(ctx, addr, token, conf)
		if code := status.Code(err); slices.Contains(granted, "append") == (code == codes.PermissionDenied) || code == codes.Unauthenticated {
			t.Errorf("%s: unary Append: %v, want it denied exactly without append", p.name, err)
		}
		mayRead := func(log string) bool {
			return p.name == "ops" || p.name == "reader" && strings.HasPrefix(log, "a/") || p.name == "other" && strings.HasPrefix(log, "b/")
		}
		logs, err := c.ListLogs(ctx, "")
		if err != nil {
			t.Errorf("%s ListLogs: %v", p.name, err)
		}
		var listed []string
		for _, l := range logs {
			listed = append(listed, l.Name)
			if !mayRead(l.Name) {
				t.Errorf("%s ListLogs shows %s, which it may not read", p.name, l.Name)
			}
		}
		for _, name := range []string{"a/x", "a/t", "b/y"} {
			if mayRead(name) && !slices.Contains(listed, name) {
				t.Errorf("%s ListLogs: %v, want %s, which it may read", p.name, listed, name)
			}
		}
	}

	for _, token := range []string{"", "0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"} {
		if _, err := openAs(t, addr, token, base); !errors.Is(err, tern.ErrUnauthenticated) {
			t.Errorf("Open with token %q: %v, want ErrUnauthenticated", token, err)
		}
		if err := rawAppend(ctx, addr, token, base); status.Code(err) != codes.Unauthenticated {
			t.Errorf("unary Append with token %q: %v, want UNAUTHENTICATED", token, err)
		}
	}
}

// rawAppend calls the unary Append on a/x at epoch 1 with a token and TLS.
func rawAppend(ctx context.Context, addr, token string, conf *tls.Config) error {
	creds := insecure.NewCredentials()
	if conf != nil {
		conf = conf.Clone()
		conf.ServerName = "localhost"
		creds = credentials.NewTLS(conf)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = ternpb.NewTernClient(conn).Append(ctx, &ternpb.AppendRequest{Log: "a/x", Epoch: 1, Entries: []*ternpb.Entry{{Payload: []byte("raw")}}})
	return err
}
