package replica

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errorDomain is the ErrorInfo domain of Tern's errors.
const errorDomain = "tern.dev"

// wireErrors is how the package's errors cross gRPC, the one place where
// errors and codes meet: the first entry an error matches (errors.Is) gives
// its status, and the client maps the reason back to the sentinel. The
// reasons are listed in api/ternpb/replica.proto.
var wireErrors = []wireError{
	{ErrFenced, codes.FailedPrecondition, "SEGMENT_FENCED"},
	{ErrSealed, codes.FailedPrecondition, "SEGMENT_SEALED"},
	{ErrGap, codes.FailedPrecondition, "FRAGMENT_GAP"},
	{ErrMismatch, codes.FailedPrecondition, "FRAGMENT_MISMATCH"},
	{ErrFull, codes.ResourceExhausted, "REPLICA_FULL"},
	{ErrNotFound, codes.NotFound, "SEGMENT_NOT_FOUND"},
	{ErrInvalid, codes.InvalidArgument, "INVALID_ARGUMENT"},
	{ErrClosed, codes.Unavailable, "REPLICA_CLOSED"},
	{ErrCorrupt, codes.DataLoss, "JOURNAL_CORRUPT"},
}

// toStatus returns err as a gRPC status error. Errors the table does not
// know are Internal; context errors are Canceled and DeadlineExceeded.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if m, ok := wireErrorOf(err); ok {
		st := status.New(m.code, err.Error())
		if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: m.reason, Domain: errorDomain}); derr == nil {
			st = withInfo
		}
		return st.Err()
	}
	return status.Error(codes.Internal, err.Error())
}

// wireError is an entry of wireErrors.
type wireError = struct {
	err    error
	code   codes.Code
	reason string
}

// wireErrorOf returns the first entry of wireErrors that err matches.
func wireErrorOf(err error) (wireError, bool) {
	for _, m := range wireErrors {
		if errors.Is(err, m.err) {
			return m, true
		}
	}
	return wireError{}, false
}

// fromReason returns the error a server sent with reason and msg: one that
// matches the reason's sentinel and reads as msg, or false for a reason
// wireErrors does not list.
func fromReason(reason, msg string) (error, bool) {
	for _, m := range wireErrors {
		if m.reason == reason {
			return &remoteError{msg: msg, err: m.err}, true
		}
	}
	return nil, false
}

// fromStatus turns an error of a gRPC call into the package's error for it:
// one that matches the sentinel the server's error matched and reads as the
// server's message. Other statuses stay status errors, except cancellations,
// which become the context errors.
func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != errorDomain {
			continue
		}
		if err, ok := fromReason(info.Reason, st.Message()); ok {
			return err
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return fmt.Errorf("%s: %w", st.Message(), context.Canceled)
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w", st.Message(), context.DeadlineExceeded)
	}
	return err
}

// remoteError is a server's error on the client: the server's message, and
// the sentinel it matched.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }
