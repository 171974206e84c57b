package objlog

import (
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
)

// Logs that share a CacheBudget keep at most its limit of acknowledged
// fragments in memory together, beside each one's newest; what left
// memory is read from the bucket; a closed log gives its share back.
func TestSharedCache(t *testing.T) {
	const limit, flush, n = 2000, 512, 3000 // each log appends about 20 KB
	shared := NewCacheBudget(limit)
	var logs []*Log
	for range 3 {
		e := newEnv(t, blob.NewMem())
		l := e.open(Options{FlushBytes: flush, MaxBatchBytes: 100, SharedCache: shared})
		logs = append(logs, l)
		epoch := e.Writer(l)
		objlogtest.AppendN(t, l, epoch, "a", n)
		// A fragment holds flush bytes and less than a batch more.
		if used := shared.Used(); used > limit+int64(len(logs))*2*flush {
			t.Fatalf("%d logs keep %d bytes in memory, over the shared %d and a fragment each", len(logs), used, limit)
		}
	}
	if used := shared.Used(); used < flush {
		t.Fatalf("%d bytes counted for the logs' memory, want their newest fragments at least", used)
	}
	for _, l := range logs {
		objlogtest.WantSeq(t, objlogtest.ReadAll(t, l, 0, n), "a", n)
	}
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if used := shared.Used(); used != 0 {
		t.Fatalf("%d bytes counted after every log closed, want 0", used)
	}
}
