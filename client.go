// Package tern is a write-ahead log: writers append entries to named logs and
// get an acknowledgement only once the entries are durable; readers read from
// any offset and follow the tail; old entries are truncated once the
// application no longer needs them.
//
// The same API works on logs kept by this process (embedded) and on the logs
// of a Tern server (Options.Server), reached over gRPC by the client module
// (github.com/ternwal/tern/client), whose types and errors this package's
// are. A program that only talks to a server can import the client module
// alone, without this package's dependencies (etcd, bbolt, minio-go).
//
// An embedded client keeps logs in a local data directory:
//
//	<dir>/meta.db       metadata (bbolt): logs, options, writer epochs,
//	                    starts, subscriptions; absent when Options.Etcd
//	                    puts the metadata in etcd
//	<dir>/LOCK          held while a client has the directory open
//	<dir>/meta.etcd     present when the metadata is in etcd (Options.Etcd):
//	                    the directory is then refused without it
//	<dir>/logs/<id>/    the segment files of the log with that id
//
// Only one process may open a data directory at a time.
package tern

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/replica"
	"github.com/ternwal/tern/internal/vfs"
)

// Options configure a Client.
type Options struct {
	// Dir is the data directory. Required.
	Dir string
	// Logger receives state changes (recoveries, failures). Default: none.
	Logger *slog.Logger
	// RetentionInterval is how often retention is applied to every log, and
	// the logs in object storage are compacted (retention is also applied
	// when a log is opened); on a node of a cluster, to every log the node
	// serves (Cluster.Serves). Default: one minute.
	RetentionInterval time.Duration
	// CommitInterval is how long a subscriber's acknowledgements wait to be
	// committed to the subscription's cursor together. A crash redelivers
	// what was acknowledged in the last CommitInterval. Default: 100ms.
	CommitInterval time.Duration
	// LogIdleTimeout is how long a log's engine (its open segment, buffers
	// and goroutines) stays open after its last call, writer, reader or
	// subscriber; it opens again at the next use. Default:
	// DefaultLogIdleTimeout.
	LogIdleTimeout time.Duration

	// The limits: a call that would pass one fails with ErrLimit. Zero
	// takes the default; a negative value sets no limit. They are checked
	// against the metadata store, which the nodes of a cluster share: a
	// node counts the logs again every few seconds, so creations on other
	// nodes may pass MaxLogs briefly.
	//
	// MaxLogs bounds the logs of the metadata store. Default:
	// DefaultMaxLogs.
	MaxLogs int
	// MaxLogsPerPrefix bounds the logs whose names start with one
	// namespace prefix: a name's part up to its last '/' ("a/b/" of
	// "a/b/c"), including the logs of deeper namespaces under it. Names with
	// no '/' are bounded by MaxLogs alone. Default: DefaultMaxLogsPerPrefix.
	MaxLogsPerPrefix int
	// MaxSubscriptionsPerLog bounds the subscriptions of one log. Default:
	// DefaultMaxSubscriptionsPerLog.
	MaxSubscriptionsPerLog int

	// Etcd lists the client endpoints (host:port) of an etcd cluster that
	// keeps the metadata, in place of the bbolt file in Dir. The data stays
	// in Dir, which is locked (Dir/LOCK) while the client is open.
	Etcd []string
	// EtcdRoot is the key prefix of the metadata in etcd. Default "/tern/".
	EtcdRoot string
	// MoveMetadata, with Etcd, moves the metadata of a data directory that
	// keeps it in its bbolt file (made by an embedded program or the tern
	// CLI) into etcd: every log, subscription, segment and the installation,
	// with their IDs. Open does it once, under the directory's lock, logs
	// it, and keeps the file as meta.db.moved; from then on the directory is
	// etcd's. The etcd root must be empty or hold this directory's
	// installation (an interrupted move). tern serve sets it. Without it,
	// Open refuses such a directory.
	MoveMetadata bool

	// Storage is the object store of the logs in object mode. Without it,
	// only local logs can be created and opened.
	Storage StorageOptions
	// DefaultMode is the mode of the logs created with none. Default:
	// ModeLocal.
	DefaultMode Mode

	// Cluster reaches the replica nodes of the logs in quorum mode, and
	// says which logs this node serves; tern serve sets it for the nodes of
	// a cluster. Without it, quorum logs can be neither created nor opened.
	Cluster Cluster

	// DiskReserveBytes is the free space on Dir's filesystem that appends
	// to local logs leave, for the metadata and the subscriptions' cursors
	// (the bbolt file, or an embedded etcd, on the same disk): an append
	// that would eat into it fails with ErrNoSpace, as one the disk cannot
	// take does. Zero: 256 MiB, or a tenth of the filesystem if that is
	// less. Negative: no reserve.
	DiskReserveBytes int64
	// ReuseSegments is how many files of deleted segments (dropped by a
	// truncation or retention) each local log keeps in its directory's
	// free/ subdirectory, so that its new segments are written over old
	// files instead of growing new ones: an fdatasync then commits no block
	// allocation. The kept files hold the deleted segments' bytes until new
	// segments overwrite them (docs/durability.md). Zero: 2. Negative: none;
	// deleted segments' files are removed at once.
	ReuseSegments int
	// ZeroAheadBytes is how far past its last batch a local log keeps its
	// open segment's file written with zeros while its rounds are small
	// (64 KiB or less per fdatasync), so that each fdatasync writes over
	// blocks the file has instead of growing it (docs/durability.md,
	// "Zeros written ahead"). Zero: 1 MiB. Negative: none, as on a
	// copy-on-write filesystem, where writing over allocates anyway.
	ZeroAheadBytes int64
	// ObjectCacheBytes bounds the acknowledged fragments that the object
	// and quorum logs keep in memory for their tail readers, all together:
	// past it, a log that acknowledges a fragment lets go of its own
	// oldest, down to its newest. Zero: no shared bound, and each open log
	// keeps up to 16 MiB. tern serve sets it from --memory-limit.
	ObjectCacheBytes int64
	// Observer is told what the engines do, for metrics. Default: nothing.
	Observer Observer

	// Server is the address (host:port) of a Tern server (tern serve). When
	// it is set, the client works on the server's logs over gRPC (through
	// the client module), Dir must be empty, and the other options but TLS
	// and Token are not used.
	Server string
	// Nodes are more addresses of nodes of Server's cluster: Open connects
	// to the first of Server and Nodes that answers, and the client asks
	// the others where a log is when the nodes it knows cannot be reached
	// (a rolling restart, say). Only with Server.
	Nodes []string
	// TLS, when not nil, makes the connections to Server (and to the other
	// nodes of its cluster) TLS with this configuration: RootCAs is the CA
	// of the server's certificate (nil: the system's), Certificates the
	// client's for a server that requires one. A ServerName left empty is,
	// on a copy, each address's host. Nil: plaintext. Only with Server.
	TLS *tls.Config
	// Token, when not empty, is sent with every call as a bearer token to a
	// server started with --auth. Without TLS it crosses the network in
	// the clear: use TLS beyond loopback. Only with Server.
	Token string
	// RetryTimeout bounds how long a call to Server, or a Reader or
	// Subscriber of its logs reconnecting, keeps trying while the server
	// cannot be reached (it restarts) or a log moves between the nodes of
	// a cluster, when the call's ctx has no earlier deadline; past it, the
	// call fails with the last error, which says "cannot reach the tern
	// server at ..." when no node answered. Zero: 30 seconds
	// (client.DefaultRetryTimeout); negative: no retries beyond a
	// cluster's redirects. Only with Server.
	RetryTimeout time.Duration

	fs vfs.FS // the filesystem under the logs; tests swap it
}

