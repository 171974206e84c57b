package server

import (
	"errors"
	"fmt"
	"testing"

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
