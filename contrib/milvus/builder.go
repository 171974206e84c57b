package milvus

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/milvus-io/milvus/pkg/v2/streaming/util/message"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls/registry"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client"
)

// WALName is the name of the backend in Milvus: the builder's name, the
// WAL's, and the name its message IDs are unmarshaled by.
const WALName = "tern"

// DefaultPrefix is Config.Prefix when it is empty.
const DefaultPrefix = "milvus/"

// Milvus finds a WAL's builder and its message IDs' unmarshaler in two
// registries that must be filled in an init function (registry.RegisterBuilder
// panics on a second registration of a name). The builder registered here is
// configured from the environment when Milvus builds it (see ConfigFromEnv).
func init() {
	registry.RegisterBuilder(envBuilder{})
	message.RegisterMessageIDUnmsarshaler(WALName, UnmarshalMessageID)
}

// Config says which Tern a builder's WALs are kept in, and how.
type Config struct {
	// Nodes are the addresses (host:port) of tern serve: one server's, or
	// some of a cluster's nodes (the client finds the others).
	Nodes []string
	// TLS, when not nil, makes the connections TLS with this configuration
	// (RootCAs: the server's CA; Certificates: the client's, for mutual
	// TLS). Nil: plaintext, for a server on loopback only.
	TLS *tls.Config
	// Token is the bearer token of a server started with --auth.
	Token string
	// Mode is the mode of the logs the backend creates: "" (the server's
	// default, tern serve --mode), "local", "object" or "quorum". A log
	// that exists keeps the mode it was created with.
	Mode string
	// Embedded, when set, keeps the WALs in this client of this process
	// instead of a server: Nodes, TLS and Token are not used. The caller
	// owns it: the opener does not close it.
	Embedded *tern.Client

	// Prefix is put before a channel's name to name its log, so that the
	// channels of a Milvus cluster sit in a namespace of their own. Empty:
	// DefaultPrefix ("milvus/"). It must make valid log names with Milvus's
	// channel names (see client.ValidateName).
	Prefix string
	// RetryTimeout bounds how long a call keeps trying while the server
	// cannot be reached (client.Options.RetryTimeout). Zero: the client's
	// default, 30 seconds.
	RetryTimeout time.Duration

	// owned: the builder opened Embedded and its opener closes it.
	owned bool
}

// NewBuilder returns a builder of openers of WALs kept in the Tern cfg
// names. Its Name is WALName. It is not registered: Milvus's registry holds
// the one configured from the environment (see ConfigFromEnv); register
// another under WALName only in a program that does not link that one in.
func NewBuilder(cfg Config) walimpls.OpenerBuilderImpls { return builder{cfg} }

type builder struct{ cfg Config }

func (b builder) Name() string { return WALName }

// Build connects to the server (the first of Nodes that answers) or takes
// the embedded client. The opener it returns is safe for concurrent use;
// its Close closes the connection.
func (b builder) Build() (walimpls.OpenerImpls, error) {
	cfg := b.cfg
	mode, err := client.ParseMode(cfg.Mode)
	if err != nil {
		return nil, fmt.Errorf("tern wal: %w", err)
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if cfg.Embedded != nil {
		return newOpener(embedded{cfg.Embedded, cfg.owned}, prefix, mode), nil
	}
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("tern wal: %w: no Tern to keep the WALs in: set Config.Nodes (or $TERN_SERVER) to tern serve's address, or Config.Embedded", client.ErrInvalid)
	}
	c, err := client.Open(context.Background(), client.Options{
		Server:       cfg.Nodes[0],
		Nodes:        cfg.Nodes[1:],
		TLS:          cfg.TLS,
		Token:        cfg.Token,
		RetryTimeout: cfg.RetryTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("tern wal: connect to %v: %w", cfg.Nodes, err)
	}
	return newOpener(remote{c}, prefix, mode), nil
}

// envBuilder is the builder Milvus's registry holds: it reads its Config
// from the environment at each Build.
type envBuilder struct{}

func (envBuilder) Name() string { return WALName }

func (envBuilder) Build() (walimpls.OpenerImpls, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	o, err := NewBuilder(cfg).Build()
	if err != nil && cfg.owned {
		_ = cfg.Embedded.Close() // the error to report is Build's
	}
	return o, err
}
