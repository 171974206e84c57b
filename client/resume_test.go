package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// breaker is a server of one log whose Read streams break, as a server
// that restarts breaks them, after every few entries; appended tells the
// streams an entry was appended.
type breaker struct {
	ternpb.UnimplementedTernServer
	every int // entries a stream sends before it breaks

	mu       sync.Mutex
	start    uint64 // the log's start
	end      uint64 // the log's end: entries start..end-1 exist
	deleted  bool
	opens    []uint64 // where each stream opened
	appended chan struct{}
}

func newBreaker(every int) *breaker {
	return &breaker{every: every, appended: make(chan struct{})}
}

func (b *breaker) append(n int) {
	b.mu.Lock()
	b.end += uint64(n)
	close(b.appended)
	b.appended = make(chan struct{})
	b.mu.Unlock()
}

func (b *breaker) DescribeLog(ctx context.Context, req *ternpb.DescribeLogRequest) (*ternpb.LogInfo, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "no name")
	}
	return &ternpb.LogInfo{Name: req.GetName(), Options: LogOptions{}.Proto()}, nil
}

func (b *breaker) Read(req *ternpb.ReadRequest, stream ternpb.Tern_ReadServer) error {
	b.mu.Lock()
	from := req.GetFrom()
	switch {
	case req.GetFromStart():
		from = b.start
	case req.GetFromEnd():
		from = b.end
	}
	deleted, start := b.deleted, b.start
	b.opens = append(b.opens, from)
	b.mu.Unlock()
	if deleted {
		return rpcerr.StatusError(rpcerr.ErrNotFound)
	}
	if from < start {
		return rpcerr.StatusError(&rpcerr.TruncatedError{Offset: from, Start: start})
	}
	if err := stream.SendHeader(metadata.Pairs(grpcopts.FromHeader, strconv.FormatUint(from, 10))); err != nil {
		return err
	}
	for sent := 0; ; {
		b.mu.Lock()
		end, appended, deleted := b.end, b.appended, b.deleted
		b.mu.Unlock()
		if deleted {
			return rpcerr.StatusError(rpcerr.ErrNotFound)
		}
		if from == end {
			select {
			case <-appended:
				continue
			case <-stream.Context().Done():
				return stream.Context().Err()
			}
		}
		if err := stream.Send(&ternpb.ReadResponse{Entries: []*ternpb.Entry{{Offset: from, Payload: []byte(fmt.Sprint(from))}}}); err != nil {
			return err
		}
		from++
		if sent++; sent == b.every {
			return rpcerr.StatusError(fmt.Errorf("%w: the server is shutting down", rpcerr.ErrClosed))
		}
	}
}

func openBreaker(t *testing.T, b *breaker) *Log {
	t.Helper()
	return openServed(t, b, Options{})
}

// openServed serves srv, opens a Client on it with o (its Server set) and
// returns its log "l"; the test's cleanup closes the Client.
func openServed(t *testing.T, srv ternpb.TernServer, o Options) *Log {
	t.Helper()
	addr, _ := serve(t, srv, "")
	o.Server = addr
	c, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l, err := c.OpenLog(t.Context(), "l")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A reader whose stream breaks every 3 entries reads every entry once, in
// order, and says when it lost its stream and when it is back.
func TestReaderResumes(t *testing.T) {
	b := newBreaker(3)
	b.append(20)
	l := openBreaker(t, b)
	var events []error
	r, err := l.OpenReader(t.Context(), 0, WithReconnectNotify(func(err error) { events = append(events, err) }))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for want := range Offset(20) {
		e, err := r.Next(t.Context())
		if err != nil {
			t.Fatalf("entry %d: %v", want, err)
		}
		if e.Offset != want || string(e.Payload) != fmt.Sprint(want) {
			t.Fatalf("entry %d: got offset %d (%q)", want, e.Offset, e.Payload)
		}
	}
	// 20 entries in streams of 3: 7 breaks, each a loss then a return.
	if len(events) < 12 || events[0] == nil || events[1] != nil {
		t.Fatalf("reconnect notifications %v: want a loss then a return for each break", events)
	}
}

// A reader opened FromEnd that loses its stream before any entry reopens
// where the first stream opened: it sees the entries appended meanwhile.
func TestReaderFromEndResumesAtItsStart(t *testing.T) {
	b := newBreaker(1)
	b.append(5)
	l := openBreaker(t, b)
	r, err := l.OpenReader(t.Context(), FromEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b.append(3) // 5, 6, 7: each stream breaks after one
	for want := Offset(5); want < 8; want++ {
		e, err := r.Next(t.Context())
		if err != nil || e.Offset != want {
			t.Fatalf("entry %d: offset %d, %v", want, e.Offset, err)
		}
	}
	b.mu.Lock()
	opens := b.opens
	b.mu.Unlock()
	if opens[0] != 5 || opens[1] != 6 {
		t.Fatalf("streams opened at %v, want 5 then 6", opens)
	}
}

// What ends a reader for good: its log deleted (ErrNotFound), or a
// truncation past it while it was away (a *TruncatedError that says where
// the log starts).
func TestReaderEndsOnAnswers(t *testing.T) {
	b := newBreaker(2)
	b.append(4)
	l := openBreaker(t, b)
	r, err := l.OpenReader(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 2 {
		if _, err := r.Next(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	b.start = 3
	b.mu.Unlock()
	_, err = r.Next(t.Context())
	if te, ok := rpcerr.As[*TruncatedError](err); !ok || te.Offset != 2 || te.Start != 3 {
		t.Fatalf("Next after a truncation past the reader: %v, want a TruncatedError at 2, start 3", err)
	}

	r2, err := l.OpenReader(t.Context(), 4) // at the end: it waits
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	b.mu.Lock()
	b.deleted = true
	b.mu.Unlock()
	b.append(0)
	if _, err := r2.Next(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Next after the log was deleted: %v, want ErrNotFound", err)
	}
}
