package blob_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/blob/blobtest"
)

// A Faulty that injects nothing is a Bucket like the one it wraps.
func TestFaultyNoFaults(t *testing.T) {
	t.Run("nil", func(t *testing.T) {
		blobtest.Run(t, func(t *testing.T) blob.Bucket { return blob.NewFaulty(blob.NewMem(), nil) })
	})
	t.Run("zero", func(t *testing.T) {
		none := func(blob.Op, string) blob.Fault { return blob.Fault{} }
		blobtest.Run(t, func(t *testing.T) blob.Bucket { return blob.NewFaulty(blob.NewMem(), none) })
	})
}

// An injected error is returned instead of performing the operation.
func TestFaultyErr(t *testing.T) {
	ctx := t.Context()
	mem := blob.NewMem()
	put(t, mem, "k", "old")
	boom := errors.New("boom")
	f := blob.NewFaulty(mem, func(blob.Op, string) blob.Fault { return blob.Fault{Err: boom} })
	check := func(what string, err error) {
		t.Helper()
		if err != boom {
			t.Errorf("%s: err = %v, want the injected error", what, err)
		}
	}
	check("PutIfAbsent", f.PutIfAbsent(ctx, "new", []byte("x")))
	data, err := f.Get(ctx, "k")
	check("Get", err)
	if data != nil {
		t.Errorf("Get returned %q with its error", data)
	}
	n, err := f.GetRange(ctx, "k", 0, make([]byte, 2))
	check("GetRange", err)
	if n != 0 {
		t.Errorf("GetRange returned %d with its error", n)
	}
	_, err = f.Stat(ctx, "k")
	check("Stat", err)
	_, err = f.List(ctx, "")
	check("List", err)
	check("Delete", f.Delete(ctx, "k"))

	// Nothing was performed.
	if _, err := mem.Stat(ctx, "new"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("a failed put stored its object: Stat err = %v", err)
	}
	if got, err := mem.Get(ctx, "k"); err != nil || string(got) != "old" {
		t.Errorf("a failed delete removed the object: Get = %q, %v", got, err)
	}
}

// An ambiguous put fails, but stores the object; retrying it then fails
// with ErrExist.
func TestFaultyAmbiguous(t *testing.T) {
	ctx := t.Context()
	mem := blob.NewMem()
	lost := errors.New("connection reset")
	f := blob.NewFaulty(mem, func(op blob.Op, key string) blob.Fault {
		switch key {
		case "default":
			return blob.Fault{Ambiguous: true}
		case "own":
			return blob.Fault{Ambiguous: true, Err: lost}
		}
		return blob.Fault{}
	})
	err := f.PutIfAbsent(ctx, "default", []byte("a"))
	if !errors.Is(err, blob.ErrInjected) {
		t.Errorf("ambiguous put: err = %v, want ErrInjected", err)
	}
	if err := f.PutIfAbsent(ctx, "own", []byte("b")); err != lost {
		t.Errorf("ambiguous put with an error: err = %v, want it", err)
	}
	for key, want := range map[string]string{"default": "a", "own": "b"} {
		if got, err := mem.Get(ctx, key); err != nil || string(got) != want {
			t.Errorf("after an ambiguous put, Get(%q) = %q, %v, want %q", key, got, err, want)
		}
	}
	f.SetDecide(nil)
	if err := f.PutIfAbsent(ctx, "default", []byte("a")); !errors.Is(err, blob.ErrExist) {
		t.Errorf("retry of an ambiguous put: err = %v, want ErrExist", err)
	}
}

// A delayed operation waits, and ends early with its context.
func TestFaultyDelay(t *testing.T) {
	mem := blob.NewMem()
	f := blob.NewFaulty(mem, func(op blob.Op, key string) blob.Fault {
		if key == "slow" {
			return blob.Fault{Delay: time.Hour}
		}
		return blob.Fault{Delay: time.Millisecond}
	})
	put(t, f, "fast", "x") // waits a millisecond
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(10*time.Millisecond, cancel)
	if err := f.PutIfAbsent(ctx, "slow", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("put delayed an hour, canceled: err = %v, want context.Canceled", err)
	}
	if _, err := mem.Stat(t.Context(), "slow"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a put canceled in its delay stored its object: Stat err = %v", err)
	}
}

func TestFaultyCounts(t *testing.T) {
	ctx := t.Context()
	f := blob.NewFaulty(blob.NewMem(), func(op blob.Op, key string) blob.Fault {
		if op == blob.OpGet {
			return blob.Fault{Err: blob.ErrInjected}
		}
		return blob.Fault{}
	})
	put(t, f, "a", "x")
	f.PutIfAbsent(ctx, "a", nil)
	f.Get(ctx, "a")
	f.Get(ctx, "a")
	f.Get(ctx, "a")
	f.GetRange(ctx, "a", 0, make([]byte, 1))
	f.Stat(ctx, "a")
	f.List(ctx, "")
	f.Delete(ctx, "a")
	f.Close()
	want := map[blob.Op]int{blob.OpPut: 2, blob.OpGet: 3, blob.OpGetRange: 1, blob.OpStat: 1, blob.OpList: 1, blob.OpDelete: 1}
	got := f.Counts()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Counts = %v, want %v", got, want)
	}
	got[blob.OpPut] = 100
	if f.Counts()[blob.OpPut] != 2 {
		t.Errorf("changing the map Counts returned changed the counts")
	}
}

