package server

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ternwal/tern/client/ternpb"
)

// gauge is the value of a gauge without labels in reg; -1 if it is not
// exported.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	if mf := family(t, reg, name); mf != nil {
		return mf.GetMetric()[0].GetGauge().GetValue()
	}
	return -1
}

// TestLagMetrics checks that the lag of open Read and Subscribe streams is
// exported: a reader is behind by what it has not been sent, a subscriber
// by what it has not acknowledged, and neither once its stream ends.
func TestLagMetrics(t *testing.T) {
	ts := start(t)
	ctx := t.Context()
	epoch := ts.createLog(t, "l", nil)
	ts.appendN(t, "l", epoch, 10)
	if _, err := ts.api.CreateSubscription(ctx, &ternpb.CreateSubscriptionRequest{Log: "l", Name: "s"}); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, ts.reg, "tern_subscription_lag_max_entries"); got != 0 {
		t.Fatalf("subscription lag with no stream open: %v, want 0", got)
	}

	stream := ts.subscribe(t, ctx, "l", "s")
	recvEntries(t, stream, 10)
	if got := gauge(t, ts.reg, "tern_subscription_lag_max_entries"); got != 10 {
		t.Fatalf("subscription lag with 10 entries delivered, none acknowledged: %v, want 10", got)
	}
	if err := stream.Send(ack(6)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the acknowledgement to show in the lag", func() bool {
		return gauge(t, ts.reg, "tern_subscription_lag_max_entries") == 3
	})
	ts.appendN(t, "l", epoch, 2)
	recvEntries(t, stream, 2)
	if got := gauge(t, ts.reg, "tern_subscription_lag_max_entries"); got != 5 {
		t.Fatalf("subscription lag after 2 more entries: %v, want 5", got)
	}
	closeSub(t, stream)
	waitFor(t, "the subscription's stream to leave the lag", func() bool {
		return gauge(t, ts.reg, "tern_subscription_lag_max_entries") == 0
	})

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	read, err := ts.api.Read(rctx, &ternpb.ReadRequest{Log: "l", From: 0, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	recvEntries(t, read, 12)
	waitFor(t, "a reader at the tail to have no lag", func() bool {
		return gauge(t, ts.reg, "tern_read_lag_max_entries") == 0 && histogramCount(t, ts.reg, "tern_read_lag_entries") == 1
	})
	cancel()
	waitFor(t, "the reader's stream to leave the lag", func() bool {
		return histogramCount(t, ts.reg, "tern_read_lag_entries") == 0
	})
}

// histogramCount is the sample count of the histogram name in reg.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	if mf := family(t, reg, name); mf != nil {
		return mf.GetMetric()[0].GetHistogram().GetSampleCount()
	}
	return 0
}
