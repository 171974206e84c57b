// Package auth is who may do what on a Tern server: the principals of an
// auth file (tern serve --auth), how a call proves to be one of them (a
// bearer token, whose hash the file holds, or an mTLS certificate's
// identity), their grants of permissions on log-name prefixes, and their
// quotas. It has no I/O but Load, and no clocks but the quotas' buckets.
package auth

import (
	"errors"
)

// Permission is what a grant allows on the logs under its prefix.
type Permission string

const (
	// Read allows describing and reading a log, and seeing it in ListLogs.
	Read Permission = "read"
	// Append allows opening a writer and appending (entries and time ticks).
	Append Permission = "append"
	// Subscribe allows creating, describing, listing, deleting, seeking and
	// consuming a log's subscriptions.
	Subscribe Permission = "subscribe"
	// Admin allows creating, deleting, truncating and repairing a log.
	Admin Permission = "admin"
)

// ErrBadFile is wrapped by every error of Parse and Load.
var ErrBadFile = errors.New("auth: bad auth file")

// Grant allows permissions on the logs whose names start with Prefix ("" is
// every log).
type Grant struct {
	Prefix string
	Allow  []Permission
}

// Quotas bound what a principal may use; a zero field is no bound.
type Quotas struct {
	// AppendBytesPerSecond is the rate of a token bucket of appended bytes
	// (payloads and properties), shared by all the principal's calls to one
	// server; AppendBurstBytes its size (zero: one second's worth).
	AppendBytesPerSecond int64
	AppendBurstBytes     int64
	// Logs bounds the logs under the prefixes the principal may administer,
	// counted when it creates one.
	Logs int
	// Subscriptions bounds the subscriptions the principal consumes at once
	// (open Subscribe streams) on one server.
	Subscriptions int
}

// Principal is one identity of the auth file.
type Principal struct {
	Name string
	// TokenHash is HashToken of its bearer token; empty for none.
	TokenHash string
	// Subject matches an mTLS client certificate's subject, as
	// pkix.Name.String prints it ("CN=indexer,O=acme"); SAN matches any of
	// its subject alternative names (a DNS name, an IP, an email address or
	// a URI). Empty for none.
	Subject, SAN string
	// Node marks the certificate identity of a node of the cluster: it may
	// call the replica service and send replica data.
	Node   bool
	Grants []Grant
	Quotas Quotas
}

// Policy is a parsed auth file. It is immutable and safe for concurrent use.
type Policy struct {
	Principals []*Principal
}
