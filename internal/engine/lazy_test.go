package engine

import (
	"errors"
	"sync"
	"testing"
)

func TestDedupLoad(t *testing.T) {
	var z DedupLoad
	boom := errors.New("boom")
	if err := z.Ensure(func() error { return boom }); err != boom {
		t.Fatalf("Ensure of a failing load: %v", err)
	}
	var mu sync.Mutex
	loads := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := z.Ensure(func() error { mu.Lock(); loads++; mu.Unlock(); return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if loads != 1 {
		t.Fatalf("%d loads after a failed one, want 1", loads)
	}
	reset := false
	z.Forget(func() { reset = true })
	z.Ensure(func() error { loads++; return nil })
	if !reset || loads != 2 {
		t.Fatalf("after Forget: reset %v, %d loads; want a reset and a second load", reset, loads)
	}
}
