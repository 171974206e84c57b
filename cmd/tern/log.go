package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/units"
)

func (a *app) logCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Create, list, describe, truncate, delete and repair logs",
		Args:  noSubcommand,
		RunE:  help,
	}
	cmd.AddCommand(a.logCreateCmd(), a.logListCmd(), a.logDescribeCmd(), a.logTruncateCmd(), a.logDeleteCmd(), a.logRepairCmd())
	return cmd
}

func (a *app) logCreateCmd() *cobra.Command {
	var (
		opts          tern.LogOptions
		maxEntryBytes int64
		flushBytes    int64
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a log",
		Long: `Create a log. Its settings cannot be changed later.

NAME is 1 to 255 bytes of letters, digits, '.', '_', '-' and '/', where '/'
separates namespace parts: "tenant/db/channel". Sizes take a unit: 64MiB,
1GiB; durations too: 500ms, 90s, 1h, 3d (days of 24 hours), 1w.

A local log keeps its segments in the data directory, and --fsync says when
an append is acknowledged. An object log keeps them in the object store
(--storage, or the server's): the appends are queued and uploaded together
as one object, and acknowledged once it is stored; --flush-bytes and
--uploads-in-flight tune the uploads. A quorum log, on
a cluster of tern serve nodes, sends each append to the --ensemble nodes of
its open segment and acknowledges it once --ack-quorum of them have it on
disk; sealed segments move to the object store.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if maxEntryBytes > math.MaxInt {
				return usagef(cmd, "--max-entry-bytes %d is too large", maxEntryBytes)
			}
			if flushBytes > math.MaxInt {
				return usagef(cmd, "--flush-bytes %d is too large", flushBytes)
			}
			opts.MaxEntryBytes = int(maxEntryBytes)
			opts.FlushBytes = int(flushBytes)
			flush := changedFlag(cmd, "flush-bytes", "flush-interval", "uploads-in-flight")
			switch {
			case flush != "" && opts.Mode == tern.ModeLocal:
				return usagef(cmd, "--%s applies to object logs, not to --mode local", flush)
			case flush != "" && opts.Mode == "" && a.server == "":
				// Here, unlike on a server, the default mode is local.
				return usagef(cmd, "--%s applies to object logs: add --mode object", flush)
			case changedFlag(cmd, "ensemble", "ack-quorum") != "" && opts.Mode != tern.ModeQuorum:
				return usagef(cmd, "--%s applies to quorum logs: add --mode quorum", changedFlag(cmd, "ensemble", "ack-quorum"))
			case opts.Mode == tern.ModeQuorum && a.server == "":
				return usagef(cmd, "--mode quorum needs a cluster of tern serve nodes: name one with --server")
			case opts.Mode == tern.ModeObject && a.server == "" && a.storage == "" && a.open == nil:
				// Checked here since the library, without a store, would
				// record the log before failing to open it.
				return usagef(cmd, "--mode object keeps the log in an object store: name it with --storage URL (or $TERN_STORAGE)")
			}
			c, err := a.openClient(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer a.closeClient(c, &err)
			_, err = c.CreateLog(cmd.Context(), args[0], opts)
			if err != nil {
				if errors.Is(err, tern.ErrExist) {
					return fmt.Errorf("%w %s: see its settings with \"tern log describe %s\"", err, a.where(), args[0])
				}
				return err
			}
			switch f := opts.Fsync; f.Mode {
			case tern.FsyncInterval:
				fmt.Fprintf(a.stderr, "tern: warning: log %q acknowledges entries before they are synced (fsync %s): a power failure or kernel crash can lose up to %s of acknowledged entries\n", args[0], f, units.FormatDuration(f.Interval))
			case tern.FsyncNever:
				fmt.Fprintf(a.stderr, "tern: warning: log %q acknowledges entries before they are synced (fsync never): a power failure or kernel crash can lose any acknowledged entry of the segment being written\n", args[0])
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Var(modeFlag{&opts.Mode}, "mode", "where the log keeps its entries: local (the data directory), object (the object store) or quorum (the nodes of a cluster, then the object store) (default: the server's --mode, or local)")
	f.Var(sizeFlag{&flushBytes}, "flush-bytes", fmt.Sprintf("object mode: upload the queued appends once they reach this size (default %s)", units.FormatBytes(tern.DefaultFlushBytes)))
	durationVar(f, &opts.FlushInterval, "flush-interval", 0, fmt.Sprintf("object mode: no longer used (appends are uploaded as soon as fewer than --uploads-in-flight uploads are under way); kept for the scripts that set it (default %s)", units.FormatDuration(tern.DefaultFlushInterval)))
	numberVar(f, &opts.UploadsInFlight, "uploads-in-flight", 0, 0, fmt.Sprintf("object mode: upload at most `N` objects at once; the queued appends go as soon as fewer are under way, so fewer cost fewer PUT requests and more latency (default %d)", tern.DefaultUploadsInFlight))
	numberVar(f, &opts.Ensemble, "ensemble", 0, 0, "quorum mode: the `N` nodes each segment is written to (default 3)")
	numberVar(f, &opts.AckQuorum, "ack-quorum", 0, 0, "quorum mode: acknowledge an append once `N` nodes of the ensemble have it on disk (default 2)")
	f.Var(compressionFlag{&opts.Compression}, "compression", "compress each batch of appends with zstd (smallest) or lz4 (least CPU), once, for disk, replicas and objects alike; none stores them as appended (default none)")
	f.Var(fsyncFlag{&opts.Fsync}, "fsync", "local mode: when an append is acknowledged: always (after fdatasync), interval:DURATION or never; the last two can lose acknowledged entries on power failure")
	f.Var(sizeFlag{&opts.SegmentBytes}, "segment-bytes", fmt.Sprintf("seal a segment once it reaches this size (default %s)", units.FormatBytes(tern.DefaultSegmentBytes)))
	durationVar(f, &opts.SegmentAge, "segment-age", 0, fmt.Sprintf("seal a segment this old at the next append (default %s)", units.FormatDuration(tern.DefaultSegmentAge)))
	durationVar(f, &opts.RetentionAge, "retention-age", 0, "delete segments whose newest entry is older than this, such as 72h or 3d (default: keep all)")
	f.Var(sizeFlag{&opts.RetentionBytes}, "retention-bytes", "delete the oldest segments while the log is larger (default: keep all)")
	numberVar(f, &opts.RetentionEntries, "retention-entries", 0, 0, "delete the oldest segments while the log has more than `N` entries (default: keep all)")
	f.Var(sizeFlag{&maxEntryBytes}, "max-entry-bytes", fmt.Sprintf("the largest entry, payload and properties (default %s)", units.FormatBytes(tern.DefaultMaxEntryBytes)))
	return cmd
}

// changedFlag is the first of the named flags set on cmd's command line, or
// "".
func changedFlag(cmd *cobra.Command, names ...string) string {
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return n
		}
	}
	return ""
}

func (a *app) logListCmd() *cobra.Command {
	var (
		prefix string
		asJSON bool
		limit  int
		token  string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the logs",
		Long: `List the logs. FSYNC applies to local logs; FLUSH (size/interval) and
UPLOADS (in flight) to object logs.

The list comes from the metadata, without opening the logs: a log that is
not open (on the server, or in this process) shows its END at its START and
no BYTES or SEGMENTS; "tern log describe" opens it and tells all. With
--limit or --page-token it lists one page, and if more logs follow, prints
the --page-token of the next page on standard error.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if limit < 0 {
				return usagef(cmd, "--limit %d is negative: list a page of 1 to %d logs", limit, tern.MaxListPageSize)
			}
			c, err := a.openClient(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer a.closeClient(c, &err)
			var infos []tern.LogInfo
			if limit == 0 && token == "" {
				infos, err = c.ListLogs(cmd.Context(), prefix)
			} else {
				var page tern.LogPage
				page, err = c.ListLogsPage(cmd.Context(), prefix, token, limit)
				infos = page.Logs
				if page.NextPageToken != "" {
					defer fmt.Fprintf(a.stderr, "tern: more logs follow; the next page: --page-token %s\n", shellQuote(page.NextPageToken))
				}
			}
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				for _, info := range infos {
					if err := enc.Encode(infoJSON(info)); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTART\tEND\tENTRIES\tBYTES\tSEGMENTS\tFSYNC\tMODE\tFLUSH\tUPLOADS")
			for _, i := range infos {
				o := i.Options
				fsync, flush, uploads := o.Fsync.String(), "-", "-"
				if modeOf(o) == tern.ModeObject {
					fsync = "-"
					flush = units.FormatBytes(int64(o.FlushBytes)) + "/" + units.FormatDuration(o.FlushInterval)
					uploads = strconv.Itoa(o.UploadsInFlight)
				}
				end, entries, size, segments := strconv.FormatUint(uint64(i.End), 10), strconv.FormatUint(uint64(i.End-i.Start), 10), units.FormatBytes(i.Bytes), strconv.Itoa(i.Segments)
				if i.ExtentUnknown {
					end, entries, size, segments = "-", "-", "-", "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
					i.Name, i.Start, end, entries, size, segments, fsync, modeOf(o), flush, uploads)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "list only the logs whose names start with this")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per log, as describe --json does")
	numberVar(cmd.Flags(), &limit, "limit", 0, 0, fmt.Sprintf("list one page of at most this many logs (at most %d; default: every log)", tern.MaxListPageSize))
	cmd.Flags().StringVar(&token, "page-token", "", "list the page that starts after the one this token, printed by the last --limit, ends")
	return cmd
}

// shellQuote quotes s for a POSIX shell if it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (a *app) logDescribeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Describe a log: its extent, size and settings",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			l, done, err := a.openLog(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			info, err := l.Info(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(infoJSON(info))
			}
			return describe(a.stdout, info)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	return cmd
}

func describe(w io.Writer, i tern.LogInfo) error {
	keep := func(s string, zero bool) string {
		if zero {
			return "keep all"
		}
		return s
	}
	o := i.Options
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", i.Name)
	fmt.Fprintf(tw, "ID:\t%d\n", i.ID)
	fmt.Fprintf(tw, "Created:\t%s\n", i.Created.Local().Format(time.RFC3339))
	fmt.Fprintf(tw, "Start:\t%d\n", i.Start)
	fmt.Fprintf(tw, "End:\t%d\n", i.End)
	fmt.Fprintf(tw, "Entries:\t%d\n", i.End-i.Start)
	fmt.Fprintf(tw, "Bytes:\t%d (%s)\n", i.Bytes, units.FormatBytes(i.Bytes))
	fmt.Fprintf(tw, "Logical bytes:\t%d (%s)\n", i.LogicalBytes, units.FormatBytes(i.LogicalBytes))
	fmt.Fprintf(tw, "Segments:\t%d\n", i.Segments)
	fmt.Fprintf(tw, "Writer epoch:\t%d\n", i.Epoch)
	fmt.Fprintf(tw, "Mode:\t%s\n", modeOf(o))
	fmt.Fprintf(tw, "Compression:\t%s\n", compressionOf(o))
	if modeOf(o) == tern.ModeObject {
		fmt.Fprintf(tw, "Flush bytes:\t%s\n", units.FormatBytes(int64(o.FlushBytes)))
		fmt.Fprintf(tw, "Flush interval:\t%s\n", units.FormatDuration(o.FlushInterval))
		fmt.Fprintf(tw, "Uploads in flight:\t%d\n", o.UploadsInFlight)
	} else {
		fmt.Fprintf(tw, "Fsync:\t%s\n", o.Fsync)
	}
	fmt.Fprintf(tw, "Segment bytes:\t%s\n", units.FormatBytes(o.SegmentBytes))
	fmt.Fprintf(tw, "Segment age:\t%s\n", units.FormatDuration(o.SegmentAge))
	fmt.Fprintf(tw, "Retention age:\t%s\n", keep(units.FormatDuration(o.RetentionAge), o.RetentionAge == 0))
	fmt.Fprintf(tw, "Retention bytes:\t%s\n", keep(units.FormatBytes(o.RetentionBytes), o.RetentionBytes == 0))
	fmt.Fprintf(tw, "Retention entries:\t%s\n", keep(strconv.FormatInt(o.RetentionEntries, 10), o.RetentionEntries == 0))
	fmt.Fprintf(tw, "Max entry bytes:\t%s\n", units.FormatBytes(int64(o.MaxEntryBytes)))
	return tw.Flush()
}

// modeOf is the mode of a log with options o: a log created before there
// were modes has none, and is local.
func modeOf(o tern.LogOptions) tern.Mode {
	return cmp.Or(o.Mode, tern.ModeLocal)
}

// compressionOf is the compression of a log with options o: none if it
// has none.
func compressionOf(o tern.LogOptions) tern.Compression {
	return cmp.Or(o.Compression, tern.CompressionNone)
}

// logJSON is a LogInfo as list --json and describe --json print it. Sizes
// are bytes; durations are Go duration strings ("1h", "72h"); zero
// retention limits keep everything. Bytes are as stored (compressed),
// logical bytes as appended. The flush fields are an object log's only.
type logJSON struct {
	Name    string      `json:"name"`
	ID      uint64      `json:"id"`
	Created time.Time   `json:"created"`
	Start   tern.Offset `json:"start"`
	End     tern.Offset `json:"end"`
	Entries uint64      `json:"entries"`
	Bytes   int64       `json:"bytes"`
	// LogicalBytes: bytes before compression (equal to bytes without).
	LogicalBytes int64  `json:"logical_bytes"`
	Segments     int    `json:"segments"`
	Epoch        uint64 `json:"epoch"`
	// ExtentUnknown: listed from the metadata, unopened; end, entries,
	// bytes and segments are not known.
	ExtentUnknown bool `json:"extent_unknown,omitempty"`
	Options       struct {
		Fsync            string `json:"fsync"`
		SegmentBytes     int64  `json:"segment_bytes"`
		SegmentAge       string `json:"segment_age"`
		RetentionAge     string `json:"retention_age"`
		RetentionBytes   int64  `json:"retention_bytes"`
		RetentionEntries int64  `json:"retention_entries"`
		MaxEntryBytes    int    `json:"max_entry_bytes"`
		Compression      string `json:"compression"`
		Mode             string `json:"mode"`
		FlushBytes       int    `json:"flush_bytes,omitempty"`
		FlushInterval    string `json:"flush_interval,omitempty"`
		UploadsInFlight  int    `json:"uploads_in_flight,omitempty"`
	} `json:"options"`
}

func infoJSON(i tern.LogInfo) logJSON {
	j := logJSON{
		Name: i.Name, ID: i.ID, Created: i.Created, Start: i.Start, End: i.End,
		Entries: uint64(i.End - i.Start), Bytes: i.Bytes, LogicalBytes: i.LogicalBytes, Segments: i.Segments, Epoch: i.Epoch,
		ExtentUnknown: i.ExtentUnknown,
	}
	o := i.Options
	j.Options.Fsync = o.Fsync.String()
	j.Options.SegmentBytes = o.SegmentBytes
	j.Options.SegmentAge = units.FormatDuration(o.SegmentAge)
	j.Options.RetentionAge = units.FormatDuration(o.RetentionAge)
	j.Options.RetentionBytes = o.RetentionBytes
	j.Options.RetentionEntries = o.RetentionEntries
	j.Options.MaxEntryBytes = o.MaxEntryBytes
	j.Options.Mode = string(modeOf(o))
	j.Options.Compression = string(compressionOf(o))
	if modeOf(o) == tern.ModeObject {
		j.Options.FlushBytes = o.FlushBytes
		j.Options.FlushInterval = units.FormatDuration(o.FlushInterval)
		j.Options.UploadsInFlight = o.UploadsInFlight
	}
	return j
}

func (a *app) logTruncateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "truncate NAME OFFSET",
		Short: "Drop the entries below OFFSET",
		Long: `Drop the entries below OFFSET: reads below it fail from now on, and the
segments wholly below it are deleted. The start of a log only moves forward.`,
		Args: exactArgs("NAME", "OFFSET"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			before, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil {
				return usagef(cmd, "OFFSET %q is not an offset: use a whole number such as 1000", args[1])
			}
			l, done, err := a.openLog(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			info, err := l.Info(cmd.Context())
			if err != nil {
				return err
			}
			if tern.Offset(before) > info.End {
				return fmt.Errorf("cannot truncate log %q below offset %d: it ends at offset %d, so %d is the most", args[0], before, info.End, info.End)
			}
			return l.Truncate(cmd.Context(), tern.Offset(before))
		},
	}
}

func (a *app) logDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a log and all its entries",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			c, err := a.openClient(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer a.closeClient(c, &err)
			if err := c.DeleteLog(cmd.Context(), args[0]); err != nil {
				if errors.Is(err, tern.ErrNotFound) {
					return fmt.Errorf("%w %s: see the logs there with \"tern log list\"", err, a.where())
				}
				return err
			}
			return nil
		},
	}
}
