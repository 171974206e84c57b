package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/ternwal/tern"
	replicapb "github.com/ternwal/tern/api/ternpb"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
	"github.com/ternwal/tern/internal/auth"
	"github.com/ternwal/tern/internal/units"
)

// permissions is the permission each method of the Tern service needs on
// the log it names. ListLogs needs none: it lists only the logs the caller
// may read; DescribeLog is allowed with any permission (mayDescribe). A
// method missing here is denied to every principal.
var permissions = map[string]auth.Permission{
	"CreateLog":   auth.Admin,
	"DeleteLog":   auth.Admin,
	"TruncateLog": auth.Admin,
	"RepairLog":   auth.Admin,

	"DescribeLog": auth.Read,
	"Read":        auth.Read,
	"ListLogs":    "",

	"OpenWriter":     auth.Append,
	"CloseWriter":    auth.Append,
	"Append":         auth.Append,
	"AppendStream":   auth.Append,
	"AppendTimeTick": auth.Append,

	"CreateSubscription":   auth.Subscribe,
	"DescribeSubscription": auth.Subscribe,
	"ListSubscriptions":    auth.Subscribe,
	"DeleteSubscription":   auth.Subscribe,
	"Seek":                 auth.Subscribe,
	"Subscribe":            auth.Subscribe,
}

// replicaService is the gRPC name of the replica service.
var replicaService = replicapb.Replica_ServiceDesc.ServiceName

// guard is a Server's access control: it finds who makes each call
// (identify), whether the call's log is granted to them (admit), keeps
// their quotas, and writes the audit log. Without an auth file every call
// is allowed; admin calls are audited all the same.
type guard struct {
	access  atomic.Pointer[access] // the auth file's policy; nil without --auth
	buckets *auth.Buckets          // the append quotas, by principal name: kept across reloads
	c       *tern.Client
	audit   *slog.Logger
	events  *prometheus.CounterVec // operation, outcome

	mu   sync.Mutex
	subs map[string]int // open Subscribe streams by principal name
}

// access is a policy and the quota buckets of its principals.
type access struct {
	policy  *auth.Policy
	buckets *auth.Buckets
}

func newGuard(c *tern.Client, policy *auth.Policy, logger *slog.Logger, reg prometheus.Registerer) *guard {
	g := &guard{c: c, audit: logger, subs: map[string]int{}, buckets: auth.NewBuckets(),
		events: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tern_audit_events_total",
			Help: "Calls written to the audit log: every admin operation, and every call refused for want of authentication, permission or quota; by operation and outcome (a gRPC status code).",
		}, []string{"operation", "outcome"})),
	}
	g.setPolicy(policy)
	return g
}

// setPolicy replaces the policy (nil: no --auth); the calls running keep
// the one they started with.
func (g *guard) setPolicy(p *auth.Policy) {
	if p == nil {
		g.access.Store(nil)
		return
	}
	g.access.Store(&access{policy: p, buckets: g.buckets})
}

// caller is who makes a call.
type caller struct {
	p    *auth.Principal // nil without an auth file
	name string          // for the audit: the principal, or the certificate's subject, or "anonymous"
	acc  *access         // nil without an auth file
}

type callerKey struct{}

// callerFrom returns the caller of a call the guard admitted.
func callerFrom(ctx context.Context) (caller, bool) {
	c, ok := ctx.Value(callerKey{}).(caller)
	return c, ok
}