// Cluster is how a client reaches the replica nodes of its quorum logs.
// tern serve implements it on the cluster's membership; its methods use
// internal types, so only the server can.
type Cluster interface {
	// Node returns a connection to the node with the given ID.
	Node(id string) (replica.Node, error)
	// Live lists the IDs of the live nodes.
	Live() []string
	// Serves reports whether this node serves the log with the given ID
	// now. The retention loop skips the logs it does not serve. It must be
	// cheap: no I/O.
	Serves(logID uint64) bool
}

// DefaultLogIdleTimeout is Options.LogIdleTimeout when it is zero.
const DefaultLogIdleTimeout = time.Minute

// Client is a handle on a data directory, or on a Tern server. It is safe
// for concurrent use.
type Client struct{ impl clientImpl }

// clientImpl is a Client of a data directory (embedded) or of a server. The
// arguments it gets have been checked by Client.
type clientImpl interface {
	CreateLog(ctx context.Context, name string, opts LogOptions) (logImpl, error)
	OpenLog(ctx context.Context, name string) (logImpl, error)
	DeleteLog(ctx context.Context, name string) error
	ListLogsPage(ctx context.Context, prefix, token string, size int) (LogPage, error)
	ListLogsMeta(ctx context.Context, prefix string) ([]LogInfo, error)
	LogID(ctx context.Context, name string) (uint64, error)
	CloseLog(name string) error
	Health() (Health, error)
	Close() error
}

