// Package rpcerr is the one home of Tern's errors: every sentinel and typed
// error of the API, of the engines and of the replica protocol is defined
// here once, and one table says how each crosses gRPC: as a status code plus
// an ErrorInfo detail whose reason names the error, mapped back on the other
// side to the same sentinel, so that errors.Is(err, tern.ErrFenced) holds for
// an embedded log and a remote one alike.
//
// The client module (package client), the root package tern, the server, the
// engines and the replicas all use these values; none defines its own.
package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/ternpb"
)

// The API's errors.
var (
	ErrNotFound    = errors.New("tern: log not found")
	ErrExist       = errors.New("tern: log already exists")
	ErrSubNotFound = errors.New("tern: subscription not found")
	ErrSubExist    = errors.New("tern: subscription already exists")
	ErrInvalidName = errors.New("tern: invalid name")
	ErrInvalid     = errors.New("tern: invalid argument")
	ErrTooLarge    = errors.New("tern: too large")
	ErrLocked      = errors.New("tern: data directory is in use by another process")
	ErrClosed      = errors.New("tern: closed")
	ErrFenced      = errors.New("tern: writer was fenced by a newer writer")
	ErrTruncated   = errors.New("tern: offset is below the log's start")
	ErrOutOfRange  = errors.New("tern: offset is beyond the log's end")
	// ErrCorrupt is matched by every *CorruptError.
	ErrCorrupt = errors.New("segment: corrupt")
	// ErrUnsupported: the call is one this kind of client cannot make (an
	// embedded client's data-directory calls on a client of a server, say).
	ErrUnsupported = errors.New("tern: not supported by this client")
	// ErrLimit: a configured bound (logs per server, subscriptions per
	// log, streams, memory for appends and reads) would be passed; the
	// message names the bound and the setting that raises it.
	ErrLimit = errors.New("tern: over a limit")
	// ErrNoSpace: a disk (or etcd's backend quota) is full; the message
	// names which. Appends resume by themselves once space is freed.
	ErrNoSpace = errors.New("tern: no space left")
	// ErrUnavailable: something the call needs (the metadata store, a peer)
	// does not answer now; the call may be retried.
	ErrUnavailable = errors.New("tern: unavailable")
	// ErrDamaged: the log is damaged and takes no appends until it is
	// repaired (tern log repair); its intact prefix can be read. The
	// message names the file and byte.
	ErrDamaged = errors.New("tern: log is damaged")
	// ErrUnauthenticated: the server requires authentication (tern serve
	// --auth) and the call carried no token or client certificate it knows.
	ErrUnauthenticated = errors.New("tern: not authenticated")
	// ErrPermissionDenied: the caller is authenticated but not granted the
	// call's permission on the log; the message names both.
	ErrPermissionDenied = errors.New("tern: permission denied")
)

// ErrTakenOver: a newer subscriber of the subscription took it over, and
// this one is done. It matches ErrClosed too. Unlike a server's ErrClosed,
// which a client retries (the server is going away), it is final: a client
// that reopened would take the subscription back, and the two would take
// turns.
var ErrTakenOver error = takenOverError{}

type takenOverError struct{}

func (takenOverError) Error() string { return "tern: subscriber taken over" }

// Is makes errors.Is(err, ErrClosed) hold.
func (takenOverError) Is(target error) bool { return target == ErrClosed }

// ErrTLS is the client's alone and never crosses the wire, which it failed
// to reach: Open could not agree on TLS with the server (one side speaks
// TLS and the other does not, or one refused the other's certificate).
var ErrTLS = errors.New("tern: TLS handshake failed")

