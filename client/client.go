// Package client is the Go client of a Tern server (tern serve): it creates,
// appends to, reads, subscribes to and truncates the server's logs over its
// gRPC API (api/ternpb/tern.proto).
//
// It is a module of its own, github.com/ternwal/tern/client, that needs only
// grpc, protobuf and the standard library, and Go 1.24: a program that only
// talks to a server imports it and links none of the server's dependencies
// (etcd, bbolt, minio-go). Package tern (github.com/ternwal/tern) has the
// same API, over a server or over logs kept in the program itself
// (embedded); its types and errors are this package's.
//
//	c, err := client.Open(ctx, client.Options{Server: "127.0.0.1:7070"})
//	l, err := c.CreateLog(ctx, "tenant/db/channel-1", client.LogOptions{})
//	w, err := l.OpenWriter(ctx)
//	off, err := w.Append(ctx, client.Entry{Payload: []byte("hello")})
//
// Every error of a gRPC call is mapped back to Tern's sentinels (package
// rpcerr), so callers branch on them with errors.Is as they would on an
// embedded log. In a cluster, a log's calls go to the node that serves it,
// following the redirects of the other nodes. A call that finds no server
// (it restarts) or no node serving the log (it moves) is tried again, 10 to
// 100 milliseconds apart, until its ctx ends but no longer than
// Options.RetryTimeout; Readers and Subscribers reopen their streams where
// they left off (route.go says which calls are safe to retry, and how).
//
// A server started with --tls-cert is reached with Options.TLS, one started
// with --auth with Options.Token (or a client certificate in Options.TLS,
// under --tls-client-ca); every connection, the first and those to the other
// nodes of a cluster, uses both:
//
//	pool := x509.NewCertPool()
//	pool.AppendCertsFromPEM(caPEM) // the CA that signed the server's certificate
//	c, err := client.Open(ctx, client.Options{
//		Server: "tern.internal:7070",
//		TLS:    &tls.Config{RootCAs: pool},
//		Token:  os.Getenv("TERN_TOKEN"),
//	})
//
// A call the server does not authenticate fails with ErrUnauthenticated, one
// its grants do not allow with ErrPermissionDenied.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// probeTimeout bounds the reachability check of Open when ctx has no earlier
// deadline.
const probeTimeout = 10 * time.Second

// Options configure a Client.
type Options struct {
	// Server is the address (host:port) of a Tern server. Required.
	Server string
	// Nodes are more addresses of nodes of the same cluster as Server.
	// Open connects to the first of Server and Nodes that answers; later,
	// when the node a log was served by and the one Open connected to
	// cannot be reached (a rolling restart, say), the client asks the
	// others in turn where the log is now.
	Nodes []string
	// TLS, when not nil, makes every connection of the client TLS with this
	// configuration: RootCAs is the CA that signed the server's certificate
	// (nil: the system's), Certificates the client's own for a server that
	// requires one (mutual TLS). A ServerName left empty is set, on a copy,
	// to the host of each address the client connects to: the server's, and
	// in a cluster the other nodes' that it is redirected to. Set it only
	// when every node's certificate holds that name. The client does not
	// modify the Config, which must not be modified after Open. Nil:
	// plaintext.
	TLS *tls.Config
	// Token, when not empty, is sent with every call as a bearer token (the
	// metadata "authorization: Bearer <token>") to a server started with
	// --auth. It is printable ASCII without spaces. It is sent over
	// plaintext too, when TLS is nil, for a server on loopback: anywhere
	// else, whoever sees the traffic sees the token, so use TLS.
	Token string
	// RetryTimeout bounds how long a call, or a Reader or Subscriber
	// reconnecting, keeps trying while the server cannot be reached (a
	// restart) or the log moves between the nodes of a cluster, when the
	// caller's ctx has no earlier deadline: past it, the call fails with
	// the last error, which says "cannot reach the tern server at ..." when
	// no node answered. Tries are spaced by 10 to 100 milliseconds. Zero:
	// DefaultRetryTimeout (30s); negative: no retry beyond the redirects
	// of a cluster's nodes, which are still followed at once.
	RetryTimeout time.Duration
}

