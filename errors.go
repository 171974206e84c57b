package tern

import (
	"github.com/ternwal/tern/client/rpcerr"
)

// Errors returned by Tern. Callers branch on them with errors.Is; the message
// of the returned error adds what is known where it happened. A remote
// client returns the same errors as an embedded one.
var (
	// ErrNotFound: the log does not exist.
	ErrNotFound = rpcerr.ErrNotFound
	// ErrExist: a log of that name exists already.
	ErrExist = rpcerr.ErrExist
	// ErrSubNotFound: the log has no subscription of that name.
	ErrSubNotFound = rpcerr.ErrSubNotFound
	// ErrSubExist: the log has a subscription of that name already.
	ErrSubExist = rpcerr.ErrSubExist
	// ErrInvalidName: a log or subscription name breaks the naming rules.
	ErrInvalidName = rpcerr.ErrInvalidName
	// ErrInvalid: a request is malformed (an option out of range, a
	// missing field).
	ErrInvalid = rpcerr.ErrInvalid
	// ErrFenced: a newer writer has been opened on the log.
	ErrFenced = rpcerr.ErrFenced
	// ErrTruncated: the offset read is below the log's start. The error is a
	// *TruncatedError that says where the log now starts.
	ErrTruncated = rpcerr.ErrTruncated
	// ErrOutOfRange: the offset is beyond the log's end.
	ErrOutOfRange = rpcerr.ErrOutOfRange
	// ErrTooLarge: an entry is over the log's MaxEntryBytes, or a batch over
	// MaxBatchBytes.
	ErrTooLarge = rpcerr.ErrTooLarge
	// ErrCorrupt: stored data failed its checks. The error is a
	// *CorruptError that names the file and position.
	ErrCorrupt = rpcerr.ErrCorrupt
	// ErrClosed: the client, log, writer or reader is closed.
	ErrClosed = rpcerr.ErrClosed
	// ErrLocked: another process has the data directory open.
	ErrLocked = rpcerr.ErrLocked
	// ErrUnsupported: the call is one this kind of client cannot make: a
	// data-directory call (LogID, ListLogsMeta, CloseLog) on a client of a
	// server, or Compact of a server's log, which its server compacts.
	ErrUnsupported = rpcerr.ErrUnsupported
	// ErrNotOwner: in a cluster, another node serves the log; the error is
	// a *NotOwnerError that names it. The Go client follows it by itself.
	ErrNotOwner = rpcerr.ErrNotOwner
)

// NotOwnerError names the node that serves a log in a cluster.
type NotOwnerError = rpcerr.NotOwnerError

// TruncatedError reports a read below the log's start.
type TruncatedError = rpcerr.TruncatedError

// CorruptError reports damaged data: the file and the byte position.
type CorruptError = rpcerr.CorruptError
