package blob_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/blob/blobtest"
)

func TestObserve(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Bucket {
		return blob.Observe(blob.NewMem(), func(blob.Op, time.Duration, error) {})
	})
}

// TestObserveReports checks that every request is reported once, with its
// operation and its error.
func TestObserveReports(t *testing.T) {
	type report struct {
		op  blob.Op
		err error
	}
	var mu sync.Mutex
	var got []report
	b := blob.Observe(blob.NewMem(), func(op blob.Op, d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, report{op, err})
	})
	defer b.Close()
	ctx := context.Background()
	b.PutIfAbsent(ctx, "a", []byte("x"))
	b.PutIfAbsent(ctx, "a", []byte("y"))
	b.Get(ctx, "a")
	b.GetRange(ctx, "a", 0, make([]byte, 1))
	b.Get(ctx, "missing")
	b.Stat(ctx, "a")
	b.List(ctx, "")
	b.Delete(ctx, "a")
	want := []report{{blob.OpPut, nil}, {blob.OpPut, blob.ErrExist}, {blob.OpGet, nil}, {blob.OpGetRange, nil},
		{blob.OpGet, blob.ErrNotFound}, {blob.OpStat, nil}, {blob.OpList, nil}, {blob.OpDelete, nil}}
	if len(got) != len(want) {
		t.Fatalf("reports %v, want %v", got, want)
	}
	for i := range want {
		if got[i].op != want[i].op || !errors.Is(got[i].err, want[i].err) || (want[i].err == nil) != (got[i].err == nil) {
			t.Errorf("report %d: %v, want %v", i, got[i], want[i])
		}
	}
}
