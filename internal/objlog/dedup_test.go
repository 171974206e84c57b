package objlog

import (
	"errors"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
)

// A writer whose uploads were stored but whose responses were lost fails
// them, their outcome unknown, and dies; a newer writer, in another
// process, rebuilds the deduplication state from the log: every retry is
// answered with the offset its append has, or appended if it never got
// there. The same after a clean close and a reopen with a newer epoch.
func TestDedupAcrossWriters(t *testing.T) {
	faulty := blob.NewFaulty(blob.NewMem(), nil)
	e := newEnv(t, faulty)
	tuning := Options{FlushBytes: 200, MaxBatchBytes: 100, FlushInterval: time.Millisecond, MaxFragments: 4, RetryTimeout: 50 * time.Millisecond}
	l1 := e.open(tuning)
	e1 := e.Writer(l1)
	keys := objlogtest.Keys(3, 30)
	acked, err := objlogtest.AppendKeys(l1, e1, keys[:45])
	if err != nil {
		t.Fatal(err)
	}
	// Stored, but every response lost, and the checks fail too.
	faulty.SetDecide(func(op blob.Op, key string) blob.Fault {
		switch op {
		case blob.OpPut:
			return blob.Fault{Ambiguous: true}
		case blob.OpGet:
			return blob.Fault{Err: blob.ErrInjected}
		}
		return blob.Fault{}
	})
	if _, err := objlogtest.AppendKeys(l1, e1, keys[45:]); err == nil {
		t.Fatal("appends whose uploads failed were acknowledged")
	}
	faulty.SetDecide(nil)
	// l1 is abandoned, not closed.

	l2 := e.open(tuning)
	e2 := e.Writer(l2)
	at := objlogtest.Placed(t, l2)
	for k, off := range acked {
		if at[k] != off {
			t.Fatalf("acknowledged %+v at %d, the log has it at %d", k, off, at[k])
		}
	}
	if len(at) <= len(acked) {
		t.Fatalf("the log holds %d appends, %d acknowledged: the lost responses stored nothing", len(at), len(acked))
	}
	objlogtest.RetryAll(t, l2, e2, keys, at)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}

	l3 := e.open(tuning)
	defer l3.Close()
	e3 := e.Writer(l3)
	objlogtest.RetryAll(t, l3, e3, keys, objlogtest.Placed(t, l3))
	l1.Close()
}

// A conditional append counts the appends queued and in flight ahead of
// it, and fails with the end elsewhere.
func TestIfEndObject(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	l := e.open(Options{FlushBytes: 200, MaxBatchBytes: 100, FlushInterval: time.Millisecond})
	defer l.Close()
	epoch := e.Writer(l)
	objlogtest.AppendN(t, l, epoch, "a", 3)
	var ps []engine.Pending
	for i := range 5 {
		p, err := l.Append(epoch, objlogtest.Entry("b"), engine.AppendOptions{IfEnd: true, End: uint64(3 + i)})
		if err != nil {
			t.Fatalf("conditional append %d: %v", i, err)
		}
		ps = append(ps, p)
	}
	_, err := l.Append(epoch, objlogtest.Entry("c"), engine.AppendOptions{IfEnd: true, End: 3})
	if me, ok := rpcerr.As[*rpcerr.EndMismatchError](err); !ok || me.End != 8 || !errors.Is(err, rpcerr.ErrConditionFailed) {
		t.Fatalf("IfEnd 3 at end 8: %v, want an EndMismatchError at 8", err)
	}
	for i, p := range ps {
		if off, err := p.Wait(t.Context()); err != nil || off != uint64(3+i) {
			t.Fatalf("conditional append %d: offset %d, %v", i, off, err)
		}
	}
}
