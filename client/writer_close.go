package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ternwal/tern/client/ternpb"
)

// Close waits for the writer's queued appends to be answered, ends its
// stream, and ends its session on the server (CloseWriter) unless a newer
// one fenced it: shared producers may then append to the log. The session
// can still be reopened with WithEpoch. The Client's Close detaches its
// open writers instead (see Detach).
//
// The wait is bounded: while the server cannot be reached, the appends fail
// once Options.RetryTimeout has passed, as they do without a Close; and
// when the server is reached but answers none of the writer's appends for
// Options.RetryTimeout (streamEndTimeout when RetryTimeout is negative),
// Close gives up on them: they fail with an error that matches
// ErrUnavailable and says that their outcome is unknown, the session is
// left open (as Detach leaves it), and Close returns that error.
func (w *Writer) Close() error {
	if err := w.stop(); err != nil {
		return err
	}
	w.mu.Lock()
	fenced := w.fenced
	w.mu.Unlock()
	if w.shared || fenced != nil || w.l.c.isClosed() {
		return nil // the Client's Close detaches its writers
	}
	ctx, cancel := context.WithTimeout(context.Background(), streamEndTimeout)
	defer cancel()
	err := w.l.call(ctx, func(ctx context.Context, api ternpb.TernClient) error {
		_, err := api.CloseWriter(ctx, &ternpb.CloseWriterRequest{Log: w.l.name, Epoch: w.epoch})
		return err
	})
	if errors.Is(err, ErrFenced) || errors.Is(err, ErrNotFound) {
		return nil // a newer session, or no log: nothing to end
	}
	return err
}

// Detach waits for the writer's queued appends to be answered and ends its
// stream, as Close does, but leaves its session open: it can be reopened
// (WithEpoch), and shared producers still cannot append. Its wait is
// bounded as Close's is, and fails as Close's does.
func (w *Writer) Detach() error { return w.stop() }

// stop waits for the queued appends' outcomes (at most as long as
// closeWait allows) and the sender's exit. It returns the error the appends
// were abandoned with, if they were.
func (w *Writer) stop() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	last := w.last
	w.signal()
	w.mu.Unlock()
	var err error
	if last != nil {
		err = w.closeWait(last)
	}
	<-w.done
	w.l.c.untrack(w)
	return err
}

// closeWait waits for last, the writer's last append, to be answered, as
// long as the server answers some append of the writer at least every
// bound (Options.RetryTimeout, or streamEndTimeout when that is negative);
// past that, it abandons what is unanswered and returns the error it
// failed them with. A server that is reached and never answers (stuck on
// its storage, say) would otherwise hold Close forever: its connection is
// alive, so the stream never breaks.
func (w *Writer) closeWait(last *Pending) error {
	bound := w.l.c.retryTimeout
	if bound <= 0 {
		bound = streamEndTimeout
	}
	since := time.Now()
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		select {
		case <-last.done:
			return nil
		case <-t.C:
		}
		w.mu.Lock()
		if w.answered.After(since) {
			since = w.answered
		}
		w.mu.Unlock()
		if left := bound - time.Since(since); left > 0 {
			t.Reset(left)
			continue
		}
		return w.abandon(fmt.Errorf("%w: tern: the server answered none of the writer's appends to log %q for %v while the writer closed (Options.RetryTimeout): the outcome of the appends it had sent is unknown, and the writer's session is left open", ErrUnavailable, w.l.name, bound))
	}
}

// abandon fails every append not answered with err, and ends the current
// stream: a closing writer that gave up on the server. The sender then
// finds nothing to send and exits.
func (w *Writer) abandon(err error) error {
	w.mu.Lock()
	w.abandoned = err
	ps := append(w.sent, w.queue...)
	w.sent, w.queue = nil, nil
	for _, p := range ps {
		p.resent = true // a stream may still hold its bytes: never pooled
	}
	s := w.s
	w.signal()
	w.mu.Unlock()
	if s != nil {
		s.cancel()
	}
	for _, p := range ps {
		p.finish(0, err)
	}
	return err
}
