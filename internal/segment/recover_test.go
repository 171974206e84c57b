package segment_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// recoverOpen recovers the segment at path, which must come back open with
// the Info of a segment holding bs, and checks the file holds exactly the
// bytes want.
func recoverOpen(t *testing.T, fs vfs.FS, path string, bs []batch, want []byte) *segment.Writer {
	t.Helper()
	info, w, err := segment.Recover(fs, path, 0)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if w == nil {
		t.Fatalf("Recover returned no writer, Info %+v", info)
	}
	base, _ := segment.ParseFileName(path)
	checkInfo(t, "Recover", info, expectedInfo(path, base, bs))
	checkInfo(t, "Writer.Info", w.Info(), info)
	if got := readFile(t, fs, path); !bytes.Equal(got, want) {
		t.Fatalf("after Recover the file has %d bytes, want %d (the first %d bytes as they were)", len(got), len(want), len(want))
	}
	return w
}

// checkCorrupt checks that err is a *rpcerr.CorruptError for path at pos.
func checkCorrupt(t *testing.T, err error, path string, pos int64) {
	t.Helper()
	ce, ok := errors.AsType[*rpcerr.CorruptError](err)
	if !ok || !errors.Is(err, rpcerr.ErrCorrupt) || errors.Is(err, segment.ErrUnfinished) {
		t.Fatalf("got %v, want a *rpcerr.CorruptError", err)
	}
	if ce.Path != path || ce.Pos != pos {
		t.Fatalf("rpcerr.CorruptError for %s at byte %d, want %s at byte %d: %v", ce.Path, ce.Pos, path, pos, err)
	}
}

func TestRecoverOpen(t *testing.T) {
	for _, tf := range filesystems(t) {
		t.Run(tf.name, func(t *testing.T) {
			const base = 300
			rng := rand.New(rand.NewPCG(11, 11))
			bs := makeBatches(rng, base, 120, 3000)
			path := writeOpen(t, tf.fs, tf.dir, base, bs)
			full := readFile(t, tf.fs, path)
			w := recoverOpen(t, tf.fs, path, bs, full)
			if len(w.Info().Index) < 3 {
				t.Fatal("the test needs more data")
			}

			more := makeBatches(rng, w.Info().Next, 60, 3000)
			appendAll(t, w, more)
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			all := append(slices.Clone(bs), more...)
			checkInfo(t, "after appends", w.Info(), expectedInfo(path, base, all))
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			w = recoverOpen(t, tf.fs, path, all, readFile(t, tf.fs, path))
			sealed, err := w.Seal()
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "Seal", sealed, sealedInfo(path, base, all))
			got, err := segment.ReadSealed(tf.fs, path)
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "ReadSealed", got, sealed)
			checkBatches(t, scanAll(t, tf.fs, path, segment.HeaderBytes, got.End), all)
		})
	}
}

func TestRecoverEmpty(t *testing.T) {
	fs := vfs.NewMem()
	path := writeOpen(t, fs, "/", 9, nil)
	w := recoverOpen(t, fs, path, nil, readFile(t, fs, path))
	bs := makeBatches(rand.New(rand.NewPCG(12, 12)), 9, 3, 50)
	appendAll(t, w, bs)
	sealed, err := w.Seal()
	if err != nil {
		t.Fatal(err)
	}
	checkInfo(t, "Seal", sealed, sealedInfo(path, 9, bs))

	// A sealed empty segment.
	info := writeSealed(t, fs, "/", 100, nil)
	got, w, err := segment.Recover(fs, info.Path, 0)
	if err != nil || w != nil {
		t.Fatalf("Recover of a sealed empty segment: writer %v, %v", w, err)
	}
	checkInfo(t, "Recover", got, info)
}

