package wal

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/vfs"
)

// With many producers in a closed loop, rounds are written while an
// earlier round's fdatasync is in flight. Whatever the interleaving: an
// entry acknowledged before a crash is in the log recovered from it, at
// its offset; a failed fdatasync fails its round and every round written
// after it (their offsets are taken again), never acknowledging them; the
// log goes on appending after it; and reopened after a close it holds
// exactly the acknowledged entries. With odd seeds the log is truncated
// behind the producers, so that new segments are created over the files of
// dropped ones and a failed fdatasync rewinds a file written over. From
// seed 4 on, the writer writes zeros ahead of every round, which a failed
// fdatasync's rewind cuts with the batches.
func TestPipelineKeepsThePromise(t *testing.T) {
	for seed := range uint64(8) {
		truncate := seed%2 == 1
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			mem := vfs.NewMem()
			f := &diskFault{err: syscall.EIO, match: func(o vfs.Op, name string) bool {
				// A segment created over a free file keeps the name it was opened with.
				return o == vfs.OpSync && (strings.HasSuffix(name, ".seg") || strings.HasSuffix(name, ".free"))
			}}
			fs := vfs.WithErrors(mem, func(o vfs.Op, name string) error {
				if o == vfs.OpSync {
					time.Sleep(50 * time.Microsecond) // a disk's fdatasync: the next rounds are written meanwhile
				}
				return f.inject(o, name)
			})
			segBytes := int64(16 << 10)
			if truncate {
				segBytes = 2 << 10
			}
			opts := Options{FS: fs, Dir: "/data/log", Epoch: 1, SegmentBytes: segBytes}
			if seed >= 4 {
				opts.ZeroAhead, opts.ZeroRound = 1<<10, 1<<30
			}
			l, err := Open(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()

			const producers, each = 16, 60
			var mu sync.Mutex
			acked := map[uint64]string{} // offset -> payload
			failed := 0
			var asked uint64 // the highest truncation point asked for
			type snapshot struct {
				fs    *vfs.MemFS
				acked map[uint64]string
				floor uint64
			}
			var snaps []snapshot
			rng := rand.New(rand.NewPCG(seed, 33))
			var wg sync.WaitGroup
			for p := range producers {
				wg.Go(func() {
					for i := range each {
						// Producers that straggle append while a flight is in the air.
						time.Sleep(time.Duration((p*7+i)%5) * 30 * time.Microsecond)
						payload := fmt.Sprintf("p%d-%d", p, i)
						pend, err := l.Append(1, []record.Entry{{Payload: []byte(payload)}}, engine.AppendOptions{})
						if err == nil {
							var off uint64
							off, err = pend.Wait(t.Context())
							if err == nil {
								mu.Lock()
								if prev, ok := acked[off]; ok {
									t.Errorf("offset %d acknowledged twice: %q and %q", off, prev, payload)
								}
								acked[off] = payload
								n := len(acked)
								switch {
								case n == producers*each/4:
									f.set(true, 2) // the next two fdatasyncs fail
								case n%97 == 0:
									snaps = append(snaps, snapshot{mem.Crash(rng), maps.Clone(acked), asked})
								}
								cut := truncate && n%11 == 0 && off > 40
								if cut {
									asked = max(asked, off-40)
								}
								mu.Unlock()
								if cut {
									if err := l.Truncate(off - 40); err != nil {
										t.Errorf("Truncate: %v", err)
									}
								}
								continue
							}
						}
						if !errors.Is(err, syscall.EIO) {
							t.Errorf("append %s: %v; want it acknowledged or failed with the fdatasync's EIO", payload, err)
						}
						mu.Lock()
						failed++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			f.mu.Lock()
			hits := f.hits
			f.mu.Unlock()
			if hits == 0 || failed == 0 {
				t.Fatalf("the failing fdatasyncs (%d) failed no append (%d)", hits, failed)
			}
			if len(acked)+failed != producers*each {
				t.Fatalf("%d appends acknowledged and %d failed, of %d", len(acked), failed, producers*each)
			}
			for i, s := range snaps {
				checkHolds(t, s.fs, s.acked, s.floor, fmt.Sprintf("after crash %d", i))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			want := make([]string, len(acked))
			for off, p := range acked {
				if off >= uint64(len(want)) {
					t.Fatalf("offset %d acknowledged, past the %d entries acknowledged: a failed round's offsets were not taken again", off, len(want))
				}
				want[off] = p
			}
			if truncate {
				if asked == 0 {
					t.Fatal("the log was never truncated")
				}
				checkHolds(t, mem, acked, asked, "reopened")
				return
			}
			checkEntries(t, mem, want, "reopened")
		})
	}
}

// checkHolds fails unless the log at /data/log on fs opens, starts at or
// below floor (a truncation point asked for), and holds the acknowledged
// entries from floor on at their offsets, and nothing at an offset it was
// not acknowledged at.
func checkHolds(t *testing.T, fs vfs.FS, acked map[uint64]string, floor uint64, what string) {
	t.Helper()
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/data/log", Epoch: 1})
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer l.Close()
	st := l.Stats()
	if st.Start > floor {
		t.Fatalf("%s: the log starts at %d, above the truncation point %d", what, st.Start, floor)
	}
	r, err := l.NewReader(st.Start, false)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer r.Close()
	at := make(map[string]uint64, len(acked))
	for off, p := range acked {
		at[p] = off
	}
	for i, e := range readN(t, r, int(st.End-st.Start), true) {
		off := st.Start + uint64(i)
		if e.Offset != off {
			t.Fatalf("%s: entry %d read at offset %d, want %d", what, i, e.Offset, off)
		}
		if p, ok := acked[off]; ok && p != string(e.Payload) {
			t.Fatalf("%s: offset %d holds %q, want %q, acknowledged there", what, off, e.Payload, p)
		}
		if was, ok := at[string(e.Payload)]; ok && was != off {
			t.Fatalf("%s: offset %d holds %q, acknowledged at offset %d", what, off, e.Payload, was)
		}
	}
	for off, p := range acked {
		if off >= floor && off >= st.End {
			t.Fatalf("%s: the log ends at %d and lost %q, acknowledged at offset %d", what, st.End, p, off)
		}
	}
}

// A fence while a flight is in the air and rounds are written behind it:
// once Fence returns, an append of the old writer that was not answered by
// then is never acknowledged, and the new writer's appends follow every
// acknowledged one.
func TestFenceSettlesThePipeline(t *testing.T) {
	mem := vfs.NewMem()
	fs := vfs.WithErrors(mem, func(o vfs.Op, _ string) error {
		if o == vfs.OpSync {
			time.Sleep(200 * time.Microsecond)
		}
		return nil
	})
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/data/log", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var pending []engine.Pending
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pend, err := l.Append(1, []record.Entry{{Payload: fmt.Appendf(nil, "p%d-%d", p, i)}}, engine.AppendOptions{})
				if err != nil {
					return // fenced
				}
				mu.Lock()
				pending = append(pending, pend)
				mu.Unlock()
				time.Sleep(time.Duration(i%3) * 50 * time.Microsecond)
			}
		})
	}
	for l.Stats().End < 200 {
		time.Sleep(time.Millisecond)
	}
	if err := l.Fence(t.Context(), 2, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	seen := slices.Clone(pending)
	mu.Unlock()
	answered := make([]bool, len(seen))
	for i, p := range seen {
		answered[i] = isClosed(p.Done())
	}
	close(stop)
	wg.Wait()
	var last uint64
	for i, p := range seen {
		off, err := p.Wait(t.Context())
		switch {
		case err == nil && !answered[i]:
			t.Fatalf("an append of the fenced writer, unanswered when Fence returned, was acknowledged at offset %d", off)
		case err == nil:
			last = max(last, off+1)
		case !errors.Is(err, rpcerr.ErrFenced):
			t.Fatalf("an append of the fenced writer failed with %v, want ErrFenced", err)
		}
	}
	if off := appendWait(t, l, 2, "new writer"); off != last {
		t.Fatalf("the new writer's first append got offset %d, want %d, after the last acknowledged", off, last)
	}
}
