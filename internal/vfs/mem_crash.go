package vfs

import (
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
)

// ErrCrashed is wrapped by every error a MemFS returns once the crash point
// set by CrashAfter has been reached.
var ErrCrashed = errors.New("vfs: simulated machine crash")

// Ops returns the number of mutating operations (Create, Write, Sync,
// Truncate, Remove, RemoveAll, Rename, SyncDir) called so far, whether or not
// they succeeded. Calls refused at the crash point set by CrashAfter do not
// count.
func (fs *MemFS) Ops() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.ops
}

// CrashAfter lets n more mutating operations (see Ops) take effect; from then
// on every operation, reads and Close included, fails with ErrCrashed and
// changes nothing, as if the machine had died. Crash still works and shows
// what would survive. It panics if n is negative.
func (fs *MemFS) CrashAfter(n int) {
	if n < 0 {
		panic("vfs: CrashAfter with negative n")
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.crashAt = fs.ops + n
}

// Crash returns a new MemFS holding what a power loss at this moment could
// leave, drawing the choices the crash model allows from rng. The receiver is
// unchanged. The new MemFS has no locks held and no crash point set; its
// files and directories are all synced and durable.
//
// What survives is what the durable namespaces reach from "/" and ".": a
// directory whose creation its parent's SyncDir has not covered is gone, with
// everything under it. Each file in a directory's durable namespace gets its content as of its last
// Sync, followed by a random number of its unsynced writes and truncates in
// order. If the next one is a write, it may be torn: its bytes up to a random
// sector boundary (counted in file positions) survive, and with probability
// 1/2 the rest of that sector within the write's range holds random bytes.
// Names linked to the same file get the same content.
func (fs *MemFS) Crash(rng *rand.Rand) *MemFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	after := NewMem()
	survivors := make(map[*memNode]*memNode)
	// In sorted order, so that a seed always gives the same result.
	var walk func(path string, d *memDir) *memDir
	walk = func(path string, d *memDir) *memDir {
		nd := newMemDir()
		after.dirs[path] = nd
		for _, name := range slices.Sorted(maps.Keys(d.durable)) {
			n := d.durable[name]
			s, ok := survivors[n]
			if !ok {
				c := n.crash(rng)
				s = &memNode{data: c, durable: c}
				survivors[n] = s
			}
			nd.files[name] = s
			nd.durable[name] = s
		}
		for _, name := range slices.Sorted(maps.Keys(d.durableDirs)) {
			sub := walk(filepath.Join(path, name), d.durableDirs[name])
			nd.subdirs[name] = sub
			nd.durableDirs[name] = sub
		}
		return nd
	}
	walk(".", fs.dirs["."])
	walk(string(filepath.Separator), fs.dirs[string(filepath.Separator)])
	return after
}

func (n *memNode) crash(rng *rand.Rand) []byte {
	c := slices.Clone(n.durable)
	kept := rng.IntN(len(n.pending) + 1)
	for _, op := range n.pending[:kept] {
		c = op.apply(c)
	}
	if kept == len(n.pending) || n.pending[kept].truncate {
		return c
	}
	w := n.pending[kept]
	end := w.off + int64(len(w.data))
	// Tear points: the write's start, then each sector boundary inside it.
	first := (w.off/SectorBytes + 1) * SectorBytes
	points := int64(1)
	if first < end {
		points += (end-1-first)/SectorBytes + 1
	}
	cut := w.off
	if k := rng.Int64N(points); k > 0 {
		cut = first + (k-1)*SectorBytes
	}
	c = writeAt(c, w.off, w.data[:cut-w.off])
	if rng.IntN(2) == 0 {
		garbage := make([]byte, min((cut/SectorBytes+1)*SectorBytes, end)-cut)
		for i := range garbage {
			garbage[i] = byte(rng.Uint32())
		}
		c = writeAt(c, cut, garbage)
	}
	return c
}

// apply changes b, which must not share its array with anything else.
func (op memOp) apply(b []byte) []byte {
	if op.truncate {
		return resize(b, op.off)
	}
	return writeAt(b, op.off, op.data)
}

func writeAt(b []byte, off int64, p []byte) []byte {
	if end := off + int64(len(p)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
}

func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size:size]
	}
	return append(b, make([]byte, size-int64(len(b)))...)
}

// enter starts an operation, with fs.mu held: it fails once the crash point
// is reached, and otherwise counts a mutating operation towards it.
func (fs *MemFS) enter(op, name string, mutating bool) error {
	if fs.crashAt >= 0 && fs.ops >= fs.crashAt {
		return &os.PathError{Op: op, Path: name, Err: ErrCrashed}
	}
	if mutating {
		fs.ops++
	}
	return nil
}