// The errors of the replica protocol (api/ternpb/replica.proto), between a
// quorum log's writer and the nodes that hold its open segment.
var (
	// ErrSegmentFenced: a newer epoch fenced the segment on the replica.
	ErrSegmentFenced = errors.New("replica: segment fenced by a newer epoch")
	// ErrSegmentSealed: the segment is sealed and takes no more fragments.
	ErrSegmentSealed = errors.New("replica: segment is sealed")
	// ErrFragmentGap: the fragment would leave a gap after the replica's last.
	ErrFragmentGap = errors.New("replica: fragment would leave a gap")
	// ErrReplicaFull: the replica has no room; another replica may.
	ErrReplicaFull = errors.New("replica: replica is full")
	// ErrSegmentNotFound: the replica holds no such segment or fragment.
	ErrSegmentNotFound = errors.New("replica: not found")
	// ErrFragmentMismatch: other bytes are stored under that fragment number.
	ErrFragmentMismatch = errors.New("replica: fragment differs from the stored one")
	// ErrReplicaClosed: the replica's store is closed.
	ErrReplicaClosed = errors.New("replica: store is closed")
	// ErrJournalCorrupt: the replica's copy failed its check; read another.
	ErrJournalCorrupt = errors.New("replica: corrupt journal")
)

// ErrNotOwner is matched by a *NotOwnerError: in a cluster, another node
// serves the log.
var ErrNotOwner = errors.New("tern: another node serves the log")

// NotOwnerError says which node serves a log: the client retries there.
type NotOwnerError struct {
	Log   string
	Owner string // the serving node's address, host:port
}

func (e *NotOwnerError) Error() string {
	return fmt.Sprintf("tern: log %q is served by the node at %s", e.Log, e.Owner)
}

// Is makes errors.Is(err, ErrNotOwner) hold.
func (e *NotOwnerError) Is(target error) bool { return target == ErrNotOwner }

// ErrConditionFailed is matched by an *EndMismatchError: a conditional
// append found the log's end elsewhere than it expected, and appended
// nothing.
var ErrConditionFailed = errors.New("tern: the log's end is not where the conditional append expected it")

// EndMismatchError is the failure of a conditional append (IfEnd): the log
// ends at End, counting the appends queued before it, not at Expected. It
// matches ErrConditionFailed with errors.Is.
type EndMismatchError struct {
	Expected uint64 // the end the append was conditioned on
	End      uint64 // where the log ends
}

func (e *EndMismatchError) Error() string {
	return fmt.Sprintf("tern: conditional append expected the log to end at offset %d, but it ends at %d; nothing was appended", e.Expected, e.End)
}

// Is makes errors.Is(err, ErrConditionFailed) hold.
func (e *EndMismatchError) Is(target error) bool { return target == ErrConditionFailed }

// TruncatedError is returned for a read below the log's start. It matches
// ErrTruncated with errors.Is.
type TruncatedError struct {
	Offset uint64 // the offset asked for
	Start  uint64 // where the log now starts
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("tern: offset %d was truncated; the log now starts at offset %d", e.Offset, e.Start)
}

// Is makes errors.Is(err, ErrTruncated) true.
func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }

// CorruptError reports damaged data: the file (or object) and the byte
// position where the damage was found.
type CorruptError struct {
	Path string
	Pos  int64
	Err  error // what is wrong there
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("segment: %s is corrupt at byte %d: %v", e.Path, e.Pos, e.Err)
}

// Unwrap lets errors.Is match ErrCorrupt and the underlying cause.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// As is errors.As for a target type: the first error in err's tree of type
// T. (errors.AsType, which does the same, needs Go 1.26; the client module
// builds with Go 1.24.)
func As[T error](err error) (T, bool) {
	var t T
	ok := errors.As(err, &t)
	return t, ok
}

// Domain is the ErrorInfo domain of Tern's errors.
const Domain = "tern.dev"

// mapping is one error's wire form. The first mapping whose err matches
// (errors.Is) an error is used, so more specific errors come first.
type mapping struct {
	err    error
	code   codes.Code
	reason string
}

// Mapping is one row of the table: the error, its status code and its
// ErrorInfo reason.
type Mapping struct {
	Err    error
	Code   codes.Code
	Reason string
}

// Table returns the table, in the order it is matched in: docs/server.md
// prints it for operators, and a test keeps the two the same.
func Table() []Mapping {
	t := make([]Mapping, len(mappings))
	for i, m := range mappings {
		t[i] = Mapping{m.err, m.code, m.reason}
	}
	return t
}