// Open opens (creating if needed) the data directory opts.Dir, or connects
// to the server at opts.Server. A data directory another process has open
// fails with ErrLocked; a server that does not answer fails at once, one
// that TLS keeps from answering with ErrTLS (the message says why), and one
// that does not know the client's token or certificate with
// ErrUnauthenticated.
func Open(ctx context.Context, opts Options) (*Client, error) {
	switch {
	case opts.Server != "" && opts.Dir != "":
		return nil, fmt.Errorf("%w: Options.Dir and Options.Server are both set: a client works on a data directory or on a server", ErrInvalid)
	case opts.Server != "":
		c, err := client.Open(ctx, client.Options{Server: opts.Server, Nodes: opts.Nodes, TLS: opts.TLS, Token: opts.Token, RetryTimeout: opts.RetryTimeout})
		if err != nil {
			return nil, err
		}
		return &Client{remoteClient{c}}, nil
	case opts.Dir == "":
		return nil, errors.New("tern: Options.Dir and Options.Server are empty: set the data directory, or the server's address")
	case opts.TLS != nil || opts.Token != "" || len(opts.Nodes) > 0:
		return nil, fmt.Errorf("%w: Options.TLS, Token and Nodes apply to a server (Options.Server), not to a data directory: leave them out", ErrInvalid)
	}
	c, err := openEmbedded(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Client{c}, nil
}

// Close closes every log (finishing queued appends) and the data directory,
// or the connection to the server. Readers and writers of the client's logs
// fail with ErrClosed afterwards.
func (c *Client) Close() error { return c.impl.Close() }

// CreateLog creates a log and returns it, opened. Zero fields of opts take
// the defaults; a Mode left empty takes the client's DefaultMode (a
// server's: its --mode).
func (c *Client) CreateLog(ctx context.Context, name string, opts LogOptions) (*Log, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	// The options are checked by the implementation, once it has given an
	// empty Mode its default: which settings apply depends on the mode.
	return newLog(c.impl.CreateLog(ctx, name, opts))
}

// OpenLog opens an existing log. On an embedded client, the first open in
// this process recovers the log, and every call returns a handle on the
// same open log while the client is open.
func (c *Client) OpenLog(ctx context.Context, name string) (*Log, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return newLog(c.impl.OpenLog(ctx, name))
}

func newLog(l logImpl, err error) (*Log, error) {
	if err != nil {
		return nil, err
	}
	return &Log{l}, nil
}

// DeleteLog deletes a log and its data. Its open readers and writers fail
// with ErrClosed.
func (c *Client) DeleteLog(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return c.impl.DeleteLog(ctx, name)
}

// ListLogs describes the logs whose names start with prefix, by name,
// following every page of ListLogsPage.
func (c *Client) ListLogs(ctx context.Context, prefix string) ([]LogInfo, error) {
	var infos []LogInfo
	for token := ""; ; {
		page, err := c.impl.ListLogsPage(ctx, prefix, token, MaxListPageSize)
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
// prefix, by name: up to size of them (0: DefaultListPageSize; at most
// MaxListPageSize) after the page token ends ("": from the first). It is
// answered from the metadata and opens no log: a log that is open (in this
// process, or on the server) is described in full, a local log that is not
// by its files (never opened: empty; closed cleanly: its newest segment's
// footer), any other as ListLogsMeta describes it (ExtentUnknown).
func (c *Client) ListLogsPage(ctx context.Context, prefix, token string, size int) (LogPage, error) {
	if size < 0 {
		return LogPage{}, fmt.Errorf("%w: page size %d is negative", ErrInvalid, size)
	}
	return c.impl.ListLogsPage(ctx, prefix, token, size)
}

// ListLogsMeta describes the logs whose names start with prefix, by name,
// from the metadata store alone: it opens none of them, so no data is read
// and no retention is applied. Name, ID, Created, Options, Epoch and Start
// (the last truncation point) are set; End, which needs the log's data, is
// Start, Bytes, Segments and Objects are 0, and ExtentUnknown is set. A
// server uses it for the logs another node serves. A client of a server
// fails with ErrUnsupported.
func (c *Client) ListLogsMeta(ctx context.Context, prefix string) ([]LogInfo, error) {
	return c.impl.ListLogsMeta(ctx, prefix)
}

// LogID returns the log's ID in the metadata store: a number given at
// creation and never reused, which names its data. The log is not opened.
// A client of a server fails with ErrUnsupported.
func (c *Client) LogID(ctx context.Context, name string) (uint64, error) {
	if err := ValidateName(name); err != nil {
		return 0, err
	}
	return c.impl.LogID(ctx, name)
}

// CloseLog closes this process's handle on the named log, if it has one:
// its readers, writers and subscribers fail with ErrClosed, and the next
// OpenLog loads the log again from the metadata store. A server calls it
// when another process takes the log over. A client of a server, which
// holds no log open, fails with ErrUnsupported.
func (c *Client) CloseLog(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return c.impl.CloseLog(name)
}

// Health is what a client of a data directory knows is wrong with it beyond
// what one call returns; tern serve's /readyz reports it.
type Health struct {
	// NoSpace, when not empty, says which disk is full: appends to the logs
	// on it fail with ErrNoSpace until space is freed, and then this clears
	// by itself.
	NoSpace string
	// Degraded lists the logs that opened damaged: they can be read up to
	// the damage, and take no appends until repaired.
	Degraded []DegradedLog
}

// DegradedLog is a log that opened damaged, and why.
type DegradedLog struct {
	Name string
	Err  error // names the file and byte
}

// Health reports what the client knows is wrong with its data directory.
// A client of a server fails with ErrUnsupported: the server's /readyz
// reports its health.
func (c *Client) Health() (Health, error) { return c.impl.Health() }
