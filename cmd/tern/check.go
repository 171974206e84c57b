package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern/internal/vfs"
	"github.com/ternwal/tern/internal/wal"
)

func (a *app) checkCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check [DIR]",
		Short: "Verify every segment of a data directory, offline",
		Long: `Verify every segment file of a data directory (DIR, or --data): every
batch's checksum and offsets, the footers of sealed segments, that each
log's segments are contiguous, and the tail of each open segment. It prints
what is wrong, per log and file, and exits with 1 when something is damaged
(a torn tail a crash left is a note: the next open cuts it).

check only reads. It may run while tern serve has the directory: the open
segments may then grow under it, and a torn tail there can be an append in
flight. Logs are named by their ID (tern log describe shows a log's ID).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef(cmd, "%s takes one data directory, got %q", cmd.CommandPath(), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.server != "" && cmd.Flags().Changed("server") {
				return usagef(cmd, "check reads a data directory's files: run it on the server's machine, on its --data directory")
			}
			dir := a.dir
			if len(args) == 1 {
				dir = args[0]
			}
			return checkDir(a.stdout, dir)
		},
	}
}

// checkDir verifies the logs of the data directory dir and prints what it
// found; it returns an error when a log is damaged.
func checkDir(w io.Writer, dir string) error {
	logsDir := filepath.Join(dir, "logs")
	if _, err := os.Stat(logsDir); err != nil {
		return fmt.Errorf("%s is not a data directory: %w", dir, err)
	}
	lock, err := vfs.OS.Lock(filepath.Join(dir, "LOCK"))
	switch {
	case errors.Is(err, vfs.ErrLocked):
		fmt.Fprintf(w, "%s is in use by another process (tern serve?): checking it read-only; its open segments may grow meanwhile\n", dir)
	case err != nil:
		return fmt.Errorf("lock %s: %w", dir, err)
	default:
		defer lock.Close() // no server starts and recovers the logs under the check
	}
	names, err := vfs.OS.List(logsDir)
	if err != nil {
		return fmt.Errorf("list %s: %w", logsDir, err)
	}
	var ids []uint64
	for _, name := range names {
		if id, err := strconv.ParseUint(name, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	damaged := 0
	for _, id := range ids {
		logDir := filepath.Join(logsDir, strconv.FormatUint(id, 10))
		if _, err := os.Stat(filepath.Join(logDir, "DELETED")); err == nil {
			continue // deleted; the next open removes it
		}
		r, err := wal.Check(vfs.OS, logDir)
		if err != nil {
			fmt.Fprintf(w, "log %d (%s): cannot be checked: %v\n", id, logDir, err)
			damaged++
			continue
		}
		state := "ok"
		if r.Damaged() {
			state = "DAMAGED"
			damaged++
		}
		fmt.Fprintf(w, "log %d (%s): segments %d, offsets [%d, %d): %s\n", id, logDir, r.Segments, r.Start, r.End, state)
		for _, f := range r.Findings {
			kind := "damage"
			if !f.Damage {
				kind = "note"
			}
			fmt.Fprintf(w, "  %s: %s at byte %d: %s\n", kind, f.Path, f.Pos, f.What)
		}
	}
	if damaged > 0 {
		return fmt.Errorf("%d of %d logs in %s are damaged: see what repairing one would cut with tern log repair NAME", damaged, len(ids), dir)
	}
	fmt.Fprintf(w, "%d logs checked: no damage\n", len(ids))
	return nil
}