var mappings = []mapping{
	{ErrTruncated, codes.OutOfRange, "TRUNCATED"},
	{ErrOutOfRange, codes.OutOfRange, "OUT_OF_RANGE"},
	{ErrFenced, codes.FailedPrecondition, "FENCED"},
	{ErrNotOwner, codes.FailedPrecondition, "NOT_OWNER"},
	{ErrTakenOver, codes.FailedPrecondition, "TAKEN_OVER"}, // before ErrClosed, which it matches
	{ErrConditionFailed, codes.FailedPrecondition, "CONDITION_FAILED"},
	{ErrNotFound, codes.NotFound, "LOG_NOT_FOUND"},
	{ErrSubNotFound, codes.NotFound, "SUBSCRIPTION_NOT_FOUND"},
	{ErrExist, codes.AlreadyExists, "LOG_EXISTS"},
	{ErrSubExist, codes.AlreadyExists, "SUBSCRIPTION_EXISTS"},
	{ErrInvalidName, codes.InvalidArgument, "INVALID_NAME"},
	{ErrTooLarge, codes.InvalidArgument, "TOO_LARGE"},
	{ErrInvalid, codes.InvalidArgument, "INVALID_ARGUMENT"},
	{ErrDamaged, codes.DataLoss, "DAMAGED"},
	{ErrCorrupt, codes.DataLoss, "CORRUPT"},
	{ErrNoSpace, codes.ResourceExhausted, "NO_SPACE"},
	{ErrLimit, codes.ResourceExhausted, "LIMIT"},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
	{ErrClosed, codes.Unavailable, "CLOSED"},
	{ErrLocked, codes.Unavailable, "LOCKED"},
	{ErrUnsupported, codes.Unimplemented, "UNSUPPORTED"},
	{ErrUnauthenticated, codes.Unauthenticated, "UNAUTHENTICATED"},
	{ErrPermissionDenied, codes.PermissionDenied, "PERMISSION_DENIED"},
	// The replica protocol's, listed in api/ternpb/replica.proto.
	{ErrSegmentFenced, codes.FailedPrecondition, "SEGMENT_FENCED"},
	{ErrSegmentSealed, codes.FailedPrecondition, "SEGMENT_SEALED"},
	{ErrFragmentGap, codes.FailedPrecondition, "FRAGMENT_GAP"},
	{ErrFragmentMismatch, codes.FailedPrecondition, "FRAGMENT_MISMATCH"},
	{ErrReplicaFull, codes.ResourceExhausted, "REPLICA_FULL"},
	{ErrSegmentNotFound, codes.NotFound, "SEGMENT_NOT_FOUND"},
	{ErrReplicaClosed, codes.Unavailable, "REPLICA_CLOSED"},
	{ErrJournalCorrupt, codes.DataLoss, "JOURNAL_CORRUPT"},
}

// Status returns the status that carries err over gRPC. A nil err gives a
// nil status; an error Tern does not define is Internal, context errors are
// Canceled and DeadlineExceeded, and a status error passes through.
func Status(err error) *status.Status {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	code, reason, md := classify(err)
	st := status.New(code, err.Error())
	if reason == "" {
		return st
	}
	withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: md})
	if derr != nil {
		return st
	}
	return withInfo
}

func classify(err error) (codes.Code, string, map[string]string) {
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled, "", nil
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, "", nil
	}
	for _, m := range mappings {
		if errors.Is(err, m.err) {
			var md map[string]string
			if te, ok := As[*TruncatedError](err); ok {
				md = map[string]string{"offset": strconv.FormatUint(te.Offset, 10), "start": strconv.FormatUint(te.Start, 10)}
			}
			if ne, ok := As[*NotOwnerError](err); ok {
				md = map[string]string{"log": ne.Log, "owner": ne.Owner}
			}
			if me, ok := As[*EndMismatchError](err); ok {
				md = map[string]string{"expected": strconv.FormatUint(me.Expected, 10), "end": strconv.FormatUint(me.End, 10)}
			}
			return m.code, m.reason, md
		}
	}
	return codes.Internal, "", nil
}

