package objlog

import (
	"errors"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
	"github.com/ternwal/tern/internal/record"
)

// A writer whose uploads were stored but whose responses were lost fails
// them, their outcome unknown, and dies; a newer writer, in another
// process, rebuilds the deduplication state from the log: every retry is
// answered with the offset its append has, or appended if it never got
// there. The same after a clean close and a reopen with a newer epoch.
func TestDedupAcrossWriters(t *testing.T) {
	faulty := blob.NewFaulty(blob.NewMem(), nil)
	e := newEnv(t, faulty)
	tuning := Options{FlushBytes: 200, MaxBatchBytes: 100, MaxFragments: 4, RetryTimeout: 50 * time.Millisecond}
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
	l := e.open(Options{FlushBytes: 200, MaxBatchBytes: 100})
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

// After compaction into objects larger than the reach, a reopen reads
// only the end of the newest one, from a batch boundary it finds there:
// the newest appends are deduplicated, and older sequences of the same
// producers are refused rather than appended again.
func TestDedupReachInCompactedObject(t *testing.T) {
	defer func(r int64) { dedupReach = r }(dedupReach)
	dedupReach = 700
	e := newEnv(t, blob.NewMem())
	tuning := Options{FlushBytes: 200, MaxBatchBytes: 100, MaxFragments: 4, CompactBytes: 1 << 20}
	l := e.open(tuning)
	epoch := e.Writer(l)
	keys := objlogtest.Keys(2, 40)
	acked, err := objlogtest.AppendKeys(l, epoch, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(tuning)
	if n, err := l.Compact(t.Context()); err != nil || n == 0 {
		t.Fatalf("Compact: %d, %v", n, err)
	}
	l.Close()
	l = e.open(tuning)
	defer l.Close()
	epoch = e.Writer(l)
	last := keys[len(keys)-1]
	got, err := objlogtest.AppendKeys(l, epoch, []objlogtest.Key{last})
	if err != nil || got[last] != acked[last] {
		t.Fatalf("retry of the newest append: offset %d, %v; want %d", got[last], err, acked[last])
	}
	_, err = l.Append(epoch, keys[0].Entries(), engine.AppendOptions{Producer: keys[0].Producer, Seq: keys[0].Seq})
	if !errors.Is(err, rpcerr.ErrInvalid) {
		t.Fatalf("retry of an append beyond the reach: %v, want ErrInvalid", err)
	}
}

func TestBatchesAfter(t *testing.T) {
	var data []byte
	var bounds []int
	base := uint64(10)
	for i := range 20 {
		bounds = append(bounds, len(data))
		es := objlogtest.Key{Producer: 1, Seq: uint64(i + 1)}.Entries()
		// A payload that looks like a batch's start.
		es[0].Payload = append(es[0].Payload, record.Magic...)
		data = append(data, record.EncodeAppends(base, 1, es, []record.Append{{Producer: 1, Seq: uint64(i + 1), Count: uint32(len(es))}})...)
		base += uint64(len(es))
	}
	for from := range len(data) {
		want := len(data)
		for _, b := range bounds {
			if b >= from {
				want = b
				break
			}
		}
		if got := batchesAfter(data[from:], base); len(got) != len(data)-want {
			t.Fatalf("from %d: %d bytes of batches, want %d", from, len(got), len(data)-want)
		}
	}
	if got := batchesAfter(data[3:], base+1); got != nil {
		t.Fatal("batches that end elsewhere were taken")
	}
}

// A process whose table is loaded loses the log to another writer, which
// appends, and takes it back: the table is read back again, and the other
// writer's appends are deduplicated too.
func TestDedupReloadAfterAnotherWriter(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	tuning := Options{FlushBytes: 200, MaxBatchBytes: 100}
	a := e.open(tuning)
	defer a.Close()
	keys := objlogtest.Keys(2, 20)
	if _, err := objlogtest.AppendKeys(a, e.Writer(a), keys[:20]); err != nil {
		t.Fatal(err)
	}
	b := e.open(tuning)
	ackedB, err := objlogtest.AppendKeys(b, e.Writer(b), keys[20:])
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ea := e.Writer(a)
	answered, err := objlogtest.AppendKeys(a, ea, keys)
	if err != nil {
		t.Fatal(err)
	}
	for k, off := range ackedB {
		if answered[k] != off {
			t.Fatalf("retry of %+v, appended by the other writer at %d, answered %d", k, off, answered[k])
		}
	}
	objlogtest.RetryAll(t, a, ea, keys, objlogtest.Placed(t, a))
}

// A retry whose producer's history the shallow load missed (its appends
// are older than the newest shallowObjects objects) makes the log read
// back deeper, and is answered with the original's offset.
func TestDedupDeepWhenShallowMisses(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	tuning := Options{FlushBytes: 1, MaxBatchBytes: 100}
	a := e.open(tuning)
	old := objlogtest.Keys(1, 20) // producer 1
	at, err := objlogtest.AppendKeys(a, e.Writer(a), old)
	if err != nil {
		t.Fatal(err)
	}
	var later []objlogtest.Key
	for seq := 1; seq <= shallowObjects+20; seq++ {
		later = append(later, objlogtest.Key{Producer: 2, Seq: uint64(seq)})
	}
	if _, err := objlogtest.AppendKeys(a, e.Writer(a), later); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := e.open(tuning)
	defer b.Close()
	epoch := e.Writer(b)
	// Producer 1 answered up to 10, and sends 10 to 20 again.
	for _, k := range old[9:] {
		p, err := b.Append(epoch, k.Entries(), engine.AppendOptions{Producer: k.Producer, Seq: k.Seq, Acked: 10})
		if err != nil {
			t.Fatal(err)
		}
		off, err := p.Wait(t.Context())
		if err != nil || off != at[k] {
			t.Fatalf("retry of %+v: %d, %v; it is in the log at %d", k, off, err, at[k])
		}
	}
	if got := b.Stats().End; got != a.Stats().End {
		t.Fatalf("the retries appended: end %d, was %d", got, a.Stats().End)
	}
}
