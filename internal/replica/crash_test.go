package replica

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/vfs"
)

// acked is what a store reported before a crash, which must hold after it.
type acked struct {
	mu      sync.Mutex
	sent    map[SegmentID][][]byte // fragments added, by number
	durable map[SegmentID]uint64   // the durable count reported
	fenced  map[SegmentID]uint64   // the epoch a Fence answered
	sealed  map[SegmentID]uint64   // the count a Seal answered
	dropped map[SegmentID]bool     // a Drop answered
	// Calls made, answered or not: a crash may leave their effect.
	sealing  map[SegmentID]uint64
	dropping map[SegmentID]bool
}

func newAcked() *acked {
	return &acked{
		sent:     make(map[SegmentID][][]byte),
		durable:  make(map[SegmentID]uint64),
		fenced:   make(map[SegmentID]uint64),
		sealed:   make(map[SegmentID]uint64),
		dropped:  make(map[SegmentID]bool),
		sealing:  make(map[SegmentID]uint64),
		dropping: make(map[SegmentID]bool),
	}
}

func (a *acked) clone() *acked {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := newAcked()
	for id, f := range a.sent {
		c.sent[id] = append([][]byte(nil), f...)
	}
	maps.Copy(c.durable, a.durable)
	maps.Copy(c.fenced, a.fenced)
	maps.Copy(c.sealed, a.sealed)
	maps.Copy(c.dropped, a.dropped)
	maps.Copy(c.sealing, a.sealing)
	maps.Copy(c.dropping, a.dropping)
	return c
}

// crashWorkload drives s through adds, fences, a seal, a drop and a journal
// written over the dropped one, recording
// in a what s acknowledged, and calling step after each stage. It ignores
// errors: at a crash point, everything fails.
func crashWorkload(s *Store, a *acked, step func()) {
	addAll := func(id SegmentID, epoch, from uint64, frags [][]byte) {
		var wg sync.WaitGroup
		for i, f := range frags {
			n := from + uint64(i)
			wg.Add(1)
			err := s.Add(id, epoch, n, f, FrameSum(n, f), func(err error) {
				defer wg.Done()
				if err == nil {
					a.mu.Lock()
					a.durable[id] = max(a.durable[id], n+1)
					a.mu.Unlock()
				}
			})
			if err != nil {
				wg.Done()
				break
			}
			// Only what the store took: a refused add must leave no trace.
			a.mu.Lock()
			if uint64(len(a.sent[id])) == n {
				a.sent[id] = append(a.sent[id], f)
			}
			a.mu.Unlock()
		}
		wg.Wait()
		step()
	}
	fence := func(id SegmentID, epoch uint64) {
		if _, err := s.Fence(id, epoch); err == nil {
			a.mu.Lock()
			a.fenced[id] = epoch
			a.mu.Unlock()
		}
		step()
	}

	sizes := []int{100, 700, 1500, 3, 513, 2048}
	var fs [][]byte
	for i := range 12 {
		fs = append(fs, frag(i, sizes[i%len(sizes)]))
	}
	addAll(segA, 1, 0, fs[:4])
	addAll(segB, 1, 0, fs[4:9])
	fence(segA, 2)
	addAll(segA, 1, 4, fs[10:12]) // refused: other bytes than those accepted next
	addAll(segA, 2, 4, fs[4:8])
	fence(segC, 7)
	a.mu.Lock()
	a.sealing[segB] = 3
	a.mu.Unlock()
	if err := s.Seal(segB, 3); err == nil {
		a.mu.Lock()
		a.sealed[segB] = 3
		a.mu.Unlock()
	}
	step()
	addAll(segC, 7, 0, fs[8:])
	d := SegmentID{Log: 3, Seq: 1}
	addAll(d, 1, 0, fs[:2])
	a.mu.Lock()
	a.dropping[d] = true
	a.mu.Unlock()
	if err := s.Drop(d); err == nil {
		a.mu.Lock()
		a.dropped[d] = true
		a.mu.Unlock()
	}
	step()
	// A new segment, whose journal is written over d's: shorter, so that
	// d's frames follow its own.
	addAll(SegmentID{Log: 3, Seq: 2}, 1, 0, fs[3:4])
	fence(segB, 4)
	addAll(segA, 2, 8, fs[8:10])
}

