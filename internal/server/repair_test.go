package server

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/ternwal/tern/client/ternpb"
)

// RepairLog of a log that is not damaged reports so and changes nothing; of
// a missing log, NOT_FOUND. The gauge of degraded logs is exported at 0.
// (A damaged log is repaired through the binary in test/e2e.)
func TestRepairLogUndamaged(t *testing.T) {
	ts := start(t)
	epoch := ts.createLog(t, "fine", nil)
	ts.appendN(t, "fine", epoch, 3)
	for _, accept := range []bool{false, true} {
		resp, err := ts.api.RepairLog(t.Context(), &ternpb.RepairLogRequest{Name: "fine", AcceptLoss: accept})
		if err != nil || resp.GetDamaged() || resp.GetRepaired() {
			t.Fatalf("RepairLog(accept_loss %v) of an undamaged log: %v, %v", accept, resp, err)
		}
	}
	_, err := ts.api.RepairLog(t.Context(), &ternpb.RepairLogRequest{Name: "missing"})
	wantStatus(t, err, codes.NotFound, "LOG_NOT_FOUND")
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tern_logs_degraded" {
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 0 {
				t.Fatalf("tern_logs_degraded %v, want 0", v)
			}
			return
		}
	}
	t.Fatal("tern_logs_degraded is not exported")
}