// TestRecoverTornTail cuts the file at every position after the header and
// checks that recovery keeps exactly the whole batches before the cut, and
// that the writer it returns continues from there.
func TestRecoverTornTail(t *testing.T) {
	const base = 50
	rng := rand.New(rand.NewPCG(13, 13))
	bs := makeBatches(rng, base, 5, 150)
	full := segmentBytes(t, base, bs, false)
	pos, end := positions(bs)
	if int64(len(full)) != end {
		t.Fatalf("segment of %d bytes, want %d", len(full), end)
	}
	check := func(t *testing.T, fs vfs.FS, path string, cut int64) {
		k := 0 // batches that end by the cut
		for k < len(bs) && pos[k]+int64(len(bs[k].data)) <= cut {
			k++
		}
		_, keep := positions(bs[:k])
		w := recoverOpen(t, fs, path, bs[:k], full[:keep])
		appendAll(t, w, bs[k:])
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		w = recoverOpen(t, fs, path, bs, full)
		w.Close()
	}
	for cut := int64(segment.HeaderBytes); cut <= end; cut++ {
		fs, path := memFile(t, base, full[:cut])
		check(t, fs, path, cut)
	}
	last := pos[len(pos)-1]
	for _, cut := range []int64{last, last + 1, last + 47, last + 48, last + 49, end - 1} {
		dir := t.TempDir()
		path := filepath.Join(dir, segment.FileName(base))
		writeFile(t, vfs.OS, path, full[:cut])
		check(t, vfs.OS, path, cut)
	}
}

// TestRecoverGarbageTail checks that bytes after the last batch that hold no
// valid batch are truncated: what a crash can leave after a torn write.
func TestRecoverGarbageTail(t *testing.T) {
	const base = 1 << 40
	rng := rand.New(rand.NewPCG(14, 14))
	bs := makeBatches(rng, base, 4, 200)
	full := segmentBytes(t, base, bs, false)
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	next := makeBatches(rng, bs[len(bs)-1].h.NextOffset(), 1, 600)[0].data
	badCRC := slices.Clone(next)
	badCRC[len(badCRC)-1] ^= 1
	tails := map[string][]byte{
		"zero byte":            {0},
		"zeros":                make([]byte, 100),
		"zero sector":          make([]byte, vfs.SectorBytes),
		"zero sectors":         make([]byte, 3*vfs.SectorBytes+7),
		"random byte":          random(1),
		"random 47":            random(47),
		"random 48":            random(48),
		"random sectors":       random(5000),
		"magic then random":    append([]byte("TRNB"), random(300)...),
		"header alone":         next[:48],
		"torn batch":           next[:len(next)-1],
		"torn batch, garbage":  append(slices.Clone(next[:100]), random(vfs.SectorBytes-100)...),
		"torn batch, zeros":    append(slices.Clone(next[:100]), make([]byte, vfs.SectorBytes)...),
		"batch with bad CRC":   badCRC,
		"two torn headers":     append(slices.Clone(next[:60]), next[:60]...),
		"magic at every place": bytes.Repeat([]byte("TRNB"), 200),
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			fs, path := memFile(t, base, append(slices.Clone(full), tail...))
			w := recoverOpen(t, fs, path, bs, full)
			more := makeBatches(rng, w.Info().Next, 2, 100)
			appendAll(t, w, more)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			recoverOpen(t, fs, path, append(slices.Clone(bs), more...), readFile(t, fs, path)).Close()
		})
	}
	// On the real filesystem too.
	path := filepath.Join(t.TempDir(), segment.FileName(base))
	writeFile(t, vfs.OS, path, append(slices.Clone(full), random(3000)...))
	recoverOpen(t, vfs.OS, path, bs, full).Close()
}

