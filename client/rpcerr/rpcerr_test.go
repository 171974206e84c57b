package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every error crosses the wire as its code and comes back matching the same
// sentinel, with the server's message, through a status and through Proto.
func TestRoundTrip(t *testing.T) {
	for _, m := range mappings {
		err := fmt.Errorf("%w: details of %s", m.err, m.reason)
		switch m.err {
		case ErrCorrupt:
			err = &CorruptError{Path: "/x.seg", Pos: 7, Err: errors.New("bad crc")}
		case ErrTruncated:
			err = &TruncatedError{Offset: 1, Start: 2}
		case ErrNotOwner:
			err = &NotOwnerError{Log: "a/b", Owner: "127.0.0.1:7070"}
		case ErrConditionFailed:
			err = &EndMismatchError{Expected: 5, End: 9}
		}
		st := Status(err)
		if st.Code() != m.code {
			t.Errorf("%v: code %v, want %v", err, st.Code(), m.code)
		}
		for name, back := range map[string]error{"status": Error(st.Err()), "proto": FromProto(Proto(err))} {
			if !errors.Is(back, m.err) {
				t.Errorf("%v through %s came back as %v, which does not match %v", err, name, back, m.err)
			}
			if back.Error() != err.Error() {
				t.Errorf("%v through %s reads %q", err, name, back.Error())
			}
		}
	}
}

func TestEndMismatchCarriesEnd(t *testing.T) {
	err := fmt.Errorf("append: %w", &EndMismatchError{Expected: 3, End: 1 << 60})
	if !errors.Is(err, ErrConditionFailed) {
		t.Fatalf("%v does not match ErrConditionFailed", err)
	}
	if code := Status(err).Code(); code != codes.FailedPrecondition {
		t.Fatalf("code %v, want FailedPrecondition", code)
	}
	for _, back := range []error{Error(Status(err).Err()), FromProto(Proto(err))} {
		me, ok := As[*EndMismatchError](back)
		if !ok || me.Expected != 3 || me.End != 1<<60 || !errors.Is(back, ErrConditionFailed) {
			t.Fatalf("came back as %#v, want an EndMismatchError expecting 3 at end %d", back, uint64(1<<60))
		}
	}
}

func TestTruncatedCarriesStart(t *testing.T) {
	err := fmt.Errorf("read: %w", &TruncatedError{Offset: 3, Start: 42})
	for _, back := range []error{Error(Status(err).Err()), FromProto(Proto(err))} {
		te, ok := As[*TruncatedError](back)
		if !ok || te.Offset != 3 || te.Start != 42 {
			t.Fatalf("came back as %#v, want a TruncatedError at 3 starting at 42", back)
		}
	}
}

func TestNotOwnerCarriesOwner(t *testing.T) {
	err := fmt.Errorf("open: %w", &NotOwnerError{Log: "a/b", Owner: "10.0.0.2:7070"})
	for _, back := range []error{Error(Status(err).Err()), FromProto(Proto(err))} {
		ne, ok := As[*NotOwnerError](back)
		if !ok || ne.Log != "a/b" || ne.Owner != "10.0.0.2:7070" {
			t.Fatalf("came back as %#v, want a NotOwnerError naming 10.0.0.2:7070", back)
		}
	}
}

func TestOtherErrors(t *testing.T) {
	if Status(nil) != nil || Error(nil) != nil {
		t.Fatal("nil error became a status")
	}
	if st := Status(errors.New("boom")); st.Code() != codes.Internal {
		t.Errorf("an unknown error is %v, want Internal", st.Code())
	}
	if back := Error(Status(context.Canceled).Err()); !errors.Is(back, context.Canceled) {
		t.Errorf("a cancellation came back as %v", back)
	}
	if back := Error(Status(context.DeadlineExceeded).Err()); !errors.Is(back, context.DeadlineExceeded) {
		t.Errorf("a deadline came back as %v", back)
	}
	plain := status.Error(codes.Unavailable, "connection refused")
	if back := Error(plain); status.Code(back) != codes.Unavailable {
		t.Errorf("a transport error came back as %v", back)
	}
	if st := Status(plain); st.Code() != codes.Unavailable {
		t.Errorf("a status error became %v", st.Code())
	}
}

// A refusal of the server's authentication or authorization matches its
// sentinel even when whatever sent it (gRPC, an interceptor, a proxy) added
// no Tern reason.
func TestAuthCodesWithoutReason(t *testing.T) {
	for code, want := range map[codes.Code]error{codes.Unauthenticated: ErrUnauthenticated, codes.PermissionDenied: ErrPermissionDenied} {
		back := Error(status.Error(code, "no token"))
		if !errors.Is(back, want) || back.Error() != "no token" {
			t.Errorf("a bare %v came back as %v, want %v reading \"no token\"", code, back, want)
		}
		if st := Status(back); st.Code() != code {
			t.Errorf("%v goes back on the wire as %v", back, st.Code())
		}
	}
}

// Resent says which errors the Go client sends an append again on.
func TestResent(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w: etcd", ErrUnavailable), true},
		{fmt.Errorf("%w: shutting down", ErrClosed), true},
		{&NotOwnerError{Owner: "n2:7070"}, true},
		{fmt.Errorf("%w: newer", ErrFenced), false},
		{ErrTakenOver, false},
		{fmt.Errorf("%w: end 3", ErrConditionFailed), false},
		{fmt.Errorf("%w: big", ErrTooLarge), false},
		{context.Canceled, false},
	} {
		if got := Resent(tt.err); got != tt.want {
			t.Errorf("Resent(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
