package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern"
)

func (a *app) logRepairCmd() *cobra.Command {
	var acceptLoss bool
	cmd := &cobra.Command{
		Use:   "repair NAME",
		Short: "Show what repairing a damaged log would cut; cut it with --accept-loss",
		Long: `Show where a degraded log is damaged and what repairing it would cut.

A log whose open segment is damaged (bytes that are not a valid batch,
followed by valid ones: not the torn tail a crash leaves) opens degraded: its
entries up to the damage can be read, and appends fail with DATA_LOSS naming
the file and byte. Without --accept-loss this command changes nothing: it
prints the damaged file, the byte where its valid batches end, the offset
the log would end at, and how many bytes and valid batches the cut loses.

With --accept-loss it cuts the segment at the end of its last valid batch,
records what was cut (in the file "repairs" of the log's directory, and in
the server's log), and the log takes appends again from there. Everything
after the damage is lost; copy the segment file first if you may want it.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			l, done, err := a.openLog(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			rep, err := l.Repair(cmd.Context(), acceptLoss)
			if err != nil {
				return err
			}
			printRepair(a.stdout, rep)
			return nil
		},
	}
	cmd.Flags().BoolVar(&acceptLoss, "accept-loss", false, "cut the damaged end of the log's open segment, losing every entry after the damage")
	return cmd
}

// printRepair writes what a repair found, and did or would do.
func printRepair(w io.Writer, r tern.RepairReport) {
	if !r.Damaged {
		fmt.Fprintf(w, "log %q is not damaged: nothing to repair\n", r.Log)
		return
	}
	fmt.Fprintf(w, "log %q is damaged: %s is corrupt at byte %d: %s\n", r.Log, r.Path, r.Pos, r.Damage)
	if r.End > 0 {
		fmt.Fprintf(w, "valid: the entries below offset %d (the last valid offset is %d)\n", r.End, r.End-1)
	} else {
		fmt.Fprintln(w, "valid: no entry (the damage is in the log's first batch)")
	}
	verb := "would cut"
	if r.Repaired {
		verb = "cut"
	}
	fmt.Fprintf(w, "the repair %s %d bytes, from byte %d to the end of the file (%d bytes)", verb, r.CutBytes, r.Pos, r.Size)
	if r.BatchesAfter > 0 {
		fmt.Fprintf(w, ", among them %d valid batches of %d entries after the damage", r.BatchesAfter, r.EntriesAfter)
	}
	fmt.Fprintln(w)
	if r.Acked > r.End {
		fmt.Fprintf(w, "the log was closed cleanly at offset %d: offsets %d to %d were acknowledged\n", r.Acked, r.End, r.Acked-1)
	}
	if r.Repaired {
		fmt.Fprintf(w, "repaired: the log ends at offset %d and takes appends again; the cut is recorded in %s\n", r.End, r.Record)
		return
	}
	fmt.Fprintf(w, "nothing was changed (a dry run); to cut, losing what follows the damage: tern log repair %s --accept-loss\n", r.Log)
}