// TestRecoverCorruptBatch damages one byte of a batch that valid batches
// follow: recovery must report it and leave the file alone.
func TestRecoverCorruptBatch(t *testing.T) {
	const base = 0
	rng := rand.New(rand.NewPCG(15, 15))
	bs := makeBatches(rng, base, 5, 120)
	full := segmentBytes(t, base, bs, false)
	pos, _ := positions(bs)
	for _, i := range []int{0, 2, 3} {
		for k := range len(bs[i].data) {
			for _, flip := range []byte{0x01, 0xff} {
				data := slices.Clone(full)
				data[pos[i]+int64(k)] ^= flip
				fs, path := memFile(t, base, data)
				_, w, err := segment.Recover(fs, path, 0)
				if w != nil {
					t.Fatalf("batch %d byte %d ^ %#x: Recover returned a writer", i, k, flip)
				}
				checkCorrupt(t, err, path, pos[i])
				if !bytes.Equal(readFile(t, fs, path), data) {
					t.Fatalf("batch %d byte %d ^ %#x: Recover modified the file", i, k, flip)
				}
			}
		}
	}

	// The same damage in the last batch is a torn tail.
	last := len(bs) - 1
	data := slices.Clone(full)
	data[pos[last]+60] ^= 1
	fs, path := memFile(t, base, data)
	recoverOpen(t, fs, path, bs[:last], full[:pos[last]]).Close()

	// A whole, valid batch that does not continue the offsets is not a torn
	// tail either.
	data = append(slices.Clone(full), bs[1].data...)
	fs, path = memFile(t, base, data)
	_, _, err := segment.Recover(fs, path, 0)
	checkCorrupt(t, err, path, int64(len(full)))
	if !bytes.Equal(readFile(t, fs, path), data) {
		t.Fatal("Recover modified the file")
	}

	// On the real filesystem.
	data = slices.Clone(full)
	data[pos[1]+50] ^= 0x10
	path = filepath.Join(t.TempDir(), segment.FileName(base))
	writeFile(t, vfs.OS, path, data)
	_, _, err = segment.Recover(vfs.OS, path, 0)
	checkCorrupt(t, err, path, pos[1])
	if !bytes.Equal(readFile(t, vfs.OS, path), data) {
		t.Fatal("Recover modified the file")
	}
}

// TestRecoverTornFooter checks that a segment whose footer did not make it to
// disk whole is recovered as an open segment with all its batches.
func TestRecoverTornFooter(t *testing.T) {
	const base = 64
	rng := rand.New(rand.NewPCG(16, 16))
	bs := makeBatches(rng, base, 60, 3000) // enough for several index entries
	full := segmentBytes(t, base, bs, true)
	_, end := positions(bs)
	if n := (int64(len(full)) - end - trailerBytes) / 16; n < 2 {
		t.Fatalf("footer with %d index entries, the test needs more", n)
	}
	check := func(t *testing.T, fs vfs.FS, path string) {
		w := recoverOpen(t, fs, path, bs, full[:end])
		sealed, err := w.Seal()
		if err != nil {
			t.Fatal(err)
		}
		checkInfo(t, "Seal", sealed, sealedInfo(path, base, bs))
		if !bytes.Equal(readFile(t, fs, path), full) {
			t.Fatal("sealing again wrote different bytes")
		}
	}
	for cut := end; cut < int64(len(full)); cut++ {
		fs, path := memFile(t, base, full[:cut])
		check(t, fs, path)
	}
	for k := end; k < int64(len(full)); k++ {
		data := slices.Clone(full)
		data[k] ^= 0x20
		fs, path := memFile(t, base, data)
		check(t, fs, path)
	}
	for _, tail := range [][]byte{{0}, make([]byte, 700), []byte("TRNF")} {
		fs, path := memFile(t, base, append(slices.Clone(full), tail...))
		check(t, fs, path)
	}
	path := filepath.Join(t.TempDir(), segment.FileName(base))
	writeFile(t, vfs.OS, path, full[:len(full)-1])
	check(t, vfs.OS, path)
}

