package wal

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// diskFault fails the operations it matches with err while it is on, and
// counts them.
type diskFault struct {
	mu    sync.Mutex
	on    bool
	left  int // how many more it fails; < 0: no bound
	match func(op vfs.Op, name string) bool
	err   error
	hits  int
}

func (f *diskFault) inject(op vfs.Op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on || f.left == 0 || !f.match(op, name) {
		return nil
	}
	f.left--
	f.hits++
	return f.err
}

func (f *diskFault) set(on bool, left int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on, f.left = on, left
}

// appendErr appends one entry and waits for its outcome.
func appendErr(t *testing.T, l *Log, payload string) (uint64, error) {
	t.Helper()
	p, err := l.Append(1, []record.Entry{{Payload: []byte(payload)}}, engine.AppendOptions{})
	if err != nil {
		return 0, err
	}
	return p.Wait(t.Context())
}

// checkEntries fails unless the log at dir on fs opens and holds exactly
// want, from offset 0, and then takes an append.
func checkEntries(t *testing.T, fs vfs.FS, want []string, what string) {
	t.Helper()
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/data/log", Epoch: 1})
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer l.Close()
	if end := l.Stats().End; end != uint64(len(want)) {
		t.Fatalf("%s: the log ends at %d, want %d", what, end, len(want))
	}
	if len(want) > 0 {
		r, err := l.NewReader(0, false)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer r.Close()
		for i, e := range readN(t, r, len(want), true) {
			if string(e.Payload) != want[i] {
				t.Fatalf("%s: offset %d holds %q, want %q", what, i, e.Payload, want[i])
			}
		}
	}
	if off := appendWait(t, l, 1, "after"); off != uint64(len(want)) {
		t.Fatalf("%s: append after reopening got offset %d, want %d", what, off, len(want))
	}
}

