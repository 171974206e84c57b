// Package rpcerr defines the errors of Tern's API and how each crosses gRPC:
// as a status code plus an ErrorInfo detail whose reason names the error,
// mapped back on the client to the same sentinel, so that
// errors.Is(err, tern.ErrFenced) holds for an embedded log and a remote one.
//
// Package tern re-exports the sentinels; the server and the remote client
// use Status and Error, the one place where errors and codes meet.
package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/api/ternpb"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/wal"
)

// The API's errors that no lower layer defines.
var (
	ErrNotFound    = errors.New("tern: log not found")
	ErrExist       = errors.New("tern: log already exists")
	ErrSubNotFound = errors.New("tern: subscription not found")
	ErrSubExist    = errors.New("tern: subscription already exists")
	ErrInvalidName = errors.New("tern: invalid name")
	ErrInvalid     = errors.New("tern: invalid argument")
	ErrTooLarge    = errors.New("tern: too large")
	ErrLocked      = errors.New("tern: data directory is in use by another process")
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

// Domain is the ErrorInfo domain of Tern's errors.
const Domain = "tern.dev"

// mapping is one error's wire form. The first mapping whose err matches
// (errors.Is) an error is used, so more specific errors come first.
type mapping struct {
	err    error
	code   codes.Code
	reason string
}

var mappings = []mapping{
	{wal.ErrTruncated, codes.OutOfRange, "TRUNCATED"},
	{wal.ErrOutOfRange, codes.OutOfRange, "OUT_OF_RANGE"},
	{wal.ErrFenced, codes.FailedPrecondition, "FENCED"},
	{ErrNotOwner, codes.FailedPrecondition, "NOT_OWNER"},
	{ErrNotFound, codes.NotFound, "LOG_NOT_FOUND"},
	{ErrSubNotFound, codes.NotFound, "SUBSCRIPTION_NOT_FOUND"},
	{ErrExist, codes.AlreadyExists, "LOG_EXISTS"},
	{ErrSubExist, codes.AlreadyExists, "SUBSCRIPTION_EXISTS"},
	{ErrInvalidName, codes.InvalidArgument, "INVALID_NAME"},
	{ErrTooLarge, codes.InvalidArgument, "TOO_LARGE"},
	{ErrInvalid, codes.InvalidArgument, "INVALID_ARGUMENT"},
	{segment.ErrCorrupt, codes.DataLoss, "CORRUPT"},
	{wal.ErrClosed, codes.Unavailable, "CLOSED"},
	{ErrLocked, codes.Unavailable, "LOCKED"},
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
			if te, ok := errors.AsType[*wal.TruncatedError](err); ok {
				md = map[string]string{"offset": strconv.FormatUint(te.Offset, 10), "start": strconv.FormatUint(te.Start, 10)}
			}
			if ne, ok := errors.AsType[*NotOwnerError](err); ok {
				md = map[string]string{"log": ne.Log, "owner": ne.Owner}
			}
			return m.code, m.reason, md
		}
	}
	return codes.Internal, "", nil
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

// Error turns an error returned by a gRPC call into Tern's error for it: one
// that matches the sentinel the server's error matched (errors.Is) and reads
// as the server's message. Errors that carry no Tern reason stay gRPC status
// errors, except cancellations, which become the context errors.
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
	if reason == "TRUNCATED" {
		off, _ := strconv.ParseUint(md["offset"], 10, 64)
		start, _ := strconv.ParseUint(md["start"], 10, 64)
		return &wal.TruncatedError{Offset: off, Start: start}
	}
	for _, m := range mappings {
		if m.reason == reason && reason != "" {
			return &remoteError{msg: msg, err: m.err}
		}
	}
	switch code {
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
