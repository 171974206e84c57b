package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/signal"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern"
)

// readBatch is the most entries asked of one NextBatch.
const readBatch = 1000

func (a *app) readCmd() *cobra.Command {
	var (
		from, limit     uint64
		follow, fromEnd bool
		format          string
	)
	cmd := &cobra.Command{
		Use:   "read NAME",
		Short: "Print the entries of a log",
		Long: `Print the entries of a log, from --from (default: where the log starts) to
where it ends when the command starts; with --follow, go on printing entries as
they are appended until interrupted. --from-end starts where the log ends when
the command starts: with --follow, it prints only the entries appended from
then on.

On a server, a reader whose server restarts, or whose log moves to another
node, says so on stderr, reconnects and goes on after the last entry it
printed: it prints no entry twice and skips none. It gives up when the server
cannot be reached for 30 seconds.

--format text prints each payload followed by a newline. --format json prints
one object per line:

  {"offset":12,"payload":"hello","time":"2025-01-02T15:04:05.123456789Z"}

The payload is a string if it is UTF-8 text without control characters other
than tab; otherwise it is base64 and the object has "encoding":"base64".
Properties, if any, are printed as "properties":{"key":"value"}, the values
strings as the payload is if they all are text, else all base64 and the
object has "properties_encoding":"base64".`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if fromEnd && cmd.Flags().Changed("from") {
				return usagef(cmd, "--from and --from-end cannot be used together: start at an offset, or at the end")
			}
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
			switch {
			case fromEnd:
				from = uint64(info.End)
			case !cmd.Flags().Changed("from"):
				from = uint64(info.Start)
			}
			if tern.Offset(from) > info.End {
				return fmt.Errorf("offset %d is beyond the end of log %q, which the next append will give offset %d: read from at most there", from, l.Name(), info.End)
			}
			r, err := l.OpenReader(ctx, tern.Offset(from), a.reconnectNotify())
			if err != nil {
				return readError(l.Name(), err)
			}
			defer r.Close()
			end := tern.Offset(math.MaxUint64)
			if !follow {
				end = info.End
			}
			err = readEntries(ctx, l, r, tern.Offset(from), end, limit, a.stdout, write)
			switch {
			case follow && ctx.Err() != nil && errors.Is(err, ctx.Err()):
				return nil // following ends when interrupted
			case errors.Is(err, syscall.EPIPE):
				return nil // the reader is done (head)
			}
			return readError(l.Name(), err)
		},
	}
	f := cmd.Flags()
	numberVar(f, &from, "from", 0, 0, "the `offset` of the first entry to print (default: where the log starts)")
	f.SetAnnotation("from", orAnnotation, []string{"--from-end"})
	numberVar(f, &limit, "limit", 0, 0, "print at most `N` entries (default: no limit)")
	f.BoolVar(&follow, "follow", false, "go on printing entries as they are appended, until interrupted")
	f.BoolVar(&fromEnd, "from-end", false, "start where the log ends: with --follow, print only the entries appended from now on")
	f.StringVar(&format, "format", "text", "the output `format`: text (payloads, one per line) or json (one object per line)")
	return cmd
}

// readEntries writes the entries of r, which is positioned at next, up to
// end or limit entries, whichever comes first. It flushes its output
// whenever it has caught up with the log, before the read that may wait.
func readEntries(ctx context.Context, l *tern.Log, r *tern.Reader, next, end tern.Offset, limit uint64, out io.Writer, write func(*bufio.Writer, tern.Entry) error) error {
	bw := bufio.NewWriterSize(out, 64<<10)
	for limit > 0 && next < end {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, bw.Flush()) // else a fast writer could keep a follower going
		}
		want := min(limit, uint64(end-next), readBatch)
		es, err := r.NextBatch(ctx, int(want))
		if err != nil {
			return errors.Join(err, bw.Flush())
		}
		for _, e := range es {
			if err := write(bw, e); err != nil {
				return err
			}
		}
		next = es[len(es)-1].Offset + 1
		limit -= uint64(len(es))
		info, err := l.Info(ctx)
		if err != nil {
			return errors.Join(err, bw.Flush())
		}
		if next >= info.End {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// reconnectNotify is the read option that says on stderr when a reader or
// subscriber of a server's log lost the server, and when it is back.
func (a *app) reconnectNotify() tern.ReadOption {
	return tern.WithReconnectNotify(func(err error) {
		if err != nil {
			fmt.Fprintf(a.stderr, "tern: lost the server at %s, reconnecting: %v\n", a.server, err)
		} else {
			fmt.Fprintf(a.stderr, "tern: reconnected to the server at %s\n", a.server)
		}
	})
}

// ignorePipeSignal makes a write to a closed pipe fail with EPIPE instead
// of killing the process, so that read and consume end cleanly when their
// reader does (head -1), consume having acknowledged what the reader took.
func ignorePipeSignal() { signal.Ignore(syscall.SIGPIPE) }

// readError explains a read below the log's start.
func readError(name string, err error) error {
	if te, ok := errors.AsType[*tern.TruncatedError](err); ok {
		return fmt.Errorf("offset %d of log %q is gone: the log was truncated and now starts at offset %d; read from there with --from %d, or leave --from out to start where the log starts", te.Offset, name, te.Start, te.Start)
	}
	return err
}

// entryWriter is the writer of the entry --format format.
func entryWriter(cmd *cobra.Command, format string) (func(*bufio.Writer, tern.Entry) error, error) {
	switch format {
	case "text":
		return writeText, nil
	case "json":
		return writeJSON, nil
	}
	return nil, usagef(cmd, "--format %q: use text or json", format)
}

func writeText(w *bufio.Writer, e tern.Entry) error {
	w.Write(e.Payload)
	return w.WriteByte('\n') // bufio.Writer errors are sticky: this reports both
}

// jsonEntry is an entry as read --format json prints it.
type jsonEntry struct {
	Offset     tern.Offset       `json:"offset"`
	Payload    string            `json:"payload"`
	Encoding   string            `json:"encoding,omitempty"` // "base64", or empty for text
	Time       string            `json:"time"`
	Properties map[string]string `json:"properties,omitempty"`
	// PropertiesEncoding is "base64" when a property's value is not text
	// and the values are base64, or empty.
	PropertiesEncoding string `json:"properties_encoding,omitempty"`
}

func writeJSON(w *bufio.Writer, e tern.Entry) error {
	j := jsonEntry{Offset: e.Offset, Time: e.Time.UTC().Format(time.RFC3339Nano)}
	if len(e.Properties) > 0 {
		j.Properties = make(map[string]string, len(e.Properties))
		text := true
		for _, v := range e.Properties {
			text = text && isText(v)
		}
		for k, v := range e.Properties {
			if text {
				j.Properties[k] = string(v)
			} else {
				j.Properties[k] = base64.StdEncoding.EncodeToString(v)
			}
		}
		if !text {
			j.PropertiesEncoding = "base64"
		}
	}
	if isText(e.Payload) {
		j.Payload = string(e.Payload)
	} else {
		j.Payload, j.Encoding = base64.StdEncoding.EncodeToString(e.Payload), "base64"
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(j)
}

// isText reports whether b is UTF-8 text without control characters other
// than tab: what a JSON string shows readably and round-trips.
func isText(b []byte) bool {
	return utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return r != '\t' && unicode.IsControl(r) })
}