// TestRecoverUnfinished checks the files a crash during Create can leave.
func TestRecoverUnfinished(t *testing.T) {
	const base = 12
	rng := rand.New(rand.NewPCG(17, 17))
	bs := makeBatches(rng, base, 3, 100)
	full := segmentBytes(t, base, bs, false)
	header := full[:segment.HeaderBytes]
	badCRC := slices.Clone(header)
	badCRC[33] ^= 1
	for name, data := range map[string][]byte{
		"empty":              nil,
		"one byte":           header[:1],
		"half a header":      header[:20],
		"no crc":             header[:32],
		"no reserved tail":   header[:36],
		"all but a byte":     header[:39],
		"zeros":              make([]byte, segment.HeaderBytes),
		"zero sector":        make([]byte, vfs.SectorBytes),
		"bad crc":            badCRC,
		"half, then garbage": append(slices.Clone(header[:20]), bytes.Repeat([]byte{0xa5}, vfs.SectorBytes-20)...),
	} {
		t.Run(name, func(t *testing.T) {
			fs, path := memFile(t, base, data)
			info, w, err := segment.Recover(fs, path, 0)
			if !errors.Is(err, segment.ErrUnfinished) || errors.Is(err, rpcerr.ErrCorrupt) || w != nil {
				t.Fatalf("Recover: %+v, %v, %v; want ErrUnfinished", info, w, err)
			}
			if !bytes.Equal(readFile(t, fs, path), data) {
				t.Fatal("Recover modified the file")
			}
			if _, err := segment.ReadSealed(fs, path); !errors.Is(err, rpcerr.ErrCorrupt) {
				t.Fatalf("ReadSealed: %v, want rpcerr.ErrCorrupt", err)
			}
		})
	}

	// A damaged header in front of batches is not an unfinished file.
	for name, data := range map[string][]byte{
		"bad crc":   append(slices.Clone(badCRC), full[segment.HeaderBytes:]...),
		"bad magic": append([]byte("XRNS"), full[4:]...),
		"no header": full[segment.HeaderBytes:],
	} {
		t.Run(name+" before batches", func(t *testing.T) {
			fs, path := memFile(t, base, data)
			_, _, err := segment.Recover(fs, path, 0)
			checkCorrupt(t, err, path, 0)
			if !bytes.Equal(readFile(t, fs, path), data) {
				t.Fatal("Recover modified the file")
			}
		})
	}
}

// TestHeaderNameMismatch checks that a file whose header names another base
// offset than its file name is reported as corrupt, batches or not.
func TestHeaderNameMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 18))
	bs := makeBatches(rng, 100, 3, 100)
	for name, data := range map[string][]byte{
		"open":         segmentBytes(t, 100, bs, false),
		"sealed":       segmentBytes(t, 100, bs, true),
		"open empty":   segmentBytes(t, 100, nil, false),
		"sealed empty": segmentBytes(t, 100, nil, true),
	} {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/" + segment.FileName(200), "/" + segment.FileName(99), "/other.seg"} {
				fs := vfs.NewMem()
				writeFile(t, fs, path, data)
				_, w, err := segment.Recover(fs, path, 0)
				if w != nil {
					t.Fatal("Recover returned a writer")
				}
				checkCorrupt(t, err, path, 8)
				if !bytes.Equal(readFile(t, fs, path), data) {
					t.Fatal("Recover modified the file")
				}
				_, err = segment.ReadSealed(fs, path)
				checkCorrupt(t, err, path, 8)
			}
		})
	}
}

// TestReadSealedOpen checks that ReadSealed refuses a segment without a valid
// footer.
func TestReadSealedOpen(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 19))
	for _, n := range []int{0, 1, 5} {
		bs := makeBatches(rng, 0, n, 100)
		fs, path := memFile(t, 0, segmentBytes(t, 0, bs, false))
		if _, err := segment.ReadSealed(fs, path); !errors.Is(err, rpcerr.ErrCorrupt) {
			t.Fatalf("ReadSealed of an open segment of %d batches: %v, want rpcerr.ErrCorrupt", n, err)
		}
	}
	if _, err := segment.ReadSealed(vfs.NewMem(), "/"+segment.FileName(0)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadSealed of a missing file: %v", err)
	}
}

