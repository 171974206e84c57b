package tern

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/blob"
)

// TestObserverBucket checks the results an Observer is told of object
// requests: answers (not found, exists, a short ranged read) are not
// failures.
func TestObserverBucket(t *testing.T) {
	var got []string
	o := Observer{Object: func(op, result string, d time.Duration) { got = append(got, op+" "+result) }}
	b := o.Bucket(blob.NewMem())
	defer b.Close()
	ctx := context.Background()
	b.PutIfAbsent(ctx, "a", []byte("x"))
	b.PutIfAbsent(ctx, "a", []byte("x"))
	b.GetRange(ctx, "a", 0, make([]byte, 2))
	b.Get(ctx, "b")
	b.Get(ctx, "..")
	want := []string{"put ok", "put exists", "getrange ok", "get not_found", "get error"}
	if !slices.Equal(got, want) {
		t.Fatalf("told %q, want %q", got, want)
	}
	if (Observer{}).Bucket(nil) != nil {
		t.Fatal("the zero Observer wrapped a nil bucket")
	}
}
