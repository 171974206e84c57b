package objlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
)

// Compaction checks each fragment before it copies it: a segment with a
// damaged fragment keeps its fragments (whose damage reads still report)
// and the error names the fragment, while the other segments are
// compacted.
func TestCompactSkipsDamagedFragment(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"flipped bit", "shorter", "wrong offsets"} {
		t.Run(damage, func(t *testing.T) {
			b := blob.NewMem()
			e := newEnv(t, b)
			l := e.open(Options{FlushBytes: 200, MaxBatchBytes: 100, MaxFragments: 5, CompactBytes: 600})
			defer l.Close()
			epoch := e.Writer(l)
			for i := range 10 {
				objlogtest.AppendN(t, l, epoch, fmt.Sprint("r", i), 20)
			}
			settle(l)
			segs, err := e.Store.Segments(ctx, "l")
			if err != nil {
				t.Fatal(err)
			}
			if len(segs) < 3 || len(segs[1].Objects) < 2 {
				t.Fatalf("%d segments, the second in %d objects; the test wants more", len(segs), len(segs[1].Objects))
			}
			victim := fmt.Sprintf("7/%08d/%s", segs[1].Seq, segs[1].Objects[1].Key)
			data, err := b.Get(ctx, victim)
			if err != nil {
				t.Fatal(err)
			}
			switch damage {
			case "flipped bit":
				data[len(data)/2] ^= 0x10
			case "shorter":
				data = data[:len(data)-1]
			case "wrong offsets":
				// The first fragment's bytes in the second's place: valid
				// batches, at offsets metadata does not put there.
				if data, err = b.Get(ctx, fmt.Sprintf("7/%08d/%s", segs[1].Seq, segs[1].Objects[0].Key)); err != nil {
					t.Fatal(err)
				}
			}
			if err := errors.Join(b.Delete(ctx, victim), b.PutIfAbsent(ctx, victim, data)); err != nil {
				t.Fatal(err)
			}

			n, err := l.Compact(ctx)
			if !errors.Is(err, rpcerr.ErrCorrupt) || !strings.Contains(err.Error(), victim) {
				t.Fatalf("Compact: %v, want ErrCorrupt naming %s", err, victim)
			}
			after, err := e.Store.Segments(ctx, "l")
			if err != nil {
				t.Fatal(err)
			}
			// The last segments are open, or pending.
			sealedBefore := map[uint64]bool{}
			for _, s := range segs {
				sealedBefore[s.Seq] = s.Sealed
			}
			sealed := 0
			for _, s := range after {
				compacted := len(s.Objects) > 0 && strings.HasPrefix(s.Objects[0].Key, "c")
				switch {
				case s.Seq == segs[1].Seq && (compacted || len(s.Objects) != len(segs[1].Objects)):
					t.Fatalf("the damaged segment's objects became %v", s.Objects)
				case s.Seq != segs[1].Seq && sealedBefore[s.Seq] && !compacted:
					t.Fatalf("segment %d was not compacted: %v", s.Seq, s.Objects)
				case s.Seq != segs[1].Seq && compacted:
					sealed++
				}
			}
			if n != sealed {
				t.Fatalf("Compact reported %d segments, %d were compacted", n, sealed)
			}
			if _, err := b.Get(ctx, victim); err != nil {
				t.Fatalf("the damaged fragment is gone: %v", err)
			}
		})
	}
}