// Client is a connection to a server. It is safe for concurrent use.
type Client struct {
	addr  string      // the node Open connected to
	seeds []string    // Options.Server and Options.Nodes, each once
	tls   *tls.Config // Options.TLS
	token string      // Options.Token
	// retryTimeout is Options.RetryTimeout with its default; 0 when
	// negative.
	retryTimeout time.Duration
	conn         *grpc.ClientConn
	api          ternpb.TernClient

	mu     sync.Mutex
	closed bool
	open   map[closer]struct{}         // writers, readers and subscribers to close with the client
	conns  map[string]*grpc.ClientConn // to the other nodes of a cluster, by address
}

// closer is a writer, reader or subscriber that Client.Close closes.
type closer interface{ Close() error }

// Open connects to the server at opts.Server, with TLS if opts.TLS is set,
// and checks that it answers. When TLS is why it cannot connect (the
// server speaks TLS and the client not, or the reverse, or a certificate is
// refused), the error matches ErrTLS and says which; when the server does
// not accept the token or certificate, it matches ErrUnauthenticated.
func Open(ctx context.Context, opts Options) (*Client, error) {
	if opts.Server == "" {
		return nil, fmt.Errorf("%w: Options.Server is empty: set the server's address (host:port)", ErrInvalid)
	}
	if err := checkToken(opts.Token); err != nil {
		return nil, err
	}
	c := &Client{tls: opts.TLS, token: opts.Token, open: map[closer]struct{}{}, conns: map[string]*grpc.ClientConn{}}
	switch {
	case opts.RetryTimeout == 0:
		c.retryTimeout = DefaultRetryTimeout
	case opts.RetryTimeout > 0:
		c.retryTimeout = opts.RetryTimeout
	}
	for _, a := range append([]string{opts.Server}, opts.Nodes...) {
		if a != "" && !slices.Contains(c.seeds, a) {
			c.seeds = append(c.seeds, a)
		}
	}
	for i, addr := range c.seeds {
		conn, err := grpc.NewClient(addr, c.dialOptions(addr)...)
		if err != nil {
			return nil, fmt.Errorf("tern: server address %q: %w", addr, err)
		}
		c.addr, c.conn, c.api = addr, conn, ternpb.NewTernClient(conn)
		reached, err := c.probe(ctx)
		if err == nil {
			return c, nil
		}
		conn.Close()
		if reached || i == len(c.seeds)-1 || ctx.Err() != nil {
			return nil, err
		}
	}
	panic("unreachable: the loop returns at its last address")
}

// probe makes one cheap call, the description of a log whose name is
// invalid, which a Tern server refuses with InvalidArgument without touching
// its storage. It reports whether the server at c.addr was reached, even
// when it refuses the client.
func (c *Client) probe(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := c.api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: ""})
	switch status.Code(err) {
	case codes.Unavailable:
		if terr := c.diagnose(ctx, c.addr); terr != nil {
			return true, terr
		}
		fallthrough
	case codes.DeadlineExceeded, codes.Canceled:
		return false, fmt.Errorf("tern: cannot reach the server at %s: %w (is `tern serve` running?)", c.addr, rpcerr.Error(err))
	case codes.Unimplemented:
		return true, fmt.Errorf("tern: the server at %s does not serve the Tern API: %w", c.addr, rpcerr.Error(err))
	case codes.Unauthenticated:
		return true, fmt.Errorf("tern: the server at %s does not know this client: %w: give it a token the server knows (Options.Token), or a client certificate (Options.TLS)", c.addr, rpcerr.Error(err))
	}
	return true, nil // it answered, even if to refuse the call (PermissionDenied)
}