// TestRecoverIOErrors fails each open, read, truncate and sync of a recovery
// in turn. Recovery must return the I/O error, never report it as damage
// (which the caller may act on by removing the file) nor take a sealed
// segment for an open one, and must leave the file as it was or recovered.
func TestRecoverIOErrors(t *testing.T) {
	const base = 5
	rng := rand.New(rand.NewPCG(20, 20))
	bs := makeBatches(rng, base, 6, 200)
	open := segmentBytes(t, base, bs, false)
	sealed := segmentBytes(t, base, bs, true)
	torn := append(slices.Clone(open), bs[0].data[:30]...)
	path := "/" + segment.FileName(base)
	for name, data := range map[string][]byte{"open": open, "sealed": sealed, "torn": torn} {
		want, wantData := expectedInfo(path, base, bs), open
		if name == "sealed" {
			want, wantData = sealedInfo(path, base, bs), sealed
		}
		check := func(t *testing.T, info segment.Info, w *segment.Writer, fs vfs.FS) {
			t.Helper()
			checkInfo(t, "Recover", info, want)
			if (w == nil) != want.Sealed {
				t.Fatalf("Recover returned writer %v for a segment sealed %v", w, want.Sealed)
			}
			if !bytes.Equal(readFile(t, fs, path), wantData) {
				t.Fatal("the file does not hold what recovery should leave")
			}
			if w != nil {
				w.Close()
			}
		}
		t.Run(name, func(t *testing.T) {
			for _, op := range []vfs.Op{vfs.OpOpen, vfs.OpRead, vfs.OpTruncate, vfs.OpSync} {
				for n := 1; ; n++ {
					mem, _ := memFile(t, base, data)
					seen := 0
					fs := vfs.WithErrors(mem, func(o vfs.Op, _ string) error {
						if o != op {
							return nil
						}
						if seen++; seen == n {
							return errInjected
						}
						return nil
					})
					info, w, err := segment.Recover(fs, path, 0)
					if seen < n { // every such operation went through
						if err != nil {
							t.Fatalf("Recover without an injected error: %v", err)
						}
						check(t, info, w, mem)
						break
					}
					if err == nil {
						check(t, info, w, mem)
					} else {
						if !errors.Is(err, errInjected) || errors.Is(err, rpcerr.ErrCorrupt) || errors.Is(err, segment.ErrUnfinished) {
							t.Fatalf("%v #%d failed: Recover: %v, want the injected error", op, n, err)
						}
						if got := readFile(t, mem, path); !bytes.Equal(got, data) && !bytes.Equal(got, wantData) {
							t.Fatalf("%v #%d failed: the file was changed to %d bytes", op, n, len(got))
						}
					}
					info, w, err = segment.Recover(mem, path, 0)
					if err != nil {
						t.Fatalf("Recover after %v #%d failed: %v", op, n, err)
					}
					check(t, info, w, mem)
				}
			}
		})
	}
}

