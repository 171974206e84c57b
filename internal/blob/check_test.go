package blob_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ternwal/tern/internal/blob"
)

func TestCheckConditional(t *testing.T) {
	for name, b := range map[string]blob.Bucket{
		"Mem": blob.NewMem(),
		"Dir": openDir(t, t.TempDir()),
	} {
		t.Run(name, func(t *testing.T) { checkConditional(t, b) })
	}
}

// checkConditional runs CheckConditional on b, which must pass, and checks
// that it leaves no probe behind.
func checkConditional(t *testing.T, b blob.Bucket) {
	t.Helper()
	if err := blob.CheckConditional(t.Context(), b); err != nil {
		t.Fatalf("CheckConditional: %v", err)
	}
	if infos, err := b.List(t.Context(), "_tern/"); err != nil || len(infos) != 0 {
		t.Fatalf("CheckConditional left %v, %v", infos, err)
	}
}

// overwriting is a store that ignores If-None-Match: its PutIfAbsent
// replaces the object.
type overwriting struct{ *blob.Mem }

func (o overwriting) PutIfAbsent(ctx context.Context, key string, data ...[]byte) error {
	if err := o.Mem.Delete(ctx, key); err != nil {
		return err
	}
	return o.Mem.PutIfAbsent(ctx, key, data...)
}

func TestCheckConditionalRefuses(t *testing.T) {
	b := overwriting{blob.NewMem()}
	err := blob.CheckConditional(t.Context(), b)
	if err == nil {
		t.Fatal("CheckConditional passed a store that overwrites")
	}
	for _, want := range []string{"If-None-Match", "cannot fence", "refuses to run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CheckConditional: %v; want it to say %q", err, want)
		}
	}
	if infos, err := b.List(t.Context(), ""); err != nil || len(infos) != 0 {
		t.Errorf("CheckConditional left %v, %v", infos, err)
	}
}