// GetRange passes io.EOF through: a short read is not a fault.
func TestFaultyGetRangeEOF(t *testing.T) {
	f := blob.NewFaulty(blob.NewMem(), nil)
	put(t, f, "a", "abc")
	p := make([]byte, 5)
	if n, err := f.GetRange(t.Context(), "a", 1, p); n != 2 || err != io.EOF || string(p[:n]) != "bc" {
		t.Errorf("GetRange = %d, %v, %q, want 2, io.EOF, \"bc\"", n, err, p[:n])
	}
}

// SetDecide may be called while operations run; the race detector checks.
func TestFaultySetDecideConcurrent(t *testing.T) {
	ctx := t.Context()
	f := blob.NewFaulty(blob.NewMem(), nil)
	fail := func(blob.Op, string) blob.Fault { return blob.Fault{Err: blob.ErrInjected} }
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				err := f.PutIfAbsent(ctx, fmt.Sprintf("%d/%d", g, i), nil)
				if err != nil && !errors.Is(err, blob.ErrInjected) {
					t.Errorf("PutIfAbsent: %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			if i%2 == 0 {
				f.SetDecide(fail)
			} else {
				f.SetDecide(nil)
			}
		}
	})
	wg.Wait()
	if n := f.Counts()[blob.OpPut]; n != 800 {
		t.Errorf("Counts()[put] = %d, want 800", n)
	}
}

// Random's faults depend only on the seed and each key's sequence of
// operations, not on how calls for different keys interleave.
func TestRandomDeterministic(t *testing.T) {
	type call struct {
		op  blob.Op
		key string
	}
	var calls []call
	for i := range 500 {
		for _, op := range []blob.Op{blob.OpPut, blob.OpGet, blob.OpDelete} {
			calls = append(calls, call{op, fmt.Sprintf("k%d", i%50)})
		}
	}
	decideAll := func(seed int64, order []call) map[string]blob.Fault {
		decide := blob.Random(seed, 0.3, 0.5)
		seen := map[call]int{}
		faults := map[string]blob.Fault{}
		for _, c := range order {
			f := decide(c.op, c.key)
			if f.Err != nil {
				f.Err = errors.New(f.Err.Error()) // compare by message
			}
			faults[fmt.Sprintf("%s %s #%d", c.op, c.key, seen[c])] = f
			seen[c]++
		}
		return faults
	}
	a := decideAll(1, calls)
	// The same calls, with different keys' calls interleaved differently.
	var shuffled []call
	for k := 49; k >= 0; k-- {
		for _, c := range calls {
			if c.key == fmt.Sprintf("k%d", k) {
				shuffled = append(shuffled, c)
			}
		}
	}
	b := decideAll(1, shuffled)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("Random(1) decided differently for a different interleaving of keys")
	}
	if c := decideAll(2, calls); fmt.Sprint(a) == fmt.Sprint(c) {
		t.Errorf("Random(1) and Random(2) decided the same")
	}
}

// Random fails about a share p of operations, and makes about a share
// ambiguousShare of the puts it fails ambiguous, and no other operation.
func TestRandomRates(t *testing.T) {
	const n = 20000
	decide := blob.Random(7, 0.25, 0.4)
	failed := map[blob.Op]int{}
	ambiguous := map[blob.Op]int{}
	for i := range n {
		for _, op := range []blob.Op{blob.OpPut, blob.OpGet} {
			f := decide(op, fmt.Sprint(i))
			switch {
			case f.Ambiguous:
				ambiguous[op]++
				failed[op]++
			case f.Err != nil:
				if !errors.Is(f.Err, blob.ErrInjected) {
					t.Fatalf("Random injected %v, want ErrInjected", f.Err)
				}
				failed[op]++
			}
			if f.Delay != 0 {
				t.Fatalf("Random injected a delay")
			}
		}
	}
	near := func(got int, want float64) bool { return math.Abs(float64(got)-want) < 0.05*want }
	for _, op := range []blob.Op{blob.OpPut, blob.OpGet} {
		if !near(failed[op], 0.25*n) {
			t.Errorf("Random(7, 0.25, 0.4) failed %d of %d %ss, want about %d", failed[op], n, op, n/4)
		}
	}
	if !near(ambiguous[blob.OpPut], 0.4*float64(failed[blob.OpPut])) {
		t.Errorf("%d of %d failed puts were ambiguous, want about 40%%", ambiguous[blob.OpPut], failed[blob.OpPut])
	}
	if ambiguous[blob.OpGet] != 0 {
		t.Errorf("Random made %d gets ambiguous", ambiguous[blob.OpGet])
	}
	for _, p := range []float64{0, 1} {
		decide := blob.Random(1, p, 1)
		for i := range 100 {
			if failed := decide(blob.OpGet, fmt.Sprint(i)).Err != nil; failed != (p == 1) {
				t.Fatalf("Random(1, %v, 1) failed = %v", p, failed)
			}
		}
	}
}