// identify finds the caller from a bearer token and a verified client
// certificate (nil if none); the token wins when both are given.
func (g *guard) identify(token string, hasToken bool, cert *x509.Certificate) (caller, error) {
	acc := g.access.Load()
	if acc == nil {
		return caller{name: certName(cert)}, nil
	}
	if hasToken {
		if p, ok := acc.policy.ByToken(token); ok {
			return caller{p: p, name: p.Name, acc: acc}, nil
		}
		return caller{name: "unknown token"}, fmt.Errorf("%w: the bearer token matches no principal of the server's auth file: check $TERN_TOKEN (or --token, Options.Token)", rpcerr.ErrUnauthenticated)
	}
	if cert != nil {
		if p, ok := acc.policy.ByCert(cert); ok {
			return caller{p: p, name: p.Name, acc: acc}, nil
		}
		return caller{name: cert.Subject.String()}, fmt.Errorf("%w: the client certificate %q matches no principal of the server's auth file (by subject or SAN)", rpcerr.ErrUnauthenticated, cert.Subject.String())
	}
	return caller{name: "anonymous"}, fmt.Errorf("%w: the server requires authentication (tern serve --auth): send a bearer token ($TERN_TOKEN or --token; Options.Token) or a client certificate", rpcerr.ErrUnauthenticated)
}

// identifyRPC identifies the caller of a gRPC call.
func (g *guard) identifyRPC(ctx context.Context) (caller, error) {
	token, hasToken := bearer(metadata.ValueFromIncomingContext(ctx, "authorization"))
	return g.identify(token, hasToken, peerCert(ctx))
}

// bearer returns the token of an authorization header's values.
func bearer(values []string) (string, bool) {
	if len(values) == 0 {
		return "", false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", true // present but malformed: matches no principal
	}
	return strings.TrimSpace(token), true
}

// peerCert is the verified certificate of a call's client, or nil.
func peerCert(ctx context.Context) *x509.Certificate {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return verifiedCert(ti.State)
}

// verifiedCert is the client certificate of a TLS connection, if the
// handshake verified one, or nil.
func verifiedCert(st tls.ConnectionState) *x509.Certificate {
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil
	}
	return st.PeerCertificates[0]
}

// call is one call through the guard: begin identifies its caller, admit
// checks each request it decodes, end audits it.
type call struct {
	g      *guard
	ctx    context.Context // with the caller
	method string
	who    caller
	err    error // of identify: the call is refused

	log     string // the log of the first request admitted
	allowed string // the last log admitted, for the later messages of a stream
	refused bool   // a request was refused for its permission or a quota
	sub     bool   // holds a Subscribe slot of who
}

func (g *guard) begin(ctx context.Context, method string) *call {
	who, err := g.identifyRPC(ctx)
	return &call{g: g, ctx: context.WithValue(ctx, callerKey{}, who), method: method, who: who, err: err}
}

// admit checks a request of the call: the caller's permission on the log
// it names, and its quotas.
func (c *call) admit(req any) error {
	perm, known := permissions[c.method]
	var log string
	switch r := req.(type) {
	case *ternpb.ListLogsRequest:
		return nil // listed by what the caller may read
	case *ternpb.SubscribeRequest:
		start := r.GetStart()
		if start == nil {
			return nil
		}
		log = start.GetLog()
	case *grpcopts.DecodedAppend: // an AppendStream's request
		log = r.Log
	case interface{ GetLog() string }:
		log = r.GetLog()
	case interface{ GetName() string }:
		log = r.GetName()
	}
	if c.log == "" {
		c.log = log
	}
	if c.who.acc == nil {
		return nil
	}
	if log != c.allowed || c.allowed == "" {
		describe := c.method == "DescribeLog"
		// A DescribeLog of "" is the clients' probe when they open (its
		// invalid name is refused by the handler): no refusal to audit.
		if !(known && c.who.p.Allows(perm, log) || describe && (log == "" || mayDescribe(c.who.p, log))) {
			c.refused = true
			needs := strconv.Quote(string(perm))
			if describe {
				needs = "one of read, append, subscribe or admin"
			}
			return fmt.Errorf("%w: principal %q may not %s log %q (%s needs %s on a prefix of its name): ask for a grant in the server's auth file", rpcerr.ErrPermissionDenied, c.who.name, c.method, log, c.method, needs)
		}
		c.allowed = log
	}
	if err := c.quota(req); err != nil {
		c.refused = true
		return err
	}
	return nil
}

