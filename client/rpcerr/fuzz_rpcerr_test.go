package rpcerr

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/client/ternpb"
)

// class is what a client can tell of an error: its code, and the sentinel
// it matches.
type class struct {
	code codes.Code
	err  error
}

func classOf(err error) class {
	c := class{code: Status(err).Code()}
	for _, m := range mappings {
		if errors.Is(err, m.err) {
			c.err = m.err
			break
		}
	}
	return c
}

// checkDecoded checks an error decoded from the wire with the reason it
// carried, and that it crosses the wire again, both ways, unchanged.
func checkDecoded(t *testing.T, got error, reason string) {
	t.Helper()
	if got == nil {
		t.Fatal("a failure decoded as no error")
	}
	c := classOf(got)
	for _, m := range mappings {
		if m.reason == reason && c.err != m.err {
			t.Fatalf("reason %s decoded as %v, which does not match %v", reason, got, m.err)
		}
	}
	for name, back := range map[string]error{"status": Error(Status(got).Err()), "proto": FromProto(Proto(got))} {
		if classOf(back) != c {
			t.Fatalf("%v (%+v) through %s came back as %v (%+v)", got, c, name, back, classOf(back))
		}
		if te, ok := As[*TruncatedError](got); ok {
			if bt, ok := As[*TruncatedError](back); !ok || *bt != *te {
				t.Fatalf("%#v through %s came back as %#v", te, name, back)
			}
		}
		if ne, ok := As[*NotOwnerError](got); ok {
			if bn, ok := As[*NotOwnerError](back); !ok || *bn != *ne {
				t.Fatalf("%#v through %s came back as %#v", ne, name, back)
			}
		}
		if me, ok := As[*EndMismatchError](got); ok {
			if bm, ok := As[*EndMismatchError](back); !ok || *bm != *me {
				t.Fatalf("%#v through %s came back as %#v", me, name, back)
			}
		}
	}
}

// FuzzFromProto decodes arbitrary Error messages, as the remote client
// receives them in the results of AppendStream. Every one is a failed
// batch, so it must decode to an error, which matches the sentinel its
// reason names and crosses the wire again as the same error.
func FuzzFromProto(f *testing.F) {
	for _, err := range []error{
		fmt.Errorf("%w: epoch 3", ErrFenced),
		&TruncatedError{Offset: 3, Start: 42},
		&NotOwnerError{Log: "a/b", Owner: "10.0.0.2:7070"},
		&EndMismatchError{Expected: 4, End: 7},
		fmt.Errorf("%w: name", ErrInvalidName),
		errors.New("boom"),
		status.Error(codes.Unavailable, "connection refused"),
	} {
		b, err := proto.Marshal(Proto(err))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := new(ternpb.Error)
		if proto.Unmarshal(b, e) != nil {
			return
		}
		checkDecoded(t, FromProto(e), e.GetReason())
	})
}

// FuzzError decodes arbitrary google.rpc.Status messages, as a call's
// failure carries them, with any details. Error must not panic, must map a
// Tern reason to its sentinel, and what it gives must cross the wire again
// as the same error.
func FuzzError(f *testing.F) {
	for _, err := range []error{
		fmt.Errorf("%w: epoch 3", ErrFenced),
		&TruncatedError{Offset: 3, Start: 42},
		&NotOwnerError{Log: "a/b", Owner: "10.0.0.2:7070"},
		errors.New("boom"),
	} {
		b, err := proto.Marshal(Status(err).Proto())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	other, err := status.New(codes.NotFound, "x").WithDetails(&errdetails.ErrorInfo{Reason: "LOG_NOT_FOUND", Domain: "example.com"})
	if err != nil {
		f.Fatal(err)
	}
	if b, err := proto.Marshal(other.Proto()); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := new(spb.Status)
		if proto.Unmarshal(b, s) != nil || codes.Code(s.GetCode()) == codes.OK {
			return // OK is no failure: the call succeeded
		}
		var reason string
		for _, d := range status.FromProto(s).Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == Domain {
				reason = info.Reason
			}
		}
		checkDecoded(t, Error(status.ErrorProto(s)), reason)
	})
}
