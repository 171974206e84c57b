// Package objlogtest holds what the tests of the engines on object
// storage (packages objlog and quorumlog) share: a bucket and a metadata
// store holding one log, and appending and reading through engine.Engine.
package objlogtest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
)

// Env is a bucket and a metadata store holding one log, "l".
type Env struct {
	T      *testing.T
	Bucket blob.Bucket
	Store  meta.Store
}

// NewEnv returns an Env on b, with a metadata store of its own.
func NewEnv(t *testing.T, b blob.Bucket) *Env {
	t.Helper()
	s, err := meta.OpenBolt(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateLog(context.Background(), meta.Log{Name: "l"}); err != nil {
		t.Fatal(err)
	}
	return &Env{T: t, Bucket: b, Store: s}
}

// Writer bumps the epoch and fences the log with it.
func (e *Env) Writer(l engine.Engine) uint64 {
	e.T.Helper()
	epoch, err := e.Store.BumpEpoch(context.Background(), "l")
	if err != nil {
		e.T.Fatal(err)
	}
	if err := l.Fence(context.Background(), epoch, nil); err != nil {
		e.T.Fatal(err)
	}
	return epoch
}

// Entry is one entry of payload s.
func Entry(s string) []record.Entry { return []record.Entry{{Payload: []byte(s), Time: 1}} }

// AppendN appends n entries named prefix-i concurrently-ish (all queued
// before waiting) and returns their offsets.
func AppendN(t *testing.T, l engine.Engine, epoch uint64, prefix string, n int) []uint64 {
	t.Helper()
	ps := make([]engine.Pending, n)
	for i := range n {
		p, err := l.Append(epoch, Entry(fmt.Sprintf("%s-%d", prefix, i)), engine.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	offs := make([]uint64, n)
	for i, p := range ps {
		off, err := p.Wait(context.Background())
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		offs[i] = off
	}
	return offs
}

// ReadAll reads [from, to) with a new reader and returns the payloads.
func ReadAll(t *testing.T, l engine.Engine, from, to uint64) []string {
	t.Helper()
	r, err := l.NewReader(from, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for next := from; next < to; {
		es, err := r.NextBatch(ctx, 100, 0)
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		for _, e := range es {
			if e.Offset != next {
				t.Fatalf("read offset %d, want %d", e.Offset, next)
			}
			out = append(out, string(e.Payload))
			next++
		}
	}
	return out
}

// WantSeq checks that got is prefix-0 to prefix-(n-1).
func WantSeq(t *testing.T, got []string, prefix string, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("read %d entries, want %d", len(got), n)
	}
	for i, g := range got {
		if want := fmt.Sprintf("%s-%d", prefix, i); g != want {
			t.Fatalf("entry %d is %q, want %q", i, g, want)
		}
	}
}

// Segments returns the log's segments from metadata.
func (e *Env) Segments() []meta.Segment {
	e.T.Helper()
	segs, err := e.Store.Segments(context.Background(), "l")
	if err != nil {
		e.T.Fatal(err)
	}
	return segs
}

// WantFenced checks that an append of the writer of epoch fails with
// rpcerr.ErrFenced, at once or when waited for.
func WantFenced(t *testing.T, l engine.Engine, epoch uint64) {
	t.Helper()
	p, err := l.Append(epoch, Entry("fenced"), engine.AppendOptions{})
	if err == nil {
		_, err = p.Wait(context.Background())
	}
	if !errors.Is(err, rpcerr.ErrFenced) {
		t.Fatalf("the fenced writer's append: %v, want rpcerr.ErrFenced", err)
	}
}