// mayDescribe says whether p may describe log: with any permission on it,
// since the clients describe a log when they open it (OpenLog), before a
// writer appends, a subscriber consumes or an admin truncates.
func mayDescribe(p *auth.Principal, log string) bool {
	for _, perm := range []auth.Permission{auth.Read, auth.Append, auth.Subscribe, auth.Admin} {
		if p.Allows(perm, log) {
			return true
		}
	}
	return false
}

// quota takes what req uses of the caller's quotas.
func (c *call) quota(req any) error {
	q := c.who.p.Quotas
	switch r := req.(type) {
	case *ternpb.AppendRequest:
		return c.appendQuota(protoEntryBytes(r.GetEntries()))
	case *grpcopts.DecodedAppend:
		return c.appendQuota(requestBytes(r))
	case *ternpb.CreateLogRequest:
		if q.Logs > 0 {
			return c.logsQuota(q.Logs)
		}
	case *ternpb.SubscribeRequest:
		if q.Subscriptions > 0 && !c.sub {
			c.g.mu.Lock()
			defer c.g.mu.Unlock()
			if n := c.g.subs[c.who.name]; n >= q.Subscriptions {
				return fmt.Errorf("%w: principal %q consumes %d subscriptions at once, its quota (subscriptions in the server's auth file): close one, or raise the quota", rpcerr.ErrLimit, c.who.name, n)
			}
			c.g.subs[c.who.name]++
			c.sub = true
		}
	}
	return nil
}

func (c *call) appendQuota(n int64) error {
	ok, retry := c.who.acc.buckets.TakeAppend(c.who.p, n)
	if ok {
		return nil
	}
	q := c.who.p.Quotas
	rate := units.FormatBytes(q.AppendBytesPerSecond) + "/s"
	if retry <= 0 {
		return fmt.Errorf("%w: an append of %d bytes is larger than principal %q's append burst (append_burst_bytes in the server's auth file, at %s): send smaller requests, or raise the quota", rpcerr.ErrLimit, n, c.who.name, rate)
	}
	return fmt.Errorf("%w: principal %q appends faster than its quota of %s (append_bytes_per_second in the server's auth file): retry in %s, or raise the quota", rpcerr.ErrLimit, c.who.name, rate, retry.Round(time.Millisecond))
}

// logsQuota fails if the logs under the prefixes the caller administers
// number limit or more.
func (c *call) logsQuota(limit int) error {
	n := 0
	for _, prefix := range c.who.p.Prefixes(auth.Admin) {
		token := ""
		for n < limit {
			page, err := c.g.c.ListLogsPage(c.ctx, prefix, token, min(limit-n+1, tern.MaxListPageSize))
			if err != nil {
				return err
			}
			n += len(page.Logs)
			if page.NextPageToken == "" {
				break
			}
			token = page.NextPageToken
		}
	}
	if n >= limit {
		return fmt.Errorf("%w: principal %q has %d logs under the prefixes it administers, its quota (logs in the server's auth file): delete some, or raise the quota", rpcerr.ErrLimit, c.who.name, n)
	}
	return nil
}