// A full disk, at every write the committer makes (a batch, its
// fdatasync, and at a segment roll the footer of the old segment, the
// creation of the new one and its header), fails the round's appends with
// rpcerr.ErrNoSpace naming the data directory and the cause, and the Disk
// reports it full; nothing acknowledged is lost, before or after a crash
// right then; and once the disk has room the next append succeeds by
// itself, at the next offset, and the report clears.
func TestDiskFullFailsTheRoundOnly(t *testing.T) {
	const first = "/data/log/" + "00000000000000000000.seg"
	onSegment := func(op vfs.Op) func(vfs.Op, string) bool {
		return func(o vfs.Op, name string) bool { return o == op && strings.HasSuffix(name, ".seg") }
	}
	for _, tc := range []struct {
		name  string
		match func(vfs.Op, string) bool
		err   error
		roll  bool // the faulty append rolls the segment
		times int  // how many operations fail; -1: all while the disk is full
	}{
		{"write", onSegment(vfs.OpWrite), syscall.ENOSPC, false, -1},
		{"write over quota", onSegment(vfs.OpWrite), syscall.EDQUOT, false, -1},
		{"fdatasync", onSegment(vfs.OpSync), syscall.ENOSPC, false, 1},
		{"roll: footer", onSegment(vfs.OpWrite), syscall.ENOSPC, true, -1},
		{"roll: create", onSegment(vfs.OpCreate), syscall.ENOSPC, true, -1},
		{"roll: new header", func(o vfs.Op, name string) bool {
			return o == vfs.OpWrite && strings.HasSuffix(name, ".seg") && name != first
		}, syscall.ENOSPC, true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			f := &diskFault{match: tc.match, err: tc.err}
			fs := vfs.WithErrors(mem, f.inject)
			now := time.Unix(1e9, 0)
			disk := NewDisk(fs, "/data", -1, nil)
			l, err := Open(t.Context(), Options{FS: fs, Dir: "/data/log", Epoch: 1, Disk: disk,
				SegmentAge: time.Hour, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var acked []string
			for i := range 5 {
				p := fmt.Sprintf("entry %d", i)
				appendWait(t, l, 1, p)
				acked = append(acked, p)
			}
			if tc.roll {
				now = now.Add(2 * time.Hour) // the next round rolls first
			}
			f.set(true, tc.times)
			for range 3 {
				_, err := appendErr(t, l, "refused")
				if !errors.Is(err, rpcerr.ErrNoSpace) || !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "/data") {
					t.Fatalf("append on a full disk: %v; want ErrNoSpace naming /data and saying %v", err, tc.err)
				}
				if full := disk.Full(); !strings.Contains(full, "/data") {
					t.Fatalf("Full on a full disk: %q, want it to name /data", full)
				}
				if tc.times > 0 {
					break
				}
			}
			if f.hits == 0 {
				t.Fatal("the fault was never injected")
			}
			crashed := mem.Crash(rand.New(rand.NewPCG(7, 8)))
			f.set(false, 0)
			off, err := appendErr(t, l, "after")
			if err != nil || off != uint64(len(acked)) {
				t.Fatalf("append once the disk has room: offset %d, %v; want offset %d", off, err, len(acked))
			}
			acked = append(acked, "after")
			if full := disk.Full(); full != "" {
				t.Fatalf("Full after a successful append: %q", full)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkEntries(t, crashed, acked[:len(acked)-1], "after a crash on the full disk")
			checkEntries(t, mem, acked, "reopened")
		})
	}
}

// A Disk with a reserve refuses, before anything is written, a round that
// would leave less free space than the reserve, and reports itself full;
// once space is freed it reports room again by itself, and appends go on.
func TestDiskReserve(t *testing.T) {
	mem := vfs.NewMem()
	const reserve = 64 << 10
	capacity := int64(reserve + 20<<10)
	used := func() int64 {
		var n int64
		names, _ := mem.List("/data/log")
		for _, name := range names {
			if fi, err := mem.Stat("/data/log/" + name); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	var mu sync.Mutex
	clock := time.Unix(1e9, 0)
	disk := NewDisk(mem, "/data", reserve, nil)
	disk.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	disk.space = func() (vfs.Space, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return vfs.Space{Free: capacity - used(), Total: capacity}, true, nil
	}
	l, err := Open(t.Context(), Options{FS: mem, Dir: "/data/log", Epoch: 1, Disk: disk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	payload := strings.Repeat("x", 1000)
	var acked []string
	var refused error
	for i := range 100 {
		p := fmt.Sprintf("%03d%s", i, payload)
		if _, err := appendErr(t, l, p); err != nil {
			refused = err
			break
		}
		acked = append(acked, p)
	}
	if !errors.Is(refused, rpcerr.ErrNoSpace) || !strings.Contains(refused.Error(), "/data") || !strings.Contains(refused.Error(), "--disk-reserve") {
		t.Fatalf("appends into the reserve: %v; want ErrNoSpace naming /data and --disk-reserve", refused)
	}
	if len(acked) < 10 || capacity-used() < reserve {
		t.Fatalf("%d appends taken, %d bytes free; want about 20 taken and the reserve of %d kept", len(acked), capacity-used(), reserve)
	}
	size := used()
	if _, err := appendErr(t, l, "refused too"+payload); !errors.Is(err, rpcerr.ErrNoSpace) {
		t.Fatalf("second append into the reserve: %v, want ErrNoSpace", err)
	}
	if used() != size {
		t.Fatalf("a refused append wrote %d bytes", used()-size)
	}
	if full := disk.Full(); full != "/data" {
		t.Fatalf("Full while the reserve is reached: %q", full)
	}
	mu.Lock()
	capacity += 10 << 20 // space was freed
	clock = clock.Add(time.Second)
	mu.Unlock()
	if full := disk.Full(); full != "" {
		t.Fatalf("Full once space was freed: %q, want empty", full)
	}
	if off, err := appendErr(t, l, "after"); err != nil || off != uint64(len(acked)) {
		t.Fatalf("append once space was freed: offset %d, %v; want %d", off, err, len(acked))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, mem, append(acked, "after"), "reopened")
}
