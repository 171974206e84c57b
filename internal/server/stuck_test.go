package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// Once a stream is stuck on an error its client resends on, its later
// batches fail with that error and are not applied: the client sends them
// again behind the one that failed, in order.
func TestStuckStreamAppliesNothingMore(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	epoch := ts.createLog(t, "l", &ternpb.LogOptions{})
	req := &grpcopts.DecodedAppend{
		Log: "l", Epoch: epoch, Producer: 7, Acked: 1,
		Entries: []grpcopts.Entry{{Payload: []byte("a")}, {Payload: []byte("b")}},
		Ends:    []int{1, 2},
		Headers: []grpcopts.BatchHeader{{Seq: 1}, {Seq: 2}},
	}
	var stuck error
	for _, f := range ts.srv.queue(ctx, req, &stuck) {
		if _, err := ts.srv.wait(ctx, f); err != nil {
			t.Fatalf("a stream that is not stuck: %v", err)
		}
	}
	stuck = fmt.Errorf("%w: the log's node went away", rpcerr.ErrUnavailable)
	req.Headers = []grpcopts.BatchHeader{{Seq: 3}, {Seq: 4}}
	for i, f := range ts.srv.queue(ctx, req, &stuck) {
		if _, err := ts.srv.wait(ctx, f); !errors.Is(err, rpcerr.ErrUnavailable) {
			t.Fatalf("batch %d of a stuck stream: %v, want the stuck error", i, err)
		}
	}
	info, err := ts.api.DescribeLog(ctx, &ternpb.DescribeLogRequest{Name: "l"})
	if err != nil || info.End != 2 {
		t.Fatalf("after a stuck stream's batches: %v, %v; want end 2", info, err)
	}
}

// resent says which errors the Go client sends a batch again on.
func TestResent(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w: etcd", rpcerr.ErrUnavailable), true},
		{fmt.Errorf("%w: shutting down", tern.ErrClosed), true},
		{&rpcerr.NotOwnerError{Owner: "n2:7070"}, true},
		{fmt.Errorf("%w: newer", tern.ErrFenced), false},
		{rpcerr.ErrTakenOver, false},
		{fmt.Errorf("%w: end 3", rpcerr.ErrConditionFailed), false},
		{fmt.Errorf("%w: big", rpcerr.ErrTooLarge), false},
		{context.Canceled, false},
	} {
		if got := resent(tt.err); got != tt.want {
			t.Errorf("resent(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
