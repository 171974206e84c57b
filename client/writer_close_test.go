package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/ternwal/tern/client/ternpb"
)

// slowServer serves one log, "l", and its writer sessions; its append
// streams answer each batch after delay, or never when delay is zero (a
// server stuck on its storage, its connection alive).
type slowServer struct {
	ternpb.UnimplementedTernServer
	delay time.Duration

	mu      sync.Mutex
	batches int // received
	closes  int // CloseWriter calls
}

func (f *slowServer) DescribeLog(ctx context.Context, req *ternpb.DescribeLogRequest) (*ternpb.LogInfo, error) {
	return &ternpb.LogInfo{Name: req.GetName(), Options: LogOptions{}.Proto()}, nil
}

func (f *slowServer) OpenWriter(ctx context.Context, req *ternpb.OpenWriterRequest) (*ternpb.OpenWriterResponse, error) {
	return &ternpb.OpenWriterResponse{Epoch: 1}, nil
}

func (f *slowServer) CloseWriter(ctx context.Context, req *ternpb.CloseWriterRequest) (*ternpb.CloseWriterResponse, error) {
	f.mu.Lock()
	f.closes++
	f.mu.Unlock()
	return &ternpb.CloseWriterResponse{}, nil
}

func (f *slowServer) AppendStream(stream grpc.BidiStreamingServer[ternpb.AppendStreamRequest, ternpb.AppendStreamResponse]) error {
	var offset uint64
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		f.mu.Lock()
		f.batches += len(req.GetBatches())
		f.mu.Unlock()
		if f.delay == 0 {
			<-stream.Context().Done() // stuck: never answers
			return stream.Context().Err()
		}
		for range req.GetBatches() {
			select {
			case <-time.After(f.delay):
			case <-stream.Context().Done():
				return stream.Context().Err()
			}
			if err := stream.Send(&ternpb.AppendStreamResponse{Results: []*ternpb.AppendResult{{Offset: offset}}}); err != nil {
				return nil
			}
			offset++
		}
	}
}

func (f *slowServer) counts() (batches, closes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.batches, f.closes
}

func openSlow(t *testing.T, f *slowServer, retry time.Duration) *Writer {
	t.Helper()
	l := openServed(t, f, Options{RetryTimeout: retry})
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// closeWithin runs close and fails the test if it does not return within a
// minute: a hang, not a measurement.
func closeWithin(t *testing.T, close func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Close did not return within a minute")
		return nil
	}
}

// A writer whose server is reached but never answers its appends does not
// hold Close forever: once the server has answered nothing for
// RetryTimeout, Close fails the appends with an unknown outcome
// (ErrUnavailable), returns that error, and leaves the session open.
func TestWriterCloseGivesUpOnSilentServer(t *testing.T) {
	for _, detach := range []bool{false, true} {
		f := &slowServer{}
		w := openSlow(t, f, 200*time.Millisecond)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err := w.Append(ctx, Entry{Payload: []byte("a")})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Append to a server that does not answer: %v, want DeadlineExceeded", err)
		}
		p := w.AppendAsync(Entry{Payload: []byte("b")})
		stop := w.Close
		if detach {
			stop = w.Detach
		}
		err = closeWithin(t, stop)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "outcome of the appends it had sent is unknown") {
			t.Fatalf("detach %v: Close of a writer whose server does not answer: %v, want ErrUnavailable, outcome unknown", detach, err)
		}
		if _, perr := p.Wait(t.Context()); !errors.Is(perr, ErrUnavailable) {
			t.Fatalf("detach %v: the append queued before Close: %v, want ErrUnavailable", detach, perr)
		}
		if _, closes := f.counts(); closes != 0 {
			t.Fatalf("detach %v: %d CloseWriter calls after the appends were given up on, want 0 (the session stays open)", detach, closes)
		}
		if _, err := w.Append(t.Context(), Entry{Payload: []byte("c")}); !errors.Is(err, ErrClosed) {
			t.Fatalf("detach %v: Append after Close: %v, want ErrClosed", detach, err)
		}
	}
}

// Close waits for every queued append as long as the server keeps
// answering, however much longer than RetryTimeout that takes in all.
func TestWriterCloseWaitsWhileServerAnswers(t *testing.T) {
	f := &slowServer{delay: 100 * time.Millisecond}
	w := openSlow(t, f, time.Second)
	var ps []*Pending
	for range 20 { // about 2s of answers, 100ms apart
		ps = append(ps, w.AppendAsync(Entry{Payload: []byte("x")}))
	}
	if err := closeWithin(t, w.Close); err != nil {
		t.Fatalf("Close while the server answers: %v", err)
	}
	for i, p := range ps {
		if _, err := p.Wait(t.Context()); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if batches, closes := f.counts(); batches != 20 || closes != 1 {
		t.Fatalf("the server received %d batches and %d CloseWriter calls, want 20 and 1", batches, closes)
	}
}