// err maps the error of a gRPC call to Tern's error for it. A call cut short
// by Close fails with ErrClosed.
func (c *Client) err(err error) error {
	if err == nil {
		return nil
	}
	if code := status.Code(err); code == codes.Canceled || code == codes.Unavailable {
		if c.isClosed() {
			return ErrClosed
		}
	}
	return rpcerr.Error(err)
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// track registers x to be closed by Close. It fails with ErrClosed if the
// client is closed.
func (c *Client) track(x closer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.open[x] = struct{}{}
	return nil
}

func (c *Client) untrack(x closer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open, x)
}

// Close closes the client's writers (waiting for their queued appends),
// subscribers (so the server commits their acknowledgements) and readers,
// then the connection. Later calls fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	open := c.open
	c.open = nil
	c.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(open))
	var errsMu sync.Mutex
	for x := range open {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := x.Close(); err != nil {
				errsMu.Lock()
				errs = append(errs, err)
				errsMu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.mu.Lock()
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	for addr, conn := range conns {
		if err := conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("tern: close the connection to %s: %w", addr, err))
		}
	}
	if err := c.conn.Close(); err != nil {
		errs = append(errs, fmt.Errorf("tern: close the connection to %s: %w", c.addr, err))
	}
	return errors.Join(errs...)
}

