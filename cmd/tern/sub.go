package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern"
)

func (a *app) subCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sub",
		Short: "Create, list, describe, seek, consume and delete subscriptions",
		Long: `Create, list, describe, seek, consume and delete subscriptions: named,
durable cursors on a log. Consuming a subscription prints its entries from
its cursor and moves the cursor past each entry once it is printed.`,
		Args: noSubcommand,
		RunE: help,
	}
	cmd.AddCommand(a.subCreateCmd(), a.subListCmd(), a.subDescribeCmd(), a.subSeekCmd(), a.subConsumeCmd(), a.subDeleteCmd())
	return cmd
}

// subErr explains an error about subscription sub of log.
func (a *app) subErr(log, sub string, err error) error {
	switch {
	case errors.Is(err, tern.ErrSubNotFound):
		return fmt.Errorf("%w %s: create it with \"tern sub create %s %s\", or see the log's subscriptions with \"tern sub list %s\"", err, a.where(), log, sub, log)
	case errors.Is(err, tern.ErrSubExist):
		return fmt.Errorf("%w %s: see it with \"tern sub describe %s %s\"", err, a.where(), log, sub)
	}
	return err
}

func (a *app) subCreateCmd() *cobra.Command {
	var (
		from         uint64
		fromEnd, pin bool
	)
	cmd := &cobra.Command{
		Use:   "create LOG SUB",
		Short: "Create a subscription",
		Long: `Create a subscription SUB on LOG, with its cursor at --from (default: where the
log starts) or, with --from-end, at the log's end, so that it delivers only
entries appended from now on.

With --pin, retention keeps the entries the subscription has not consumed
(truncation does not wait for it).

SUB is 1 to 255 bytes of letters, digits, '.', '_' and '-'.`,
		Args: exactArgs("LOG", "SUB"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if fromEnd && cmd.Flags().Changed("from") {
				return usagef(cmd, "--from and --from-end cannot be used together: start at an offset, or at the end")
			}
			ctx := cmd.Context()
			l, done, err := a.openLog(ctx, args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			opts := tern.SubOptions{From: tern.Offset(from), FromEnd: fromEnd, Pin: pin}
			if !fromEnd && !cmd.Flags().Changed("from") {
				info, err := l.Info(ctx)
				if err != nil {
					return err
				}
				opts.From = info.Start
			}
			_, err = l.CreateSubscription(ctx, args[1], opts)
			if te, ok := errors.AsType[*tern.TruncatedError](err); ok {
				return fmt.Errorf("offset %d of log %q is gone: the log was truncated and now starts at offset %d; start the subscription there with --from %d, or leave --from out", te.Offset, args[0], te.Start, te.Start)
			}
			return a.subErr(args[0], args[1], err)
		},
	}
	f := cmd.Flags()
	numberVar(f, &from, "from", 0, 0, "the `offset` of the first entry to deliver (default: where the log starts)")
	f.SetAnnotation("from", orAnnotation, []string{"--from-end"})
	f.BoolVar(&fromEnd, "from-end", false, "deliver only the entries appended from now on")
	f.BoolVar(&pin, "pin", false, "make retention keep the entries the subscription has not consumed")
	return cmd
}

func (a *app) subListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list LOG",
		Short: "List the subscriptions of a log",
		Args:  exactArgs("LOG"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			l, done, err := a.openLog(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			infos, err := l.Subscriptions(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				for _, i := range infos {
					if err := enc.Encode(subInfoJSON(i)); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCURSOR\tLAG\tPIN\tCREATED")
			for _, i := range infos {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", i.Name, i.Cursor, i.Lag, yesNo(i.Pin), i.Created.Local().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per subscription, as describe --json does")
	return cmd
}

func (a *app) subDescribeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe LOG SUB",
		Short: "Describe a subscription: its cursor and lag",
		Long: `Describe a subscription. Its cursor is the next offset it delivers: every
entry below it has been consumed. Its lag is how many entries it has not
consumed: the log's end minus the cursor.`,
		Args: exactArgs("LOG", "SUB"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			l, done, err := a.openLog(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			i, err := l.Subscription(cmd.Context(), args[1])
			if err != nil {
				return a.subErr(args[0], args[1], err)
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(subInfoJSON(i))
			}
			return describeSub(a.stdout, i)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	return cmd
}

func describeSub(w io.Writer, i tern.SubInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Log:\t%s\n", i.Log)
	fmt.Fprintf(tw, "Name:\t%s\n", i.Name)
	fmt.Fprintf(tw, "Created:\t%s\n", i.Created.Local().Format(time.RFC3339))
	fmt.Fprintf(tw, "Cursor:\t%d\n", i.Cursor)
	fmt.Fprintf(tw, "Lag:\t%d\n", i.Lag)
	fmt.Fprintf(tw, "Pin:\t%s\n", yesNo(i.Pin))
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// subJSON is a SubInfo as sub list --json and sub describe --json print it.
type subJSON struct {
	Log     string      `json:"log"`
	Name    string      `json:"name"`
	Created time.Time   `json:"created"`
	Cursor  tern.Offset `json:"cursor"`
	Lag     uint64      `json:"lag"`
	Pin     bool        `json:"pin"`
}

func subInfoJSON(i tern.SubInfo) subJSON {
	return subJSON{Log: i.Log, Name: i.Name, Created: i.Created, Cursor: i.Cursor, Lag: i.Lag, Pin: i.Pin}
}

func (a *app) subSeekCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "seek LOG SUB OFFSET",
		Short: "Move a subscription's cursor",
		Long: `Move a subscription's cursor to OFFSET, backwards (to consume entries again)
or forwards (to skip them). OFFSET lies between the log's start and end.`,
		Args: exactArgs("LOG", "SUB", "OFFSET"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			to, err := strconv.ParseUint(args[2], 10, 64)
			if err != nil {
				return usagef(cmd, "OFFSET %q is not an offset: use a whole number such as 1000", args[2])
			}
			l, done, err := a.openLog(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			err = l.Seek(cmd.Context(), args[1], tern.Offset(to))
			if te, ok := errors.AsType[*tern.TruncatedError](err); ok {
				return fmt.Errorf("offset %d of log %q is gone: the log was truncated and now starts at offset %d; seek to %d or later", te.Offset, args[0], te.Start, te.Start)
			}
			return a.subErr(args[0], args[1], err)
		},
	}
}

func (a *app) subDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete LOG SUB",
		Short: "Delete a subscription",
		Args:  exactArgs("LOG", "SUB"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			l, done, err := a.openLog(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			return a.subErr(args[0], args[1], l.DeleteSubscription(cmd.Context(), args[1]))
		},
	}
}

func (a *app) subConsumeCmd() *cobra.Command {
	var (
		limit           uint64
		follow, fromEnd bool
		format          string
	)
	cmd := &cobra.Command{
		Use:   "consume LOG SUB",
		Short: "Print a subscription's entries and move its cursor past them",
		Long: `Print the entries of subscription SUB from its cursor to where LOG ends when
the command starts; with --follow, go on printing entries as they are appended
until interrupted. The output formats are those of "tern read".

--from-end first moves the cursor to where LOG ends (as "tern sub seek LOG
SUB END" would), skipping the entries not yet consumed, then consumes: with
--follow, the entries appended from then on; without, none.

Each entry is acknowledged once it has left the command: written to stdout
and, when stdout is a pipe, taken from the pipe by the program reading it.
So "tern sub consume LOG SUB | head -1" moves the cursor past the one entry
head printed, however many were written into the pipe; when the reader
closes the pipe, the command commits the cursor and exits 0. The cursor is
committed at most every 100ms while consuming and when the command ends:
delivery is at least once, so an interrupted consume prints again, next
time, at most the entries it had printed but not yet committed. Only one
consumer of a subscription runs at a time: a new one takes over from the
older.

On a server, a consumer whose server restarts, or whose log moves to another
node, says so on stderr, reconnects and goes on from the subscription's
committed cursor: it may print again the entries printed since the last
commit (at least once), and loses none. It gives up when the server cannot
be reached for 30 seconds.`,
		Args: exactArgs("LOG", "SUB"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			write, err := entryWriter(cmd, format)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("limit") {
				limit = math.MaxUint64
			}
			ignorePipeSignal()
			ctx := cmd.Context()
			l, done, err := a.openLog(ctx, args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			info, err := l.Info(ctx)
			if err != nil {
				return err
			}
			if fromEnd {
				if err := l.Seek(ctx, args[1], info.End); err != nil {
					return a.subErr(args[0], args[1], err)
				}
			}
			s, err := l.Subscribe(ctx, args[1], a.reconnectNotify())
			if err != nil {
				return a.consumeErr(args[0], args[1], err)
			}
			defer func() {
				if cerr := s.Close(); cerr != nil {
					err = errors.Join(err, fmt.Errorf("commit the cursor of subscription %q: %w", args[1], cerr))
				}
			}()
			sub, err := l.Subscription(ctx, args[1])
			if err != nil {
				return a.subErr(args[0], args[1], err)
			}
			end := info.End
			if follow {
				end = math.MaxUint64
			}
			err = consume(ctx, s, sub.Cursor, end, limit, newPrintedWriter(a.stdout), write)
			switch {
			case follow && ctx.Err() != nil && errors.Is(err, ctx.Err()):
				return nil // following ends when interrupted
			case errors.Is(err, syscall.EPIPE):
				return nil // the reader is done; what it took is acknowledged
			}
			return a.consumeErr(args[0], args[1], err)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fromEnd, "from-end", false, "first move the cursor to where the log ends, skipping what is not consumed yet: with --follow, print only the entries appended from now on")
	numberVar(f, &limit, "limit", 0, 0, "print at most `N` entries (default: no limit)")
	f.BoolVar(&follow, "follow", false, "go on printing entries as they are appended, until interrupted")
	f.StringVar(&format, "format", "text", "the output `format`: text (payloads, one per line) or json (one object per line)")
	return cmd
}

// consumeErr explains an error of consuming subscription sub of log.
func (a *app) consumeErr(log, sub string, err error) error {
	if te, ok := errors.AsType[*tern.TruncatedError](err); ok {
		return fmt.Errorf("subscription %q is at offset %d of log %q, which is gone: the log was truncated and now starts at offset %d; move the subscription there with \"tern sub seek %s %s %d\"", sub, te.Offset, log, te.Start, log, sub, te.Start)
	}
	return a.subErr(log, sub, err)
}

// consume writes the entries of s, whose cursor is at next, up to end or
// limit entries, whichever comes first. It acknowledges an entry once out
// says the reader took it: after each batch is flushed, when a write
// fails (a closed pipe), and at the end, once the reader took everything
// or went away.
func consume(ctx context.Context, s *tern.Subscriber, next, end tern.Offset, limit uint64, out *printedWriter, write func(*bufio.Writer, tern.Entry) error) error {
	bw := bufio.NewWriterSize(out, 64<<10)
	// printed are the entries written and not yet acknowledged, each with
	// the bytes written to out once it is.
	type mark struct {
		off tern.Offset
		end int64
	}
	var printed []mark
	ack := func() error {
		taken, n := out.taken(), 0
		for n < len(printed) && printed[n].end <= taken {
			n++
		}
		if n == 0 {
			return nil
		}
		off := printed[n-1].off
		printed = append(printed[:0], printed[n:]...)
		return s.Ack(off)
	}
	for limit > 0 && next < end {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, ack()) // else a fast writer could keep a follower going
		}
		es, err := s.NextBatch(ctx, int(min(limit, uint64(end-next), readBatch)))
		if err != nil {
			return errors.Join(err, ack())
		}
		// The subscriber was opened without ticks: every item is an entry.
		for _, e := range es {
			if err := write(bw, e); err != nil {
				return errors.Join(err, ack())
			}
			printed = append(printed, mark{e.Offset, out.written + int64(bw.Buffered())})
			next = e.Offset + 1
			if !out.lockstep() {
				continue
			}
			if err := bw.Flush(); err != nil {
				return errors.Join(err, ack())
			}
			closed := out.drain(ctx)
			if err := ack(); err != nil || closed {
				return cmp.Or(err, error(syscall.EPIPE))
			}
		}
		if err := bw.Flush(); err != nil {
			return errors.Join(err, ack())
		}
		if err := ack(); err != nil {
			return err
		}
		limit -= min(limit, uint64(len(es)))
	}
	if out.drain(ctx) {
		return errors.Join(syscall.EPIPE, ack())
	}
	return ack()
}