// checkRecovered opens fs and checks that everything in a holds.
func checkRecovered(t *testing.T, fs vfs.FS, a *acked, what string) {
	t.Helper()
	s, err := openErr(fs)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer s.Close()
	for id, sent := range a.sent {
		sizes, err := s.List(id)
		if a.dropped[id] {
			if !errors.Is(err, rpcerr.ErrSegmentNotFound) {
				t.Errorf("%s: dropped segment %v: List = %v, %v", what, id, sizes, err)
			}
			continue
		}
		if errors.Is(err, rpcerr.ErrSegmentNotFound) && (a.dropping[id] || a.durable[id] == 0 && a.fenced[id] == 0) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: List %v: %v", what, id, err)
		}
		count := uint64(len(sizes))
		c, sealing := a.sealing[id]
		if count < a.durable[id] && !(sealing && count == c && info(t, s, id).Sealed) {
			t.Errorf("%s: %v recovered %d fragments, %d were durable", what, id, count, a.durable[id])
		}
		if c, ok := a.sealed[id]; ok && count != c {
			t.Errorf("%s: %v sealed at %d recovered %d fragments", what, id, c, count)
		}
		if count > uint64(len(sent)) {
			t.Fatalf("%s: %v recovered %d fragments, %d were sent", what, id, count, len(sent))
		}
		for n := range count {
			got, err := readFragment(s, id, n)
			if err != nil || !bytes.Equal(got, sent[n]) {
				t.Errorf("%s: fragment %d of %v: %v, or other bytes", what, n, id, err)
			}
		}
		if e := info(t, s, id).Epoch; e < a.fenced[id] {
			t.Errorf("%s: %v fenced at %d recovered fenced at %d", what, id, a.fenced[id], e)
		}
		if _, ok := a.sealed[id]; ok && !info(t, s, id).Sealed {
			t.Errorf("%s: sealed %v recovered unsealed", what, id)
		}
	}
}

// TestCrashAfter stops the machine after every number of filesystem
// operations the workload makes, and checks what each crash leaves; again
// with zeros written ahead of every round (300 bytes ahead, a few
// fragments), which a crash may leave after any frame, and a seal cuts.
func TestCrashAfter(t *testing.T) {
	plain := 0
	for _, ahead := range []int64{0, 300} {
		t.Run(fmt.Sprint("zeros ahead ", ahead), func(t *testing.T) {
			zeros := func(o *Options) {
				if ahead > 0 {
					o.ZeroAhead, o.ZeroRound = ahead, 1<<30
				}
			}
			fs := vfs.NewMem()
			s := open(t, fs, zeros)
			crashWorkload(s, newAcked(), func() {})
			if ahead == 0 {
				plain = fs.Ops()
			} else if fs.Ops() <= plain {
				t.Fatalf("the workload made %d filesystem operations with zeros ahead, %d without: no zeros were written", fs.Ops(), plain)
			}
			crashAfter(t, fs.Ops(), zeros)
		})
	}
}

func crashAfter(t *testing.T, total int, zeros func(*Options)) {
	for n := 0; n <= total+5; n++ {
		fs := vfs.NewMem()
		s, err := openErr(fs, zeros)
		if err != nil {
			t.Fatal(err)
		}
		fs.CrashAfter(n)
		a := newAcked()
		crashWorkload(s, a, func() {})
		s.Close()
		for seed := range uint64(3) {
			checkRecovered(t, fs.Crash(rand.New(rand.NewPCG(uint64(n), seed))), a, fmt.Sprintf("crash after %d ops", n))
		}
	}
}

// TestCrashAnytime cuts the power at each stage of the workload, while the
// store keeps running.
func TestCrashAnytime(t *testing.T) {
	for seed := range uint64(20) {
		fs := vfs.NewMem()
		s := open(t, fs)
		a := newAcked()
		rng := rand.New(rand.NewPCG(seed, 1))
		stage := 0
		crashWorkload(s, a, func() {
			stage++
			before := a.clone()
			checkRecovered(t, fs.Crash(rng), before, fmt.Sprintf("crash at stage %d with seed %d", stage, seed))
		})
		s.Close()
	}
}