// protoEntryBytes is what entries count against an append quota: their
// payloads and properties, as tern_append_bytes_total counts them.
func protoEntryBytes(entries []*ternpb.Entry) int64 {
	var n int64
	for _, e := range entries {
		n += int64(len(e.GetPayload()))
		for k, v := range e.GetProperties() {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// end audits the call, which ended with err, and gives its subscription
// slot back. An admin operation is audited whatever its outcome; any other
// call only when the guard refused it.
func (c *call) end(err error) {
	if c.sub {
		c.g.mu.Lock()
		if c.g.subs[c.who.name]--; c.g.subs[c.who.name] <= 0 {
			delete(c.g.subs, c.who.name)
		}
		c.g.mu.Unlock()
	}
	if permissions[c.method] != auth.Admin && c.err == nil && !c.refused {
		return
	}
	c.g.record(c.who.name, c.method, c.log, err)
}

// record writes one line of the audit log and counts it.
func (g *guard) record(principal, op, log string, err error) {
	st := rpcerr.Status(err)
	attrs := []any{"principal", principal, "op", op, "log", log, "outcome", st.Code().String()}
	if err != nil {
		attrs = append(attrs, "reason", st.Message())
	}
	g.audit.Info("audit", attrs...)
	g.events.WithLabelValues(op, st.Code().String()).Inc()
}

// readable returns the prefixes whose logs a ListLogs of prefix may show
// the caller: prefix itself when a grant covers it, else the narrower
// prefixes it may read under it, in order; none without a grant there.
func (who caller) readable(prefix string) []string {
	if who.acc == nil || who.p.Allows(auth.Read, prefix) {
		return []string{prefix}
	}
	var under []string
	for _, p := range who.p.Prefixes(auth.Read) {
		if strings.HasPrefix(p, prefix) {
			under = append(under, p)
		}
	}
	return under
}

// listReadable is a page of the logs under prefix that the caller may
// read, after the page token (the last name of the page before).
func (s *Server) listReadable(ctx context.Context, who caller, prefix, token string, size int) (tern.LogPage, error) {
	prefixes := who.readable(prefix)
	if len(prefixes) == 1 && prefixes[0] == prefix {
		return s.c.ListLogsPage(ctx, prefix, token, size)
	}
	size = min(max(size, 0), tern.MaxListPageSize)
	if size == 0 {
		size = tern.DefaultListPageSize
	}
	var out tern.LogPage
	for _, p := range prefixes {
		from := ""
		switch {
		case token == "" || token < p:
		case strings.HasPrefix(token, p):
			from = token
		default:
			continue // wholly before the token
		}
		for len(out.Logs) < size {
			page, err := s.c.ListLogsPage(ctx, p, from, size-len(out.Logs))
			if err != nil {
				return tern.LogPage{}, err
			}
			out.Logs = append(out.Logs, page.Logs...)
			if page.NextPageToken == "" {
				break
			}
			from = page.NextPageToken
		}
		if len(out.Logs) == size {
			out.NextPageToken = out.Logs[len(out.Logs)-1].Name
			return out, nil
		}
	}
	return out, nil
}

// guardedStream is a server stream whose requests the call admits.
type guardedStream struct {
	grpc.ServerStream
	c *call
}

func (s guardedStream) Context() context.Context { return s.c.ctx }

func (s guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	err := s.c.admit(m)
	if r, ok := m.(*grpcopts.DecodedAppend); ok && err != nil {
		r.Release() // the handler sees only the error
	}
	return err
}

// nodesOnly is the guard of the replica service, which only the other
// nodes of the cluster may call: under TLS, a caller must present a
// certificate of the cluster's CA, and with an auth file one of a node
// principal (node: true). A server without TLS (on loopback, or
// --insecure) lets every caller through.
func (g *guard) nodesOnly(tlsOn bool) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	service := "/" + replicaService + "/"
	check := func(ctx context.Context, method string) error {
		if !tlsOn || !strings.HasPrefix(method, service) {
			return nil
		}
		cert := peerCert(ctx)
		if err := g.node(cert); err != nil {
			g.record(certName(cert), method, "", err)
			return wire(err)
		}
		return nil
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := check(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := check(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return h(srv, ss)
	}
	return unary, stream
}

// node checks that cert, verified by the cluster's CA, is a node's.
func (g *guard) node(cert *x509.Certificate) error {
	if cert == nil {
		return fmt.Errorf("%w: only the nodes of the cluster may send replica data, and this caller gave no certificate of the cluster's CA", rpcerr.ErrPermissionDenied)
	}
	acc := g.access.Load()
	if acc == nil {
		return nil
	}
	if p, ok := acc.policy.ByCert(cert); ok && p.Node {
		return nil
	}
	return fmt.Errorf("%w: certificate %q is not a node's: only principals with node: true in the auth file may send replica data", rpcerr.ErrPermissionDenied, cert.Subject.String())
}

// certName is who cert identifies for the audit: its subject, or
// "anonymous" without one.
func certName(cert *x509.Certificate) string {
	if cert == nil {
		return "anonymous"
	}
	return cert.Subject.String()
}
