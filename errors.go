package tern

import "github.com/ternwal/tern/client"

// Errors returned by Tern. Callers branch on them with errors.Is; the message
// of the returned error adds what is known where it happened. They are the
// client module's (package client), so an embedded client, a client of a
// server and a program that imports only the client module test for the
// same values.
var (
	// ErrNotFound: the log does not exist.
	ErrNotFound = client.ErrNotFound
	// ErrExist: a log of that name exists already.
	ErrExist = client.ErrExist
	// ErrSubNotFound: the log has no subscription of that name.
	ErrSubNotFound = client.ErrSubNotFound
	// ErrSubExist: the log has a subscription of that name already.
	ErrSubExist = client.ErrSubExist
	// ErrInvalidName: a log or subscription name breaks the naming rules.
	ErrInvalidName = client.ErrInvalidName
	// ErrInvalid: a request is malformed (an option out of range, a
	// missing field).
	ErrInvalid = client.ErrInvalid
	// ErrFenced: a newer writer has been opened on the log.
	ErrFenced = client.ErrFenced
	// ErrTruncated: the offset read is below the log's start. The error is a
	// *TruncatedError that says where the log now starts.
	ErrTruncated = client.ErrTruncated
	// ErrOutOfRange: the offset is beyond the log's end.
	ErrOutOfRange = client.ErrOutOfRange
	// ErrTooLarge: an entry is over the log's MaxEntryBytes, or a batch over
	// MaxBatchBytes.
	ErrTooLarge = client.ErrTooLarge
	// ErrCorrupt: stored data failed its checks. The error is a
	// *CorruptError that names the file and position.
	ErrCorrupt = client.ErrCorrupt
	// ErrClosed: the client, log, writer or reader is closed.
	ErrClosed = client.ErrClosed
	// ErrTakenOver: a newer Subscriber of the subscription took it over;
	// the older one's calls fail with it. It matches ErrClosed too.
	ErrTakenOver = client.ErrTakenOver
	// ErrLocked: another process has the data directory open.
	ErrLocked = client.ErrLocked
	// ErrUnsupported: the call is one this kind of client cannot make: a
	// data-directory call (LogID, ListLogsMeta, CloseLog) on a client of a
	// server, or Compact of a server's log, which its server compacts.
	ErrUnsupported = client.ErrUnsupported
	// ErrLimit: a configured bound (logs per server, subscriptions per
	// log, streams, memory for appends and reads) would be passed; the
	// message names the bound and the setting that raises it.
	ErrLimit = client.ErrLimit
	// ErrNoSpace: a disk, or the metadata store's quota, is full; the
	// message names which. Appends resume once space is freed.
	ErrNoSpace = client.ErrNoSpace
	// ErrUnavailable: the metadata store or a peer does not answer now; the
	// call may be retried.
	ErrUnavailable = client.ErrUnavailable
	// ErrDamaged: the log is damaged (tern log repair); it can be read up
	// to the damage and takes no appends.
	ErrDamaged = client.ErrDamaged
	// ErrNotOwner: in a cluster, another node serves the log; the error is
	// a *NotOwnerError that names it. The Go client follows it by itself.
	ErrNotOwner = client.ErrNotOwner
	// ErrConditionFailed: a conditional append found the log's end
	// elsewhere than it expected, and appended nothing. The error is an
	// *EndMismatchError that says where the log ends.
	ErrConditionFailed = client.ErrConditionFailed
	// ErrUnauthenticated: the server requires authentication and the client
	// gave no token or certificate it knows (Options.Token, Options.TLS).
	ErrUnauthenticated = client.ErrUnauthenticated
	// ErrPermissionDenied: the server's grants do not allow the call; the
	// message names the permission and the log.
	ErrPermissionDenied = client.ErrPermissionDenied
	// ErrTLS: Open could not agree on TLS with the server: one side speaks
	// TLS and the other does not, or a certificate was refused; the message
	// says which, and what to do.
	ErrTLS = client.ErrTLS
)

// NotOwnerError names the node that serves a log in a cluster.
type NotOwnerError = client.NotOwnerError

// TruncatedError reports a read below the log's start.
type TruncatedError = client.TruncatedError

// EndMismatchError reports where the log ends, for a conditional append
// that expected it elsewhere.
type EndMismatchError = client.EndMismatchError

// CorruptError reports damaged data: the file and the byte position.
type CorruptError = client.CorruptError
