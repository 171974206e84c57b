package client

import (
	"context"

	"github.com/ternwal/tern/client/ternpb"
)

// RepairReport says where a degraded log is damaged, and what its repair
// cuts (or, with Repaired, cut). A log that is not damaged has Damaged false
// and nothing else set.
type RepairReport struct {
	Log      string
	Damaged  bool
	Repaired bool   // the cut was made and recorded
	Path     string // the damaged segment file
	Pos      int64  // the byte where the valid batches end and the damage starts
	Size     int64  // the file's size
	// End is the offset after the last valid entry: where the log ends
	// after the cut.
	End      Offset
	CutBytes int64 // bytes from Pos to the end of the file
	// BatchesAfter and EntriesAfter count the whole, valid batches found
	// after the damage, which the cut loses with it.
	BatchesAfter int64
	EntriesAfter uint64
	// Acked is where the log ended at its last clean close, when that is
	// beyond End: the entries from End to Acked were acknowledged. 0 when
	// not known.
	Acked  Offset
	Damage string // what is wrong at Pos
	Record string // the file that records the repair, once Repaired
}

// Repair reports where the log is damaged and what repairing it would
// cut; with acceptLoss it makes the cut (at the end of the open segment's
// valid batches), records what was lost, and the log takes appends again.
// An admin call: see docs/durability.md.
func (l *Log) Repair(ctx context.Context, acceptLoss bool) (RepairReport, error) {
	var resp *ternpb.RepairLogResponse
	err := l.call(ctx, func(ctx context.Context, api ternpb.TernClient) (err error) {
		resp, err = api.RepairLog(ctx, &ternpb.RepairLogRequest{Name: l.name, AcceptLoss: acceptLoss})
		return err
	})
	if err != nil {
		return RepairReport{}, err
	}
	return RepairReportFromProto(l.name, resp), nil
}

// Proto returns r as the server sends it.
func (r RepairReport) Proto() *ternpb.RepairLogResponse {
	return &ternpb.RepairLogResponse{
		Damaged: r.Damaged, Repaired: r.Repaired, Path: r.Path, Pos: r.Pos, Size: r.Size,
		End: uint64(r.End), CutBytes: r.CutBytes, BatchesAfter: r.BatchesAfter, EntriesAfter: r.EntriesAfter,
		Acked: uint64(r.Acked), Damage: r.Damage, Record: r.Record,
	}
}

// RepairReportFromProto is the inverse of RepairReport.Proto, for the log
// named name.
func RepairReportFromProto(name string, p *ternpb.RepairLogResponse) RepairReport {
	return RepairReport{
		Log: name, Damaged: p.GetDamaged(), Repaired: p.GetRepaired(), Path: p.GetPath(), Pos: p.GetPos(),
		Size: p.GetSize(), End: Offset(p.GetEnd()), CutBytes: p.GetCutBytes(), BatchesAfter: p.GetBatchesAfter(),
		EntriesAfter: p.GetEntriesAfter(), Acked: Offset(p.GetAcked()), Damage: p.GetDamage(), Record: p.GetRecord(),
	}
}
