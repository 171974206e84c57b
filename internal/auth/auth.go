// Package auth is who may do what on a Tern server: the principals of an
// auth file (tern serve --auth), how a call proves to be one of them (a
// bearer token, whose hash the file holds, or an mTLS certificate's
// identity), their grants of permissions on log-name prefixes, and their
// quotas. It has no I/O but Load, and no clocks but the quotas' buckets.
//
// The file holds a token's SHA-256, never the token (HashToken), and a
// server compares a presented token's hash with every principal's in
// constant time (Policy.ByToken). A fast hash is enough, where passwords
// need a slow salted one, because tokens are random secrets: NewToken's
// are 256 bits from crypto/rand, and HashToken and ByToken refuse tokens
// shorter than MinTokenBytes or with spaces or control characters, the
// marks of a word a person chose. Guessing such a token from its hash is
// no easier than guessing the token, and no rainbow table or dictionary
// holds it, so neither a salt nor a work factor would add anything; a fast
// hash also lets every call be checked without a cache of verified
// tokens.
//
// A certificate identity is matched by its subject or a SAN
// (Policy.ByCert) after the TLS handshake has verified the certificate
// against the client CA: the file trusts whatever that CA signs under
// these names.
package auth

import "errors"

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
