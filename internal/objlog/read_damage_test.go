package objlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
	"github.com/ternwal/tern/internal/record"
)

// A reader of the open segment a crash left takes each fragment's end from
// the next fragment's first header, whose CRC nobody has checked. Damage to
// that header's base offset that keeps the fragments in order makes the
// fragment before it seem to hold a batch past its end: the error must name
// the damaged fragment, the one an operator has to restore, not the intact
// one before it.
func TestReadNamesFragmentWithDamagedBase(t *testing.T) {
	ctx := context.Background()
	for _, delta := range []int64{-1, +1} {
		t.Run(fmt.Sprintf("base%+d", delta), func(t *testing.T) {
			b := blob.NewMem()
			e := newEnv(t, b)
			l1 := e.open(Options{FlushBytes: 300, MaxBatchBytes: 100})
			defer l1.Close()
			objlogtest.AppendN(t, l1, e.Writer(l1), "c", 100)
			// l1 is abandoned as a crash would leave it: its segment open.

			segs := e.Segments()
			if seg := segs[len(segs)-1]; seg.Sealed {
				t.Fatalf("the last segment %d is sealed; the test wants it open", seg.Seq)
			}
			prefix := fmt.Sprintf("7/%08d/", segs[len(segs)-1].Seq)
			infos, err := b.List(ctx, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) < 4 {
				t.Fatalf("%d fragments; the test wants more", len(infos))
			}
			prev, victim := prefix+fragKey(1), prefix+fragKey(2)
			first := func(key string) record.Header {
				data, err := b.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				h, err := record.ParseHeader(data)
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			if p, v := first(prev), first(victim); v.BaseOffset-p.BaseOffset < 2 {
				t.Fatalf("fragment 1 starts at %d, fragment 2 at %d; the test wants 2 entries or more in 1", p.BaseOffset, v.BaseOffset)
			}
			data, err := b.Get(ctx, victim)
			if err != nil {
				t.Fatal(err)
			}
			base := binary.LittleEndian.Uint64(data[16:])
			binary.LittleEndian.PutUint64(data[16:], uint64(int64(base)+delta)) // the CRC is left as it was
			if err := errors.Join(b.Delete(ctx, victim), b.PutIfAbsent(ctx, victim, data)); err != nil {
				t.Fatal(err)
			}

			l2 := e.open(Options{})
			defer l2.Close()
			for _, from := range []uint64{0, first(prev).BaseOffset, base - 1} {
				err := readErr(ctx, l2, from, 100)
				if ce, ok := rpcerr.As[*rpcerr.CorruptError](err); !ok || !errors.Is(err, rpcerr.ErrCorrupt) || ce.Path != victim {
					t.Errorf("read from %d: %v, want a *CorruptError naming %s", from, err, victim)
				}
			}
		})
	}
}

// readErr reads l from from to to and returns the error that stops it, or
// nil if none does.
func readErr(ctx context.Context, l *Log, from, to uint64) error {
	r, err := l.NewReader(from, false)
	if err != nil {
		return err
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for next := from; next < to; {
		es, err := r.NextBatch(ctx, 100, 0)
		if err != nil {
			return err
		}
		next += uint64(len(es))
	}
	return nil
}
