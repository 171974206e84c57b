package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/ternpb"
)

// A remote Reader or Subscriber reads one server stream (Read, or Subscribe)
// at a time. A goroutine receives the stream's responses into a channel of
// a few responses, which gRPC's flow control extends back to the server;
// Next and NextBatch take from that channel, so a ctx that ends only stops
// the caller's wait and the stream stays usable for the next call. When the
// stream breaks for a reason the retry policy (route.go) retries, Next opens
// another where the last one left off (read.go, subscribe.go).

// recvAhead is how many responses a reader receives before they are asked for.
const recvAhead = 4

// recvItem is one response turned into entries, or the error that ended the
// stream.
type recvItem struct {
	es    []Entry
	err   error // mapped
	cause error // as the stream returned it
}

// recvLoop receives a stream's responses. Its buf and err belong to the
// caller of next, which is one goroutine at a time.
type recvLoop struct {
	items    chan recvItem
	stop     chan struct{} // closed by halt: next fails with ErrClosed, the loop drops what it receives
	stopOnce sync.Once
	done     chan struct{} // closed when the loop has exited

	buf      []Entry
	err      error // the error that ended the stream, once buf is drained
	cause    error // err as the stream returned it, before mapErr
	maxBytes int   // of one next; 0 is no bound (WithMaxBatchBytes)
}

// startRecv runs recv until it fails; mapErr turns its error into the error
// next returns.
func startRecv(recvMsg func(any) error, maxBytes int, mapErr func(error) error) *recvLoop {
	r := &recvLoop{items: make(chan recvItem, recvAhead), stop: make(chan struct{}), done: make(chan struct{}), maxBytes: maxBytes}
	go func() {
		defer close(r.done)
		for {
			var resp grpcopts.DecodedRead
			err := recvMsg(&resp)
			var item recvItem
			if err != nil {
				item.err, item.cause = mapErr(err), err
			} else {
				item.es = entriesOf(&resp)
			}
			select {
			case r.items <- item:
			case <-r.stop:
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// halt makes next fail with ErrClosed from now on, and the loop drop what it
// receives until the stream ends. It may be called more than once, from any
// goroutine.
func (r *recvLoop) halt() { r.stopOnce.Do(func() { close(r.stop) }) }

func (r *recvLoop) halted() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// next returns up to max entries, and up to maxBytes of them unless the
// first is larger, waiting for the first until ctx ends.
func (r *recvLoop) next(ctx context.Context, max int) ([]Entry, error) {
	if max <= 0 {
		return nil, fmt.Errorf("%w: NextBatch of no entries", ErrInvalid)
	}
	if r.halted() {
		return nil, ErrClosed
	}
	for len(r.buf) == 0 {
		if r.err != nil {
			return nil, r.err
		}
		select {
		case it := <-r.items:
			r.take(it)
			continue
		default:
		}
		select {
		case it := <-r.items:
			r.take(it)
		case <-r.stop:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
fill: // with what has arrived, without waiting
	for len(r.buf) < max && r.err == nil && r.bytesBefore(max) == 0 {
		select {
		case it := <-r.items:
			r.take(it)
		default:
			break fill
		}
	}
	n := min(max, len(r.buf))
	if k := r.bytesBefore(n); k > 0 {
		n = k
	}
	out := r.buf[:n:n]
	r.buf = r.buf[n:]
	return out, nil
}

// bytesBefore returns how many of the first n buffered entries, at least
// one, fit in maxBytes when the first n do not; 0 when they do.
func (r *recvLoop) bytesBefore(n int) int {
	if r.maxBytes <= 0 {
		return 0
	}
	size := 0
	for i, e := range r.buf[:min(n, len(r.buf))] {
		if size += EntryBytes(e); size > r.maxBytes {
			return max(i, 1)
		}
	}
	return 0
}

func (r *recvLoop) take(it recvItem) {
	if it.err != nil {
		r.err, r.cause = it.err, it.cause
		return
	}
	r.buf = append(r.buf, it.es...)
}

// entriesOf converts a response: its entries, then its tick.
func entriesOf(resp *grpcopts.DecodedRead) []Entry {
	es := make([]Entry, 0, len(resp.Entries)+1)
	for _, e := range resp.Entries {
		es = append(es, Entry{Offset: Offset(e.Offset), Payload: e.Payload, Properties: e.Properties, Time: time.Unix(0, e.UnixNano)})
	}
	if resp.HasTick {
		es = append(es, Entry{Offset: Offset(resp.Tick.Offset), IsTick: true, Tick: resp.Tick.Time})
	}
	return es
}

// streamErr maps the error that ended a stream that should go on until
// closed: a server that ends it gives ErrClosed.
func streamErr(c *Client, what string, err error) error {
	if err == io.EOF {
		return fmt.Errorf("%w: the server ended the %s", ErrClosed, what)
	}
	return c.err(err)
}

// opened waits for the response headers, which the server sends once the
// reader or subscriber is open: from then on it receives every tick, and a
// subscriber has taken the subscription over. A stream that ended instead
// returns its error.
func opened(stream interface {
	Header() (metadata.MD, error)
	RecvMsg(any) error
}) (metadata.MD, error) {
	md, err := stream.Header()
	if err != nil {
		return nil, err
	}
	if md == nil { // ended without headers: the status says why
		if err := stream.RecvMsg(new(ternpb.ReadResponse)); err != nil {
			return nil, err
		}
		return nil, errors.New("tern: the server sent an entry before opening the stream")
	}
	return md, nil
}
