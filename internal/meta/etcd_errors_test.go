package meta

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/rpcerr"
)

// Every failure of etcd's client that a retry or an operator can cure is
// one of Tern's sentinels, which the server answers with its status code;
// the rest pass through as they are.
func TestClassify(t *testing.T) {
	e := &Etcd{endpoints: []string{"127.0.0.1:2379"}, timeout: time.Second}
	live := context.Background()
	canceled, cancel := context.WithCancel(live)
	cancel()
	timedOut, cancel2 := context.WithTimeoutCause(live, 0, errNoAnswer)
	defer cancel2()
	<-timedOut.Done()
	callerDeadline, cancel3 := context.WithTimeout(live, 0)
	defer cancel3()
	<-callerDeadline.Done()

	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want error      // a sentinel, or the error itself when it passes through
		code codes.Code // the status a sentinel is sent as
	}{
		{"nospace", live, rpctypes.ErrNoSpace, rpcerr.ErrNoSpace, codes.ResourceExhausted},
		{"nospace grpc", live, rpctypes.ErrGRPCNoSpace, rpcerr.ErrNoSpace, codes.ResourceExhausted},
		{"wrapped nospace", live, fmt.Errorf("txn: %w", rpctypes.ErrNoSpace), rpcerr.ErrNoSpace, codes.ResourceExhausted},
		{"corrupt", live, rpctypes.ErrCorrupt, rpcerr.ErrUnavailable, codes.Unavailable},
		{"no leader", live, rpctypes.ErrNoLeader, rpcerr.ErrUnavailable, codes.Unavailable},
		{"etcd timeout", live, rpctypes.ErrTimeout, rpcerr.ErrUnavailable, codes.Unavailable},
		{"stopped", live, rpctypes.ErrStopped, rpcerr.ErrUnavailable, codes.Unavailable},
		{"too many requests", live, rpctypes.ErrTooManyRequests, rpcerr.ErrUnavailable, codes.Unavailable},
		{"connection refused", live, status.Error(codes.Unavailable, "connection refused"), rpcerr.ErrUnavailable, codes.Unavailable},
		{"our timeout", timedOut, context.DeadlineExceeded, rpcerr.ErrUnavailable, codes.Unavailable},
		{"our timeout as status", timedOut, status.Error(codes.DeadlineExceeded, "context deadline exceeded"), rpcerr.ErrUnavailable, codes.Unavailable},
		{"caller's deadline", callerDeadline, context.DeadlineExceeded, context.DeadlineExceeded, 0},
		{"caller canceled", canceled, context.Canceled, context.Canceled, 0},
		{"not found", live, ErrNotFound, ErrNotFound, 0},
		{"lease not found", live, rpctypes.ErrLeaseNotFound, rpctypes.ErrLeaseNotFound, 0},
		{"compacted", live, rpctypes.ErrCompacted, rpctypes.ErrCompacted, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := e.classify(c.ctx, c.err)
			if !errors.Is(got, c.want) {
				t.Fatalf("classify(%v) = %v, want it to match %v", c.err, got, c.want)
			}
			if c.want == rpcerr.ErrNoSpace || c.want == rpcerr.ErrUnavailable {
				// The etcd error is text only: its status would travel
				// in its place.
				if code := rpcerr.Status(got).Code(); code != c.code {
					t.Errorf("classify(%v) = %v, sent as %v, want %v", c.err, got, code, c.code)
				}
			}
		})
	}
	if e.classify(live, nil) != nil {
		t.Error("classify(nil) is not nil")
	}
}
