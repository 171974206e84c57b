package main

import (
	"context"
	"io"
	"os"
	"runtime"
	"time"
)

// printedWriter is a command's output, counted: it tells how many of the
// bytes written the reader has taken, so that a consumer acknowledges only
// the entries that left it. On a pipe that is those written less those
// still in the pipe, which a reader that stops (head -1) never takes; on
// anything else, every byte written.
type printedWriter struct {
	out     io.Writer
	written int64
	pipe    *os.File // out, if it is a pipe whose unread bytes can be asked
}

func newPrintedWriter(out io.Writer) *printedWriter {
	w := &printedWriter{out: out}
	if f, ok := out.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			if _, err := pipeUnread(f); err == nil {
				w.pipe = f
			}
		}
	}
	return w
}

func (w *printedWriter) Write(p []byte) (int, error) {
	n, err := w.out.Write(p)
	w.written += int64(n)
	return n, err
}

// taken is how many of the bytes written the reader has taken.
func (w *printedWriter) taken() int64 {
	if w.pipe == nil {
		return w.written
	}
	unread, err := pipeUnread(w.pipe)
	if err != nil {
		return w.written
	}
	return w.written - int64(unread)
}

// lockstep reports whether the writer must wait for the reader to take each
// entry before writing the next (drain): on a pipe, else a reader that
// reads blocks (head) takes entries it never prints.
func (w *printedWriter) lockstep() bool { return w.pipe != nil }

// drain waits until the reader has taken every byte written, or has closed
// the pipe, or ctx ends. It returns whether the reader closed the pipe
// without taking them all.
func (w *printedWriter) drain(ctx context.Context) (closed bool) {
	if w.pipe == nil {
		return false
	}
	// A reader waiting in read takes the bytes within microseconds: poll
	// fast first, then back off to a millisecond for a slow one.
	for i := 0; w.taken() < w.written; i++ {
		if pipeClosed(w.pipe) {
			return true
		}
		if i < 50 {
			runtime.Gosched()
			continue
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(min(i-49, 20)) * 50 * time.Microsecond):
		}
	}
	return false
}