// TestRecoverAfterCrash runs a writer's life on a MemFS that crashes after
// every possible number of operations, and recovers what several crashes
// could leave: recovery must succeed, keep every synced batch, return only
// batches that were written, and hand back a writer that can finish the job.
func TestRecoverAfterCrash(t *testing.T) {
	const base = 500
	rng := rand.New(rand.NewPCG(21, 21))
	bs := makeBatches(rng, base, 12, 700)
	path := "/" + segment.FileName(base)
	// run returns the next offset synced so far, and whether Create returned.
	run := func(fs vfs.FS) (synced uint64, created bool) {
		w, err := segment.Create(fs, "/", base, testEpoch, testCreated)
		if err != nil {
			return 0, false
		}
		synced = base
		for i, b := range bs {
			if err := w.Append(b.data, b.h, b.maxTime); err != nil {
				return synced, true
			}
			if i%3 == 2 {
				if err := w.Sync(); err != nil {
					return synced, true
				}
				synced = b.h.NextOffset()
			}
		}
		if _, err := w.Seal(); err != nil {
			return synced, true
		}
		return bs[len(bs)-1].h.NextOffset(), true
	}
	whole := vfs.NewMem()
	if _, created := run(whole); !created {
		t.Fatal("run failed without a crash")
	}
	for n := range whole.Ops() + 1 {
		fs := vfs.NewMem()
		fs.CrashAfter(n)
		synced, created := run(fs)
		for seed := range 8 {
			after := fs.Crash(rand.New(rand.NewPCG(uint64(n), uint64(seed))))
			info, w, err := segment.Recover(after, path, 0)
			if !created {
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("crash after %d ops, seed %d: Recover of a file never made durable: %v", n, seed, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("crash after %d ops, seed %d: Recover: %v", n, seed, err)
			}
			got := scanAll(t, after, path, segment.HeaderBytes, info.End)
			k := len(got)
			checkBatches(t, got, bs[:k])
			if info.Next < synced {
				t.Fatalf("crash after %d ops, seed %d: recovered up to offset %d, but %d was synced", n, seed, info.Next, synced)
			}
			if w == nil {
				checkInfo(t, "Recover", info, sealedInfo(path, base, bs[:k]))
				continue
			}
			checkInfo(t, "Recover", info, expectedInfo(path, base, bs[:k]))
			appendAll(t, w, bs[k:])
			sealed, err := w.Seal()
			if err != nil {
				t.Fatal(err)
			}
			checkInfo(t, "Seal after recovery", sealed, sealedInfo(path, base, bs))
		}
	}
}

// TestRecoverAcked checks that a cut which would lose an entry the caller
// knows was acknowledged is refused as corruption, and the file left as it
// was, while a cut that keeps every such entry goes ahead; and that a file
// holding acknowledged entries is not taken for one whose creation a crash
// cut short.
func TestRecoverAcked(t *testing.T) {
	const base = 50
	rng := rand.New(rand.NewPCG(14, 14))
	bs := makeBatches(rng, base, 5, 150)
	full := segmentBytes(t, base, bs, false)
	pos, _ := positions(bs)
	cut := pos[len(pos)-1] + 10 // the last batch is torn
	lastBase := bs[len(bs)-1].h.BaseOffset
	for _, acked := range []uint64{0, base, lastBase, lastBase + 1} {
		fs, path := memFile(t, base, full[:cut])
		info, w, err := segment.Recover(fs, path, acked)
		if acked <= lastBase {
			if err != nil {
				t.Fatalf("acked %d: %v", acked, err)
			}
			w.Close()
			if info.Next != lastBase {
				t.Fatalf("acked %d: recovered to offset %d, want %d", acked, info.Next, lastBase)
			}
			continue
		}
		if _, ok := errors.AsType[*rpcerr.CorruptError](err); !ok || !errors.Is(err, segment.ErrCutAcknowledged) {
			t.Fatalf("acked %d: %v, want a *rpcerr.CorruptError", acked, err)
		}
		if fi, err := fs.Stat(path); err != nil || fi.Size() != cut {
			t.Fatalf("acked %d: the file was changed: %v, %v", acked, fi, err)
		}
	}
	zeroed := make([]byte, segment.HeaderBytes+20)
	for _, acked := range []uint64{base, base + 1} {
		fs, path := memFile(t, base, zeroed)
		_, _, err := segment.Recover(fs, path, acked)
		if acked == base && !errors.Is(err, segment.ErrUnfinished) {
			t.Fatalf("acked %d: %v, want segment.ErrUnfinished", acked, err)
		}
		if _, ok := errors.AsType[*rpcerr.CorruptError](err); acked > base && (!ok || !errors.Is(err, segment.ErrCutAcknowledged)) {
			t.Fatalf("acked %d: %v, want a *rpcerr.CorruptError", acked, err)
		}
	}
}
