package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern"
)

// maxInFlight bounds the single-entry appends queued ahead of the offset
// printed last.
const maxInFlight = 1024

func (a *app) appendCmd() *cobra.Command {
	var (
		batch     int
		exclusive bool
		epoch     uint64
		ifEnd     uint64
		raw       bool
		file      string
		props     propsFlag
	)
	cmd := &cobra.Command{
		Use:   "append NAME",
		Short: "Append the lines of stdin as entries, or all of stdin or a file as one",
		Long: `Append each line of stdin as one entry, without its newline (nor a carriage
return before it), and print the offset of each entry once it is acknowledged:
one per line, in order.

With --raw, all of stdin is one entry, bytes as they are (newlines
included); with --file F, the bytes of file F are, for binary data. Either
is refused, before anything is sent, when over the log's largest entry
(its --max-entry-bytes, which counts the properties too).

--prop KEY=VALUE (or -H KEY=VALUE, as kcat and nats spell headers), given
once per property, sets properties on every entry appended; "tern read
--format json" prints them.

With --batch N, up to N lines at a time are appended atomically: after a crash
either all of them are in the log or none.

By default tern append is a shared producer: any number of them, and programs
appending with Log.Append, may append to one log at once without fencing each
other. While an exclusive writer holds the log it fails with "fenced".
With --exclusive it opens an exclusive writer instead: a new writer session
(or the one --epoch names), which fences the log's older writers and shared
producers until it ends.

With --if-end N the lines are appended only if the log ends at N: the first
line gets offset N, and the append stops at the first line that would not
get the offset that follows (someone else appended): the error says where
the log ends.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			whole := raw || file != ""
			switch {
			case raw && file != "":
				return usagef(cmd, "--raw appends stdin and --file a file: give one")
			case whole && cmd.Flags().Changed("batch"):
				return usagef(cmd, "--batch gathers lines, and --%s appends one entry: leave --batch out", changedFlag(cmd, "raw", "file"))
			}
			if cmd.Flags().Changed("epoch") && !exclusive {
				return usagef(cmd, "--epoch %d: an epoch is an exclusive writer's; add --exclusive", epoch)
			}
			ctx := cmd.Context()
			l, done, err := a.openLog(ctx, args[0])
			if err != nil {
				return err
			}
			defer done(&err)
			limit := l.Options().MaxEntryBytes - props.bytes()
			if limit < 0 {
				return fmt.Errorf("the properties have %d bytes, over the largest entry log %q takes (%d bytes, its --max-entry-bytes): nothing was appended", props.bytes(), l.Name(), l.Options().MaxEntryBytes)
			}
			var payload []byte
			switch {
			case file != "":
				if payload, err = readEntryFile(file, limit, props.bytes()); err != nil {
					return err
				}
			case raw:
				if payload, err = readEntryStdin(ctx, a.stdin, limit, props.bytes()); err != nil {
					return err
				}
			}
			var opts []tern.WriterOption
			switch {
			case !exclusive:
				opts = append(opts, tern.Shared())
			case epoch != 0:
				opts = append(opts, tern.WithEpoch(epoch))
			}
			w, err := l.OpenWriter(ctx, opts...)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, w.Close()) }()
			at := tern.Offset(0)
			cond := cmd.Flags().Changed("if-end")
			if cond {
				at = tern.Offset(ifEnd)
			}
			if whole {
				var aopts []tern.AppendOption
				if cond {
					aopts = append(aopts, tern.IfEnd(at))
				}
				off, err := w.Append(context.WithoutCancel(ctx), tern.Entry{Payload: payload, Properties: props.m}, aopts...)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(a.stdout, off)
				return err
			}
			return appendLines(ctx, w, a.stdin, a.stdout, entryShape{limit, props.m, props.bytes()}, batch, cond, at)
		},
	}
	cmd.Flags().BoolVar(&raw, "raw", false, "append all of stdin as one entry, bytes as they are")
	cmd.Flags().StringVar(&file, "file", "", "append the bytes of this `file` as one entry")
	cmd.Flags().VarP(&props, "prop", "H", "set the property KEY to VALUE on every entry; give it once per property")
	numberVar(cmd.Flags(), &batch, "batch", 1, 1, "append up to `N` lines at a time, atomically")
	cmd.Flags().BoolVar(&exclusive, "exclusive", false, "open an exclusive writer, fencing the log's other writers and shared producers")
	numberVar(cmd.Flags(), &epoch, "epoch", 0, 1, "with --exclusive, open the writer session of epoch `N` (lower than the log's fails, equal reopens it, higher fences it)")
	numberVar(cmd.Flags(), &ifEnd, "if-end", 0, 0, "append only if the log ends at this `offset`")
	return cmd
}

// ack is an append whose offsets are to be printed.
type ack struct {
	line  int           // the number of its first line, from 1
	p     *tern.Pending // a single entry in flight, or nil for a batch
	first tern.Offset   // the offset of the acknowledged batch's first entry
	n     int           // entries in the batch
}

// appendLines appends the lines of in, batch lines per append, and prints
// the offsets of the acknowledged entries to out. Single lines are appended
// asynchronously, up to maxInFlight ahead of the printing. When ctx ends it
// stops reading, and prints the offsets of the appends already made.
//
// With cond, every append is conditional on the log's end being at, plus
// the entries appended before it, and waits for the one before it.
func appendLines(ctx context.Context, w *tern.Writer, in io.Reader, out io.Writer, shape entryShape, batch int, cond bool, at tern.Offset) error {
	maxEntryBytes := shape.maxPayload
	opts := func() []tern.AppendOption {
		if !cond {
			return nil
		}
		return []tern.AppendOption{tern.IfEnd(at)}
	}
	acks := make(chan ack, maxInFlight)
	stopped := make(chan struct{}) // closed when the printer returns
	printed := make(chan error, 1)
	go func() {
		defer close(stopped)
		printed <- printAcks(ctx, acks, out)
	}()
	halted := false // the printer returned early, on a failed append
	send := func(a ack) bool {
		select {
		case acks <- a:
			return true
		case <-stopped:
			halted = true
			return false
		}
	}

	// The limit leaves room for the "\r\n" that ScanLines drops, so that a
	// line of exactly maxEntryBytes fits; a longer one is caught below.
	limit := maxEntryBytes + 2
	sc := bufio.NewScanner(interruptible(ctx, in))
	sc.Buffer(make([]byte, 0, min(64<<10, limit)), limit)
	var (
		line int // lines read
		errs []error
		pend []tern.Entry // the batch being gathered
	)
	flush := func() bool {
		if len(pend) == 0 {
			return true
		}
		first := line - len(pend) + 1
		off, err := w.AppendBatch(context.WithoutCancel(ctx), pend, opts()...)
		at += tern.Offset(len(pend))
		if err != nil {
			errs = append(errs, fmt.Errorf("append lines %d to %d: %w", first, line, err))
			return false
		}
		a := ack{line: first, first: off, n: len(pend)}
		pend = pend[:0]
		return send(a)
	}
	tooLong := 0
	for sc.Scan() {
		b := sc.Bytes()
		if len(b) > maxEntryBytes {
			tooLong = line + 1
			break
		}
		line++
		// Conditional appends go one at a time: a queued one could land
		// once the one before it failed its condition.
		if batch == 1 && !cond {
			p := w.AppendAsync(tern.Entry{Payload: b, Properties: shape.props}, opts()...)
			at++
			if !send(ack{line: line, p: p}) {
				break
			}
			continue
		}
		pend = append(pend, tern.Entry{Payload: bytes.Clone(b), Properties: shape.props})
		if len(pend) == batch && !flush() {
			break
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		tooLong = line + 1
	case errors.Is(err, context.Canceled) && line == 0:
		errs = append(errs, errors.New("interrupted before the first line: nothing was appended"))
	case errors.Is(err, context.Canceled):
		errs = append(errs, fmt.Errorf("interrupted after line %d: the lines whose offsets are printed were appended, the others were not", line))
	case err != nil:
		errs = append(errs, fmt.Errorf("read stdin: %w", err))
	}
	if len(errs) == 0 && !halted {
		flush() // the lines before an oversized one too, as they precede it
	}
	close(acks)
	if err := <-printed; err != nil {
		errs = append([]error{err}, errs...) // it happened first
	}
	if tooLong > 0 && len(errs) == 0 { // else an append failed first, and that is the news
		largest := "the largest entry this log takes (its --max-entry-bytes)"
		if shape.propBytes > 0 {
			largest = fmt.Sprintf("the largest entry this log takes (its --max-entry-bytes) less the %d bytes of the properties", shape.propBytes)
		}
		errs = append(errs, fmt.Errorf("line %d is longer than %d bytes, %s: the lines before it were appended and their offsets printed; line %d and the lines after it were not", tooLong, maxEntryBytes, largest, tooLong))
	}
	return errors.Join(errs...)
}

// printAcks prints the offsets of acks in order, each once it is
// acknowledged, flushing whenever no further ack is queued. It returns at the
// first failed append. It waits even after ctx ends: the appends queued
// complete regardless, and their offsets are owed to the user.
func printAcks(ctx context.Context, acks <-chan ack, out io.Writer) error {
	ctx = context.WithoutCancel(ctx)
	bw := bufio.NewWriter(out)
	for a := range acks {
		if a.p != nil {
			off, err := a.p.Wait(ctx)
			if err != nil {
				return errors.Join(fmt.Errorf("append line %d: %w", a.line, err), bw.Flush())
			}
			a.first, a.n = off, 1
		}
		for i := range a.n {
			fmt.Fprintln(bw, a.first+tern.Offset(i))
		}
		if len(acks) == 0 {
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("print offsets: %w", err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("print offsets: %w", err)
	}
	return nil
}

// interruptible returns a Reader of r whose Read fails with ctx.Err() once
// ctx ends, even while the Read of r is blocked (as on a terminal): so that
// an interrupt stops an append waiting for input. An abandoned Read of r
// finishes in the background, into a buffer of its own.
func interruptible(ctx context.Context, r io.Reader) io.Reader {
	if ctx.Done() == nil {
		return r
	}
	var buf []byte // reused until a Read is abandoned, after which all fail
	return readFunc(func(p []byte) (int, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if cap(buf) < len(p) {
			buf = make([]byte, len(p))
		}
		b := buf[:len(p)]
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			n, err := r.Read(b)
			done <- result{n, err}
		}()
		select {
		case res := <-done:
			return copy(p, b[:res.n]), res.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }
