package blob

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInjected is the error of a fault that Faulty injects without an error
// of its own, and of every fault that Random injects.
var ErrInjected = errors.New("blob: injected fault")

// Op names a kind of Bucket operation.
type Op string

// The operations of a Bucket that Faulty can fail. Close is never failed.
const (
	OpPut      Op = "put"
	OpGet      Op = "get"
	OpGetRange Op = "getrange"
	OpStat     Op = "stat"
	OpList     Op = "list"
	OpDelete   Op = "delete"
)

// Fault is what Faulty does to one operation. The zero Fault does nothing.
type Fault struct {
	// Err is returned instead of performing the operation.
	Err error
	// Ambiguous performs the operation and then returns Err, or an error
	// wrapping ErrInjected that says the response was lost: the caller
	// sees a failure, but a put has stored its object and a delete has
	// removed it, as when a response is lost on the network.
	Ambiguous bool
	// Delay is waited before anything else; a ctx that ends first ends
	// the operation with ctx's error.
	Delay time.Duration
}

// Faulty is a Bucket that asks a decide function what to do to each
// operation before it passes it to the Bucket it wraps. It is safe for
// concurrent use if the wrapped Bucket is and decide is.
type Faulty struct {
	b      Bucket
	decide atomic.Pointer[func(Op, string) Fault]

	mu     sync.Mutex
	counts map[Op]int
}

// NewFaulty wraps b. decide is called with the operation and its key (the
// prefix for a List); nil injects nothing.
func NewFaulty(b Bucket, decide func(op Op, key string) Fault) *Faulty {
	f := &Faulty{b: b, counts: map[Op]int{}}
	f.SetDecide(decide)
	return f
}

// SetDecide replaces the decide function, for the operations that start
// after it returns. It is safe to call concurrently with operations.
func (f *Faulty) SetDecide(decide func(op Op, key string) Fault) {
	f.decide.Store(&decide)
}

// Counts returns how many operations of each kind were attempted, failed or
// not.
func (f *Faulty) Counts() map[Op]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.counts)
}

// do counts an operation, applies its fault and performs it, or not.
func (f *Faulty) do(ctx context.Context, op Op, key string, perform func() error) error {
	f.mu.Lock()
	f.counts[op]++
	f.mu.Unlock()

	var fault Fault
	if decide := *f.decide.Load(); decide != nil {
		fault = decide(op, key)
	}
	if fault.Delay > 0 {
		t := time.NewTimer(fault.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	switch {
	case fault.Ambiguous:
		perform() // its outcome is what is lost
		if fault.Err != nil {
			return fault.Err
		}
		return fmt.Errorf("%w: the response to %s %s was lost after it was performed", ErrInjected, op, key)
	case fault.Err != nil:
		return fault.Err
	}
	return perform()
}

func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data ...[]byte) error {
	return f.do(ctx, OpPut, key, func() error { return f.b.PutIfAbsent(ctx, key, data...) })
}

func (f *Faulty) Get(ctx context.Context, key string) (data []byte, err error) {
	err = f.do(ctx, OpGet, key, func() error {
		data, err = f.b.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

func (f *Faulty) GetRange(ctx context.Context, key string, off int64, p []byte) (n int, err error) {
	err = f.do(ctx, OpGetRange, key, func() error {
		n, err = f.b.GetRange(ctx, key, off, p)
		return err
	})
	if err != nil && err != io.EOF {
		return 0, err
	}
	return n, err
}

func (f *Faulty) Stat(ctx context.Context, key string) (info Info, err error) {
	err = f.do(ctx, OpStat, key, func() error {
		info, err = f.b.Stat(ctx, key)
		return err
	})
	if err != nil {
		return Info{}, err
	}
	return info, nil
}

func (f *Faulty) List(ctx context.Context, prefix string) (infos []Info, err error) {
	err = f.do(ctx, OpList, prefix, func() error {
		infos, err = f.b.List(ctx, prefix)
		return err
	})
	if err != nil {
		return nil, err
	}
	return infos, nil
}

func (f *Faulty) Delete(ctx context.Context, key string) error {
	return f.do(ctx, OpDelete, key, func() error { return f.b.Delete(ctx, key) })
}

// Close closes the wrapped Bucket, without faults.
func (f *Faulty) Close() error { return f.b.Close() }

// Random returns a decide function for Faulty that fails each operation
// with probability p, with ErrInjected; a share ambiguousShare of the puts
// it fails are ambiguous (the object is stored).
//
// The decisions are a function of seed, the operation, its key and how
// many times that operation was decided for that key before, so a test
// that issues each key's operations in the same order sees the same faults
// for a seed, however its goroutines interleave. It is safe for concurrent
// use.
func Random(seed int64, p float64, ambiguousShare float64) func(Op, string) Fault {
	if !(p >= 0 && p <= 1) || !(ambiguousShare >= 0 && ambiguousShare <= 1) {
		panic(fmt.Sprintf("blob: Random(%d, %v, %v): probabilities must be in [0, 1]", seed, p, ambiguousShare))
	}
	var (
		mu   sync.Mutex
		seen = map[string]uint64{}
	)
	return func(op Op, key string) Fault {
		id := string(op) + "\x00" + key
		mu.Lock()
		n := seen[id]
		seen[id]++
		mu.Unlock()

		h := fnv.New64a()
		h.Write(binary.LittleEndian.AppendUint64([]byte(id), n))
		r := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
		if r.Float64() >= p {
			return Fault{}
		}
		if op == OpPut && r.Float64() < ambiguousShare {
			return Fault{Ambiguous: true}
		}
		return Fault{Err: fmt.Errorf("%w: %s %s", ErrInjected, op, key)}
	}
}