// CreateLog creates a log and returns it. Zero fields of opts take the
// defaults (LogOptions.WithDefaults); a mode left empty takes the server's.
func (c *Client) CreateLog(ctx context.Context, name string, opts LogOptions) (*Log, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	opts, err := opts.WithDefaults()
	if err != nil {
		return nil, err
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	// Not idempotent: a retry after an unknown outcome may find the log
	// that the earlier try created. It is that one if its options are
	// those asked for; a mode left empty is whatever the server chose.
	var info *ternpb.LogInfo
	l := &Log{c: c, name: name}
	retried, err := l.callRetried(ctx, func(ctx context.Context, api ternpb.TernClient) (err error) {
		info, err = api.CreateLog(ctx, &ternpb.CreateLogRequest{Name: name, Options: opts.Proto()})
		return err
	})
	if retried && errors.Is(err, ErrExist) {
		if got, derr := l.describe(ctx); derr == nil && sameOptions(got.GetOptions(), opts) {
			info, err = got, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return c.newLog(info)
}

// OpenLog returns a handle on an existing log. The handle holds nothing on
// the server: its calls go to the server one by one.
func (c *Client) OpenLog(ctx context.Context, name string) (*Log, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	l := &Log{c: c, name: name}
	info, err := l.describe(ctx) // from the node that serves it
	if err != nil {
		return nil, err
	}
	return l.withOptions(info)
}

func (c *Client) newLog(info *ternpb.LogInfo) (*Log, error) {
	return (&Log{c: c, name: info.GetName()}).withOptions(info)
}

// withOptions sets l's options from info and returns l.
func (l *Log) withOptions(info *ternpb.LogInfo) (*Log, error) {
	opts, err := optionsFromProto(info.GetOptions())
	if err != nil {
		return nil, fmt.Errorf("tern: log %q: %w", l.name, err)
	}
	l.opts = opts
	return l, nil
}

// DeleteLog deletes a log and its data.
func (c *Client) DeleteLog(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if c.isClosed() {
		return ErrClosed
	}
	// To the node that serves the log, which deletes it and gives it up.
	retried, err := (&Log{c: c, name: name}).callRetried(ctx, func(ctx context.Context, api ternpb.TernClient) error {
		_, err := api.DeleteLog(ctx, &ternpb.DeleteLogRequest{Name: name})
		return err
	})
	if retried && errors.Is(err, ErrNotFound) {
		return nil // deleted by the try whose outcome was unknown
	}
	return err
}

// ListLogs describes the logs whose names start with prefix, by name: it
// follows every page of ListLogsPage.
func (c *Client) ListLogs(ctx context.Context, prefix string) ([]LogInfo, error) {
	var infos []LogInfo
	token := ""
	for {
		page, err := c.ListLogsPage(ctx, prefix, token, MaxListPageSize)
		if err != nil {
			return nil, err
		}
		infos = append(infos, page.Logs...)
		if page.NextPageToken == "" {
			return infos, nil
		}
		token = page.NextPageToken
	}
}

// ListLogsPage describes one page of the logs whose names start with
// prefix: up to size of them (0: DefaultListPageSize) after the page that
// token ends ("": from the first). The server answers from its metadata: a
// log it does not have open has End equal to Start and Bytes, Segments and
// Objects 0 (DescribeLog describes it in full).
func (c *Client) ListLogsPage(ctx context.Context, prefix, token string, size int) (LogPage, error) {
	if c.isClosed() {
		return LogPage{}, ErrClosed
	}
	if size < 0 {
		return LogPage{}, fmt.Errorf("%w: page size %d is negative", ErrInvalid, size)
	}
	var resp *ternpb.ListLogsResponse
	err := (&Log{c: c}).call(ctx, func(ctx context.Context, api ternpb.TernClient) (err error) {
		resp, err = api.ListLogs(ctx, &ternpb.ListLogsRequest{Prefix: prefix, PageSize: int32(min(size, MaxListPageSize)), PageToken: token})
		return err
	})
	if err != nil {
		return LogPage{}, err
	}
	page := LogPage{Logs: make([]LogInfo, 0, len(resp.GetLogs())), NextPageToken: resp.GetNextPageToken()}
	for _, pi := range resp.GetLogs() {
		info, err := logInfoFromProto(pi)
		if err != nil {
			return LogPage{}, err
		}
		page.Logs = append(page.Logs, info)
	}
	return page, nil
}

// Log is a handle on a log of the server. Its name and options are fixed;
// the rest is asked of the server at each call. It is safe for concurrent
// use.
type Log struct {
	c    *Client
	name string
	opts LogOptions

	mu       sync.Mutex
	at       string  // the address of the node serving the log; "" for the client's
	named    string  // the last node a NotOwnerError named (route.go)
	turn     int     // which node nextNode gave last
	producer *Writer // the shared producer of Append, once started
}

// Name is the log's name.
func (l *Log) Name() string { return l.name }

// Options returns the log's settings.
func (l *Log) Options() LogOptions { return l.opts }

func (l *Log) describe(ctx context.Context) (*ternpb.LogInfo, error) {
	if l.c.isClosed() {
		return nil, ErrClosed
	}
	var info *ternpb.LogInfo
	err := l.call(ctx, func(ctx context.Context, api ternpb.TernClient) (err error) {
		info, err = api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: l.name})
		return err
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

// Info describes the log as it is now.
func (l *Log) Info(ctx context.Context) (LogInfo, error) {
	info, err := l.describe(ctx)
	if err != nil {
		return LogInfo{}, err
	}
	return logInfoFromProto(info)
}

// OpenWriter opens a writer session of the log: a new epoch, above every
// older one, or the one WithEpoch chose. Every older session is fenced:
// once OpenWriter returns, none of their appends is acknowledged, and their
// later appends fail with ErrFenced. The session outlives the server: the
// Writer rides through a restart of the server or a move of the log.
func (l *Log) OpenWriter(ctx context.Context, opts ...WriterOption) (*Writer, error) {
	if l.c.isClosed() {
		return nil, ErrClosed
	}
	o := NewWriterOptions(opts...)
	if o.Shared {
		if o.Epoch != 0 {
			return nil, fmt.Errorf("%w: a shared producer has no epoch of its own (WithEpoch with Shared)", ErrInvalid)
		}
		w := newWriter(l, 0, true)
		if err := l.c.track(w); err != nil {
			_ = w.stop()
			return nil, err
		}
		return w, nil
	}
	var resp *ternpb.OpenWriterResponse
	err := l.call(ctx, func(ctx context.Context, api ternpb.TernClient) (err error) {
		resp, err = api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: l.name, Epoch: o.Epoch, Reopen: o.Reopen})
		return err
	})
	if err != nil {
		return nil, err
	}
	w := newWriter(l, resp.GetEpoch(), false)
	if err := l.c.track(w); err != nil {
		_ = w.stop()
		return nil, err
	}
	return w, nil
}

// Append appends one entry as a shared producer and waits for its
// acknowledgement. Shared producers, in this process and others, append to
// the log without fencing each other, their appends group-committed by the
// server, and exactly once (as a Writer's). They never fence an exclusive
// writer: while one holds the log (OpenWriter, until its Close), Append
// fails with ErrFenced.
func (l *Log) Append(ctx context.Context, e Entry, opts ...AppendOption) (Offset, error) {
	return l.AppendBatchAsync([]Entry{e}, opts...).Wait(ctx)
}

// AppendBatch appends entries atomically as a shared producer (see Append)
// and returns the offset of the first.
func (l *Log) AppendBatch(ctx context.Context, es []Entry, opts ...AppendOption) (Offset, error) {
	return l.AppendBatchAsync(es, opts...).Wait(ctx)
}

// AppendBatchAsync queues entries to be appended atomically as a shared
// producer (see Append) and returns at once; Wait on the result gives the
// offset of the first entry. Appends of one Log are acknowledged in the
// order they were queued.
func (l *Log) AppendBatchAsync(es []Entry, opts ...AppendOption) *Pending {
	l.mu.Lock()
	w := l.producer
	if w != nil && w.isFenced() {
		// An exclusive writer took the log: the next append tries again,
		// and fails while that writer's session is open.
		go w.stop()
		w = nil
	}
	if w == nil {
		w = newWriter(l, 0, true)
		if err := l.c.track(w); err != nil {
			l.mu.Unlock()
			_ = w.stop()
			return failed(err)
		}
		l.producer = w
	}
	l.mu.Unlock()
	return w.append(es, opts)
}

// Truncate declares that the entries below before are no longer needed:
// reads below it fail with ErrTruncated from now on. The start only moves
// forward; before may be at most End.
func (l *Log) Truncate(ctx context.Context, before Offset) error {
	if l.c.isClosed() {
		return ErrClosed
	}
	return l.call(ctx, func(ctx context.Context, api ternpb.TernClient) error {
		_, err := api.TruncateLog(ctx, &ternpb.TruncateLogRequest{Name: l.name, Before: uint64(before)})
		return err
	})
}

// optionsFromProto reads the options a server describes, filling the fields
// it left zero with the defaults.
func optionsFromProto(p *ternpb.LogOptions) (LogOptions, error) {
	o, err := LogOptionsFromProto(p)
	if err != nil {
		return LogOptions{}, err
	}
	return o.WithDefaults()
}

// sameOptions reports whether p, the options of a log that exists, are
// want, which has its defaults: a mode left empty in want is p's, with that
// mode's defaults.
func sameOptions(p *ternpb.LogOptions, want LogOptions) bool {
	got, err := optionsFromProto(p)
	if err != nil {
		return false
	}
	if want.Mode == "" {
		want.Mode = got.Mode
		if want, err = want.WithDefaults(); err != nil {
			return false
		}
	}
	return got == want
}

func logInfoFromProto(p *ternpb.LogInfo) (LogInfo, error) {
	opts, err := optionsFromProto(p.GetOptions())
	if err != nil {
		return LogInfo{}, fmt.Errorf("tern: log %q: %w", p.GetName(), err)
	}
	return LogInfo{
		Name: p.GetName(), ID: p.GetId(), Created: unixNano(p.GetCreatedUnixNano()), Options: opts,
		Start: Offset(p.GetStart()), End: Offset(p.GetEnd()), Bytes: p.GetBytes(), Segments: int(p.GetSegments()),
		Epoch: p.GetEpoch(), Objects: int(p.GetObjects()), ExtentUnknown: p.GetExtentUnknown(),
		LogicalBytes: p.GetLogicalBytes(),
	}, nil
}

// unixNano is the time n nanoseconds after the Unix epoch; 0 is the zero time.
func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