// StatusError is Status(err) as the error a gRPC handler returns: nil for a
// nil err.
func StatusError(err error) error { return Status(err).Err() }

// Reason is the ErrorInfo reason of the first error of the table that err
// matches, for a protocol that carries errors outside gRPC's statuses (the
// replicas' add connections); ok is false for an error the table does not
// list.
func Reason(err error) (reason string, ok bool) {
	for _, m := range mappings {
		if errors.Is(err, m.err) {
			return m.reason, true
		}
	}
	return "", false
}

// FromReason is the inverse of Reason: an error that matches the sentinel of
// reason and reads as msg, or false for a reason the table does not list.
func FromReason(reason, msg string) (error, bool) {
	for _, m := range mappings {
		if m.reason == reason && reason != "" {
			return &remoteError{msg: msg, err: m.err}, true
		}
	}
	return nil, false
}

// Proto returns err as the Error message of a failed batch in AppendStream.
func Proto(err error) *ternpb.Error {
	code, reason, md := classify(err)
	if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	return &ternpb.Error{Code: uint32(code), Message: err.Error(), Reason: reason, Metadata: md}
}

// FromProto is the inverse of Proto. An Error always reports a failure:
// one whose code is OK, which Proto never gives, is Unknown, not nil.
func FromProto(e *ternpb.Error) error {
	code := codes.Code(e.Code)
	if code == codes.OK {
		code = codes.Unknown
	}
	return fromParts(code, e.Message, e.Reason, e.Metadata)
}

// Resent reports whether a Tern client sends an append that failed with
// err, a Tern error (from Error or FromProto), again: the server went away
// or is shutting down, the log or its node is unavailable, or the log is
// served elsewhere. Never when a newer writer fenced it or a newer
// subscriber took over. The server stops an append stream on these
// errors, so that the client's resends keep their order.
func Resent(err error) bool {
	switch {
	case errors.Is(err, ErrFenced), errors.Is(err, ErrTakenOver):
		return false
	}
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrClosed) || errors.Is(err, ErrNotOwner)
}

// Error turns an error returned by a gRPC call into Tern's error for it: one
// that matches the sentinel the server's error matched (errors.Is) and reads
// as the server's message. Errors that carry no Tern reason stay gRPC status
// errors, except cancellations, which become the context errors, and
// Unauthenticated and PermissionDenied, which become ErrUnauthenticated and
// ErrPermissionDenied.
func Error(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var reason string
	var md map[string]string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == Domain {
			reason, md = info.Reason, info.Metadata
		}
	}
	return fromParts(st.Code(), st.Message(), reason, md)
}

func fromParts(code codes.Code, msg, reason string, md map[string]string) error {
	if reason == "NOT_OWNER" {
		return &NotOwnerError{Log: md["log"], Owner: md["owner"]}
	}
	if reason == "CONDITION_FAILED" {
		expected, _ := strconv.ParseUint(md["expected"], 10, 64)
		end, _ := strconv.ParseUint(md["end"], 10, 64)
		return &EndMismatchError{Expected: expected, End: end}
	}
	if reason == "TRUNCATED" {
		off, _ := strconv.ParseUint(md["offset"], 10, 64)
		start, _ := strconv.ParseUint(md["start"], 10, 64)
		return &TruncatedError{Offset: off, Start: start}
	}
	for _, m := range mappings {
		if m.reason == reason && reason != "" {
			return &remoteError{msg: msg, err: m.err}
		}
	}
	switch code {
	// These two are the sentinels' whatever sends them: gRPC itself, an
	// interceptor or a proxy in front of the server, none of which adds
	// Tern's reason.
	case codes.Unauthenticated:
		return &remoteError{msg: msg, err: ErrUnauthenticated}
	case codes.PermissionDenied:
		return &remoteError{msg: msg, err: ErrPermissionDenied}
	case codes.Canceled:
		return fmt.Errorf("%s: %w", msg, context.Canceled)
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w", msg, context.DeadlineExceeded)
	}
	return status.Error(code, msg)
}

// remoteError is a server's error on the client: the server's message, and
// the sentinel it matched.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }
