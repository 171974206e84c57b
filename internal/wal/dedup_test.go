package wal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/vfs"
)

// key names an append of a producer.
type key struct{ producer, seq uint64 }

func (k key) entries() []record.Entry {
	es := make([]record.Entry, 1+k.seq%3)
	for j := range es {
		es[j] = record.Entry{Payload: fmt.Appendf(nil, "p%d-s%d-%d-%s", k.producer, k.seq, j, strings.Repeat("x", int(k.seq*37%200)))}
	}
	return es
}

func keyOf(t *testing.T, e engine.Entry) (key, int) {
	t.Helper()
	var k key
	var j int
	if _, err := fmt.Sscanf(string(e.Payload), "p%d-s%d-%d-", &k.producer, &k.seq, &j); err != nil {
		t.Fatalf("offset %d holds %.30q, which no append wrote", e.Offset, e.Payload)
	}
	return k, j
}

// dedupWork appends with producers, reopens the log with a newer writer,
// retries some appends and appends more, and records what was attempted
// and acknowledged. It stops at the first error, as a crash does.
type dedupWork struct {
	attempted []key
	acked     map[key]uint64
}

// appendAll queues the appends of keys together, then waits for them.
func (w *dedupWork) appendAll(t *testing.T, l *Log, epoch uint64, keys []key) bool {
	ps := make([]engine.Pending, len(keys))
	for i, k := range keys {
		w.attempted = append(w.attempted, k)
		p, err := l.Append(epoch, k.entries(), engine.AppendOptions{Producer: k.producer, Seq: k.seq})
		if err != nil {
			return false
		}
		ps[i] = p
	}
	ok := true
	for i, p := range ps {
		off, err := p.Wait(t.Context())
		if err != nil {
			ok = false
			continue
		}
		if was, retried := w.acked[keys[i]]; retried && was != off {
			t.Errorf("retry of %+v acknowledged at %d, the original at %d", keys[i], off, was)
		}
		w.acked[keys[i]] = off
	}
	return ok
}

func (w *dedupWork) run(t *testing.T, fs vfs.FS) {
	w.acked = map[key]uint64{}
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1, SegmentBytes: 1500})
	if err != nil {
		return
	}
	for seq := uint64(1); seq <= 8; seq += 2 {
		if !w.appendAll(t, l, 1, []key{{1, seq}, {2, seq}, {1, seq + 1}, {3, seq}, {2, seq + 1}}) {
			l.Close()
			return
		}
	}
	if l.Close() != nil {
		return
	}
	// A newer writer: retries of acknowledged appends (answered with the
	// original offsets), and new appends.
	if l, err = Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 2, SegmentBytes: 1500}); err != nil {
		return
	}
	defer l.Close()
	for seq := uint64(1); seq <= 4; seq++ {
		if !w.appendAll(t, l, 2, []key{{1, 6 + seq}, {4, seq}, {2, seq + 8}, {3, seq * 2}}) {
			return
		}
	}
}

// check opens the log the crash left and checks that every append is in it
// at most once, every acknowledged one where it was acknowledged; then it
// retries every attempted append: those in the log are answered with their
// offsets, the others appended, and each is then in the log exactly once.
func (w *dedupWork) check(t *testing.T, fs vfs.FS) {
	t.Helper()
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 3, SegmentBytes: 1500})
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer l.Close()
	at := w.offsets(t, l)
	for k, off := range w.acked {
		if got, ok := at[k]; !ok || got != off {
			t.Fatalf("acknowledged %+v at %d; the log has it at %d (%v)", k, off, got, ok)
		}
	}
	for _, k := range w.attempted {
		p, err := l.Append(3, k.entries(), engine.AppendOptions{Producer: k.producer, Seq: k.seq})
		if err != nil {
			t.Fatalf("retry of %+v: %v", k, err)
		}
		off, err := p.Wait(t.Context())
		if err != nil {
			t.Fatalf("retry of %+v: %v", k, err)
		}
		if was, ok := at[k]; ok && off != was {
			t.Fatalf("retry of %+v, in the log at %d, answered %d", k, was, off)
		}
		at[k] = off
	}
	after := w.offsets(t, l)
	for _, k := range w.attempted {
		if after[k] != at[k] {
			t.Fatalf("%+v is at %d, its retry was answered %d", k, after[k], at[k])
		}
	}
}

// offsets reads the log and returns where each append is, failing if one
// is there twice or in part.
func (w *dedupWork) offsets(t *testing.T, l *Log) map[key]uint64 {
	t.Helper()
	at := map[key]uint64{}
	n := int(l.Stats().End)
	if n == 0 {
		return at
	}
	r, err := l.NewReader(0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	es := readN(t, r, n, true)
	for i := 0; i < len(es); {
		k, j := keyOf(t, es[i])
		if _, dup := at[k]; dup || j != 0 {
			t.Fatalf("offset %d holds entry %d of %+v, which is at %d already", es[i].Offset, j, k, at[k])
		}
		at[k] = es[i].Offset
		for j := range k.entries() {
			if i >= len(es) {
				t.Fatalf("%+v is cut short at the end", k)
			}
			if k2, j2 := keyOf(t, es[i]); k2 != k || j2 != j {
				t.Fatalf("offset %d holds entry %d of %+v, want entry %d of %+v", es[i].Offset, j2, k2, j, k)
			}
			i++
		}
	}
	return at
}

// TestDedupAcrossCrash cuts the power after every mutating filesystem
// operation of a workload of producers across a writer change, and checks
// that the recovered log deduplicates every retry.
func TestDedupAcrossCrash(t *testing.T) {
	var ref dedupWork
	mem := vfs.NewMem()
	ref.run(t, mem)
	total := mem.Ops()
	if len(ref.acked) < 30 {
		t.Fatalf("reference run acknowledged %d appends in %d operations; the workload is broken", len(ref.acked), total)
	}
	crashAtEveryPoint(t, total, func() crashWork { return new(dedupWork) })
}

// Producers appending concurrently, each retrying every append once at
// once and once after: every append is in the log once, and each retry is
// answered with its original's offset.
func TestDedupConcurrentProducers(t *testing.T) {
	l, err := Open(t.Context(), Options{FS: vfs.NewMem(), Dir: "/log", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := dedupWork{acked: map[key]uint64{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for producer := uint64(1); producer <= 8; producer++ {
		wg.Go(func() {
			for seq := uint64(1); seq <= 50; seq++ {
				k := key{producer, seq}
				o := engine.AppendOptions{Producer: producer, Seq: seq, Acked: max(seq, 10) - 10}
				p1, err1 := l.Append(1, k.entries(), o)
				p2, err2 := l.Append(1, k.entries(), o)
				if err := errors.Join(err1, err2); err != nil {
					t.Error(err)
					return
				}
				off1, err1 := p1.Wait(t.Context())
				off2, err2 := p2.Wait(t.Context())
				p3, err3 := l.Append(1, k.entries(), o)
				if err := errors.Join(err1, err2, err3); err != nil {
					t.Error(err)
					return
				}
				off3, err := p3.Wait(t.Context())
				if err != nil || off1 != off2 || off1 != off3 {
					t.Errorf("%+v: offsets %d, %d, %d (%v); want one", k, off1, off2, off3, err)
				}
				mu.Lock()
				w.attempted = append(w.attempted, k)
				w.acked[k] = off1
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	at := w.offsets(t, l)
	if len(at) != len(w.attempted) {
		t.Fatalf("%d appends in the log, %d made", len(at), len(w.attempted))
	}
	// Acked let the table forget: an old sequence is refused, not
	// appended again.
	_, err = l.Append(1, key{1, 1}.entries(), engine.AppendOptions{Producer: 1, Seq: 1})
	if !errors.Is(err, rpcerr.ErrInvalid) {
		t.Fatalf("retry of a sequence below Acked: %v, want ErrInvalid", err)
	}
}

// A conditional append succeeds at the end, counting the appends queued
// ahead of it, and fails elsewhere with the end; a failed round moves the
// end back, and the conditional append checked against it fails too.
func TestIfEnd(t *testing.T) {
	l, err := Open(t.Context(), Options{FS: vfs.NewMem(), Dir: "/log", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendWait(t, l, 1, "a")
	p, err := l.Append(1, []record.Entry{{Payload: []byte("b")}, {Payload: []byte("c")}}, engine.AppendOptions{IfEnd: true, End: 1})
	if err != nil {
		t.Fatal(err)
	}
	q, err := l.Append(1, []record.Entry{{Payload: []byte("d")}}, engine.AppendOptions{IfEnd: true, End: 3})
	if err != nil {
		t.Fatalf("IfEnd counting an append queued ahead: %v", err)
	}
	_, err = l.Append(1, []record.Entry{{Payload: []byte("e")}}, engine.AppendOptions{IfEnd: true, End: 3})
	if me, ok := rpcerr.As[*rpcerr.EndMismatchError](err); !ok || me.End != 4 || me.Expected != 3 {
		t.Fatalf("IfEnd 3 at end 4: %v, want an EndMismatchError at end 4", err)
	}
	for want, pp := range map[uint64]engine.Pending{1: p, 3: q} {
		if off, err := pp.Wait(t.Context()); err != nil || off != want {
			t.Fatalf("conditional append: offset %d, %v; want %d", off, err, want)
		}
	}
}

// A conditional append queued behind a round that then fails was checked
// against an end that never came: it fails with the round's error, and the
// plain append queued after it commits at the end the failure left.
func TestIfEndBehindAFailedRound(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	armed := false
	var mu sync.Mutex
	fs := vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, name string) error {
		mu.Lock()
		on := armed && op == vfs.OpWrite && strings.HasSuffix(name, ".seg")
		mu.Unlock()
		if !on {
			return nil
		}
		fail := false
		once.Do(func() {
			close(entered)
			<-release
			fail = true
		})
		if fail {
			return fmt.Errorf("injected: %w", rpcerr.ErrNoSpace)
		}
		return nil
	})
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendWait(t, l, 1, "a")
	mu.Lock()
	armed = true
	mu.Unlock()
	failing, err := l.Append(1, []record.Entry{{Payload: []byte("b")}}, engine.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-entered // the round of "b" is being written
	cond, err := l.Append(1, []record.Entry{{Payload: []byte("c")}}, engine.AppendOptions{IfEnd: true, End: 2})
	if err != nil {
		t.Fatalf("IfEnd at the end predicted with b in flight: %v", err)
	}
	plain, err := l.Append(1, []record.Entry{{Payload: []byte("d")}}, engine.AppendOptions{Producer: 5, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if _, err := failing.Wait(t.Context()); !errors.Is(err, rpcerr.ErrNoSpace) {
		t.Fatalf("the failed round: %v", err)
	}
	if _, err := cond.Wait(t.Context()); !errors.Is(err, rpcerr.ErrNoSpace) {
		t.Fatalf("conditional append behind the failed round: %v, want its error", err)
	}
	if off, err := plain.Wait(t.Context()); err != nil || off != 1 {
		t.Fatalf("plain append behind the failed round: offset %d, %v; want 1", off, err)
	}
	p, err := l.Append(1, []record.Entry{{Payload: []byte("e")}}, engine.AppendOptions{IfEnd: true, End: 2})
	if err != nil {
		t.Fatal(err)
	}
	if off, err := p.Wait(t.Context()); err != nil || off != 2 {
		t.Fatalf("IfEnd at the end after the failure: offset %d, %v; want 2", off, err)
	}
}

// crashWork is a workload on a file system, and the check of what a crash
// during it left.
type crashWork interface {
	run(t *testing.T, fs vfs.FS)
	check(t *testing.T, fs vfs.FS)
}

// crashAtEveryPoint runs a fresh workload once for every one of the total
// operations of its reference run, cutting the power after that operation
// (with 3 seeds for what the crash keeps of unsynced writes; 1 with
// -short), and checks what each crash left.
func crashAtEveryPoint(t *testing.T, total int, fresh func() crashWork) {
	t.Helper()
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	for n := 0; n <= total; n++ {
		for seed := range seeds {
			mem := vfs.NewMem()
			mem.CrashAfter(n)
			w := fresh()
			w.run(t, mem)
			after := mem.Crash(rand.New(rand.NewPCG(uint64(n), uint64(seed))))
			t.Run(fmt.Sprintf("op%d/seed%d", n, seed), func(t *testing.T) { w.check(t, after) })
			if t.Failed() {
				return
			}
		}
	}
}
