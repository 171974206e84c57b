package tern

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// The tests of this file damage stored segments and objects the way a disk
// does (a zeroed block, a flipped bit) and check the promise of issue 7:
// damage is detected, reported as ErrCorrupt naming the file, and never
// returned as data.

// damageSeed is the seed of the random damage: TERN_SEED if set, so that a
// failure can be replayed, else a new one. It is logged either way.
func damageSeed(t *testing.T) uint64 {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("TERN_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TERN_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with TERN_SEED=%d)", seed, seed)
	return seed
}

// damageEntries returns n entries of varied sizes, some with properties,
// each with its own time.
func damageEntries(n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{
			Payload: fmt.Appendf(nil, "entry-%05d-%s", i, strings.Repeat(string(rune('a'+i%26)), (i*37)%300)),
			Time:    time.Unix(1_700_000_000, int64(i)*1000),
		}
		if i%3 == 0 {
			es[i].Properties = map[string][]byte{"k": fmt.Appendf(nil, "v%d", i), "type": []byte("damage")}
		}
	}
	return es
}

// appendEntries appends es in AppendBatch calls of 1 to 4 entries.
func appendEntries(t *testing.T, w *Writer, es []Entry) {
	t.Helper()
	for i := 0; i < len(es); {
		n := min(1+i%4, len(es)-i)
		off, err := w.AppendBatch(t.Context(), es[i:i+n])
		if err != nil || off != Offset(i) {
			t.Fatalf("append of entries %d to %d: offset %d, %v", i, i+n, off, err)
		}
		i += n
	}
}

// sameEntry reports whether got holds what want holds: payload, properties
// and time.
func sameEntry(got, want Entry) bool {
	return bytes.Equal(got.Payload, want.Payload) && maps.EqualFunc(got.Properties, want.Properties, bytes.Equal) &&
		got.Time.Equal(want.Time)
}

// snapshot reads every regular file under dir, by path relative to it.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	snap := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		snap[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// restore writes snap into dir, which is made if needed, with the file rel
// holding data in place of its snapshot.
func restore(t *testing.T, dir string, snap map[string][]byte, rel string, data []byte) {
	t.Helper()
	for name, b := range snap {
		if name == rel {
			b = data
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// damage is one way to damage one stored file or object.
type damage struct {
	rel   string // the file, relative to the snapshot's root
	desc  string
	apply func(b []byte)
}

func (d damage) damaged(pristine []byte) []byte {
	b := slices.Clone(pristine)
	d.apply(b)
	return b
}

// zeroBlocks zeroes each 4 KiB block of each file in turn (the last one
// perhaps short), up to limit cases spread evenly over all of them.
func zeroBlocks(snap map[string][]byte, files []string, limit int) []damage {
	var all []damage
	for _, rel := range files {
		size := int64(len(snap[rel]))
		for at := int64(0); at < size; at += 4096 {
			from, to := at, min(at+4096, size)
			all = append(all, damage{rel: rel, desc: fmt.Sprintf("%s: bytes [%d, %d) zeroed", rel, from, to),
				apply: func(b []byte) { clear(b[from:to]) }})
		}
	}
	if len(all) <= limit {
		return all
	}
	var some []damage
	for i := range limit {
		some = append(some, all[i*len(all)/limit])
	}
	return some
}

// bitFlips flips n single bits, each at a position drawn uniformly over the
// bytes of all the files.
func bitFlips(rng *rand.Rand, snap map[string][]byte, files []string, n int) []damage {
	total := int64(0)
	for _, rel := range files {
		total += int64(len(snap[rel]))
	}
	var out []damage
	for range n {
		at, bit := rng.Int64N(total), uint(rng.IntN(8))
		for _, rel := range files {
			if size := int64(len(snap[rel])); at >= size {
				at -= size
				continue
			}
			pos := at
			out = append(out, damage{rel: rel, desc: fmt.Sprintf("%s: bit %d of byte %d flipped", rel, bit, pos),
				apply: func(b []byte) { b[pos] ^= 1 << bit }})
			break
		}
	}
	return out
}

// outcome is what reading a damaged log gave.
type outcome int

const (
	detectedAtOpen outcome = iota // opening the log failed with ErrCorrupt, or it opened degraded
	detectedAtRead                // a read failed with ErrCorrupt
	intact                        // no error, and every entry as written
	wrongResult                   // anything else: a failure of the test
)

func (o outcome) String() string {
	return [...]string{"detected at open", "detected at read", "no error", "wrong result"}[o]
}

// tally counts outcomes, of all cases and of those whose damage is to
// bytes a reader needs.
type tally struct {
	cases, needed, neededDetected   int
	atOpen, atRead, harmless, wrong int
}

// checkTotal fails the test unless every case whose damage the reader
// needs was detected and no case gave wrong data.
func (tl *tally) checkTotal(t *testing.T) {
	t.Helper()
	if tl.wrong != 0 || tl.neededDetected != tl.needed {
		t.Errorf("detection is not total: %d of %d cases of needed bytes detected, %d wrong results", tl.neededDetected, tl.needed, tl.wrong)
	}
}

func (tl *tally) add(o outcome, needed bool) {
	tl.cases++
	if needed {
		tl.needed++
	}
	switch o {
	case detectedAtOpen:
		tl.atOpen++
	case detectedAtRead:
		tl.atRead++
	case intact:
		tl.harmless++
	default:
		tl.wrong++
	}
	if needed && (o == detectedAtOpen || o == detectedAtRead) {
		tl.neededDetected++
	}
}

func (tl *tally) String() string {
	return fmt.Sprintf("%d damage cases (%d in bytes readers need): detected %d (%d at open, %d at read), "+
		"harmless with correct data %d, wrong data or silent loss %d",
		tl.cases, tl.needed, tl.atOpen+tl.atRead, tl.atOpen, tl.atRead, tl.harmless, tl.wrong)
}

// readDamaged opens log name with c and reads it whole. Damage must show as
// an error that matches ErrCorrupt and whose *CorruptError names path (a
// file, or an object's key). Anything but that or every entry of want as
// written, and no more, is a wrong result, explained by the string.
func readDamaged(ctx context.Context, c *Client, name string, want []Entry, path string) (outcome, string) {
	return readDamagedFrom(ctx, c, name, want, 0, path)
}

// readDamagedFrom is readDamaged reading from offset from.
func readDamagedFrom(ctx context.Context, c *Client, name string, want []Entry, from Offset, path string) (outcome, string) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang is a failure, not a stuck test
	defer cancel()
	corrupt := func(err error) bool {
		ce, ok := errors.AsType[*CorruptError](err)
		return ok && errors.Is(err, ErrCorrupt) && (ce.Path == path || strings.HasSuffix(ce.Path, "/"+path))
	}
	l, err := c.OpenLog(ctx, name)
	if err != nil {
		if corrupt(err) {
			return detectedAtOpen, ""
		}
		return wrongResult, fmt.Sprintf("open: %v, want a *CorruptError naming %s", err, path)
	}
	info, err := l.Info(ctx)
	if err != nil {
		return wrongResult, err.Error()
	}
	degraded, why := degradedAt(c, name, path)
	if degraded {
		// Damage found at open: the log opened degraded, and what it
		// holds must be a prefix of want, read without an error.
		if why != "" {
			return wrongResult, why
		}
		if info.End >= Offset(len(want)) {
			return wrongResult, fmt.Sprintf("the log opened degraded, ending at %d, want below %d", info.End, len(want))
		}
		want, from = want[:info.End], min(from, info.End)
	}
	if info.Start != 0 || info.End != Offset(len(want)) {
		return wrongResult, fmt.Sprintf("the log opened without an error as offsets [%d, %d), want [0, %d)", info.Start, info.End, len(want))
	}
	r, err := l.OpenReader(ctx, from)
	if err != nil {
		return wrongResult, fmt.Sprintf("open reader: %v", err)
	}
	defer r.Close()
	for next := from; next < Offset(len(want)); {
		es, err := r.NextBatch(ctx, 100)
		if err != nil {
			if corrupt(err) && !degraded {
				return detectedAtRead, ""
			}
			return wrongResult, fmt.Sprintf("read at offset %d: %v, want a *CorruptError naming %s", next, err, path)
		}
		for _, e := range es {
			if e.Offset != next {
				return wrongResult, fmt.Sprintf("read offset %d, want %d", e.Offset, next)
			}
			if !sameEntry(e, want[next]) {
				return wrongResult, fmt.Sprintf("offset %d holds %.40q %v %v, want %.40q %v %v",
					next, e.Payload, e.Properties, e.Time, want[next].Payload, want[next].Properties, want[next].Time)
			}
			next++
		}
	}
	if degraded {
		return detectedAtOpen, ""
	}
	return intact, ""
}

// segLayout is where a local segment file keeps its parts.
type segLayout struct {
	base    uint64
	last    bool // the log's last segment, which Open recovers by scanning unless its footer is whole
	sealed  bool
	closed  bool  // sealed when the log was closed, which recorded where the log ends
	end     int64 // where the batches end (and a footer starts)
	batches []batchPos
}

type batchPos struct {
	pos, end int64
	base     uint64
}

// layoutOf parses the pristine segment file b.
func layoutOf(t *testing.T, path string, b []byte, last bool) segLayout {
	t.Helper()
	base, _ := segment.ParseFileName(path)
	lay := segLayout{base: base, last: last, end: int64(len(b))}
	dir := t.TempDir()
	p := filepath.Join(dir, filepath.Base(path))
	os.WriteFile(p, b, 0o644)
	if info, err := segment.ReadSealed(vfs.OS, p); err == nil {
		lay.sealed, lay.end = true, info.End
	}
	for pos := int64(segment.HeaderBytes); pos < lay.end; {
		h, err := record.ParseHeader(b[pos:])
		if err != nil {
			t.Fatalf("pristine %s at byte %d: %v", path, pos, err)
		}
		lay.batches = append(lay.batches, batchPos{pos: pos, end: pos + int64(h.Length), base: h.BaseOffset})
		pos += int64(h.Length)
	}
	return lay
}

// expectation is what the documented checks and recovery rule make of a
// damage: the reader must report it, or may find nothing wrong (bytes no
// reader needs), or recovery cuts the log at tornEnd as a torn tail.
type expectation struct {
	mustDetect bool
	torn       bool
	tornEnd    Offset
}

// expect applies the rules of package segment to a damage of the bytes
// [lo, hi] of a segment laid out as lay:
//   - a segment whose footer is whole (every sealed segment but perhaps the
//     last) is trusted after its header and footer checks, and every batch
//     is checked when read: all damage is detected except in the header's
//     reserved bytes [36, 40), which no check covers and no reader uses;
//   - the last segment, when its footer is damaged or it was left open by
//     a crash, is scanned at Open: damage followed by a valid batch is
//     refused as corruption, damage after which no valid batch starts is
//     a torn tail, cut off from the first damaged batch on. The format
//     cannot tell that apart from damage to the last batches
//     acknowledged: both are bad bytes up to the end of the file;
//   - unless the log was closed cleanly, which recorded where it ends:
//     damage that would cut off a batch below that is refused as
//     corruption, and damage to the footer alone cuts the footer.
func (lay segLayout) expect(lo, hi int64, size int64) expectation {
	inHeader := lo < 36
	onlyReserved := lo >= 36 && hi < segment.HeaderBytes
	footerDamaged := !lay.sealed || hi >= lay.end
	if !lay.last || !footerDamaged {
		return expectation{mustDetect: !onlyReserved}
	}
	// Scanned as an open segment.
	first := -1 // the first damaged batch
	for k, b := range lay.batches {
		if b.end > lo && b.pos <= hi {
			first = k
			break
		}
	}
	validAfter := false
	for _, b := range lay.batches {
		validAfter = validAfter || b.pos > hi
	}
	switch {
	case lay.closed && (inHeader || first >= 0):
		return expectation{mustDetect: true}
	case inHeader && validAfter:
		return expectation{mustDetect: true}
	case inHeader && size <= vfs.SectorBytes:
		// Read as the torn header of a creation cut short: the file
		// is removed.
		return expectation{torn: true, tornEnd: Offset(lay.base)}
	case inHeader:
		return expectation{mustDetect: true}
	case first < 0:
		return expectation{} // the reserved header bytes, the footer
	case validAfter:
		return expectation{mustDetect: true}
	}
	return expectation{torn: true, tornEnd: Offset(lay.batches[first].base)}
}

// damagedRange returns the first and last changed byte.
func damagedRange(pristine, damaged []byte) (lo, hi int64) {
	lo, hi = -1, -1
	for i := range pristine {
		if pristine[i] != damaged[i] {
			if lo < 0 {
				lo = int64(i)
			}
			hi = int64(i)
		}
	}
	return lo, hi
}

// localLog writes a local log of several segments, the last tail entries
// by a second writer (so into a segment of their own), closes the client,
// or with crash abandons it as a crash would, and returns the data
// directory's snapshot, the segment files (relative, oldest first), their
// layouts and the entries.
func localLog(t *testing.T, crash bool, tail int) (map[string][]byte, []string, map[string]segLayout, []Entry) {
	dir := t.TempDir()
	c, err := Open(t.Context(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l, w := createLog(t, c, "disk", LogOptions{SegmentBytes: 10_000})
	want := damageEntries(240 + tail)
	appendEntries(t, w, want[:240])
	if tail > 0 {
		if w, err = l.OpenWriter(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i := 240; i < len(want); i++ {
			if off, err := w.Append(t.Context(), want[i]); err != nil || off != Offset(i) {
				t.Fatalf("append of entry %d: offset %d, %v", i, off, err)
			}
		}
	}
	if crash {
		abandon(t, c)
	} else if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, dir)
	var segs []string
	for rel := range snap {
		if strings.HasSuffix(rel, ".seg") {
			segs = append(segs, rel)
		}
	}
	slices.Sort(segs)
	if len(segs) < 5 {
		t.Fatalf("%d segments; the test wants several", len(segs))
	}
	lays := map[string]segLayout{}
	for i, rel := range segs {
		lay := layoutOf(t, rel, snap[rel], i == len(segs)-1)
		lay.closed = !crash
		lays[rel] = lay
		if !lays[rel].sealed && (!crash || i < len(segs)-1) {
			t.Fatalf("%s is not sealed", rel)
		}
	}
	return snap, segs, lays, want
}

// localTally adds to tally the cases cut as torn tails.
type localTally struct {
	tally
	torn int
}

// damageLocal runs the cases on copies of snap and checks each outcome
// against expect.
func damageLocal(t *testing.T, snap map[string][]byte, lays map[string]segLayout, want []Entry, cases []damage) localTally {
	t.Helper()
	var tl localTally
	for _, d := range cases {
		pristine := snap[d.rel]
		damaged := d.damaged(pristine)
		lo, hi := damagedRange(pristine, damaged)
		if lo < 0 {
			continue // zeroes over zeroes: no damage
		}
		ex := lays[d.rel].expect(lo, hi, int64(len(pristine)))
		dir := t.TempDir()
		restore(t, dir, snap, d.rel, damaged)
		path := filepath.Join(dir, filepath.FromSlash(d.rel))
		var logged bytes.Buffer // written under the handler's lock; read after Close
		c, err := Open(t.Context(), Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		wantRead := want
		if ex.torn {
			wantRead = want[:ex.tornEnd]
		}
		o, why := readDamaged(t.Context(), c, "disk", wantRead, path)
		c.Close()
		os.RemoveAll(dir)
		switch {
		case ex.torn && o == intact && !strings.Contains(logged.String(), "recovery cut the open segment") &&
			!strings.Contains(logged.String(), "removing a segment file"):
			t.Errorf("%s: the log was cut at offset %d as a torn tail, and nothing was logged", d.desc, ex.tornEnd)
			o = wrongResult
		case ex.torn && o == intact:
			tl.torn++
			tl.cases++
			continue
		case ex.torn:
			t.Errorf("%s: %v, %s; want the log cut at offset %d as a torn tail", d.desc, o, why, ex.tornEnd)
			o = wrongResult
		case o == wrongResult:
			t.Errorf("%s: %s", d.desc, why)
		case o == intact && ex.mustDetect:
			t.Errorf("%s: damage to bytes the reader needs went unnoticed (the data read was right)", d.desc)
		}
		tl.add(o, ex.mustDetect)
	}
	return tl
}

// TestSealedSegmentDamage zeroes every 4 KiB block and flips a few hundred
// random bits of the sealed segments of a local log closed cleanly, and
// reads the log after each: every entry returned is as written, and damage
// the reader needs is reported as ErrCorrupt naming the file, every time.
// The last segment is scanned at Open when its footer is damaged, and
// damage there after which no batch is whole is cut as a torn tail (see
// segLayout.expect); those cases are counted apart.
func TestSealedSegmentDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(damageSeed(t), 7))
	snap, segs, lays, want := localLog(t, false, 0)
	flips := 300
	if testing.Short() {
		flips = 60
	}
	cases := append(zeroBlocks(snap, segs, 64), bitFlips(rng, snap, segs, flips)...)
	tl := damageLocal(t, snap, lays, want, cases)
	t.Logf("sealed local segments (%d files): %v; cut as a torn tail of the last segment %d", len(segs), &tl.tally, tl.torn)
	tl.checkTotal(t)
}

// TestOpenSegmentDamage damages the last segment of a local log that a
// crash left open (unsealed), every 4 KiB block zeroed and a few hundred
// random bits flipped: damage followed by a whole batch must open the log
// degraded (its prefix read, the damage named), never be cut off as a torn
// tail; damage to the last batches,
// after which none is whole, is cut off as a torn tail, which loses those
// acknowledged entries: the format cannot tell it from a torn write. The
// small open segment (under a block) is zeroed whole by its first case.
func TestOpenSegmentDamage(t *testing.T) {
	seed := damageSeed(t)
	for _, tc := range []struct {
		name  string
		tail  int // entries of a second writer, in a segment of their own
		flips int
	}{
		{"large", 0, 200},
		{"small", 6, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(tc.tail)))
			snap, segs, lays, want := localLog(t, true, tc.tail)
			last := segs[len(segs)-1:]
			if n := len(lays[last[0]].batches); n < 6 {
				t.Fatalf("the open segment holds %d batches; the test wants more", n)
			}
			flips := tc.flips
			if testing.Short() {
				flips /= 5
			}
			cases := append(zeroBlocks(snap, last, 64), bitFlips(rng, snap, last, flips)...)
			tl := damageLocal(t, snap, lays, want, cases)
			t.Logf("open local segment (%d bytes, %d batches): %v; cut as a torn tail %d",
				len(snap[last[0]]), len(lays[last[0]].batches), &tl.tally, tl.torn)
			tl.checkTotal(t)
		})
	}
}

// objectLog writes an object log through a dir:// bucket: one upload per
// AppendBatch, small segments, the first half compacted into one object per
// segment. The client is closed, or with crash abandoned as a crash would
// (its last segment open). It returns the snapshot of a directory holding
// the data directory ("data/") and the bucket ("store/"), the objects of
// the log (relative to it), their batches, and the entries.
func objectLog(t *testing.T, crash bool) (map[string][]byte, []string, map[string][]batchPos, []Entry) {
	root := t.TempDir()
	c, err := Open(t.Context(), objectOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	l, w := createLog(t, c, "disk", LogOptions{Mode: ModeObject, SegmentBytes: 4096, FlushInterval: time.Millisecond})
	want := damageEntries(240)
	appendEntries(t, w, want[:120])
	if err := l.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w, err = l.OpenWriter(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := 120; i < len(want); {
		n := min(1+i%4, len(want)-i)
		if off, err := w.AppendBatch(t.Context(), want[i:i+n]); err != nil || off != Offset(i) {
			t.Fatalf("append of entries %d to %d: offset %d, %v", i, i+n, off, err)
		}
		i += n
	}
	if crash {
		abandon(t, c)
	} else if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, root)
	var objs []string
	batches := map[string][]batchPos{}
	compacted := 0
	for rel, b := range snap {
		if !strings.HasPrefix(rel, "store/"+objectPrefix(meta.Log{ID: logOf(l).id, Installation: embeddedOf(c).install.ID})) || bytes.HasPrefix(b, []byte("TRNFENCE")) {
			continue // not the log's, or the fence of the first writer's segment: no entries
		}
		objs = append(objs, rel)
		if strings.HasPrefix(filepath.Base(rel), "c") {
			compacted++
		}
		for pos := int64(0); pos < int64(len(b)); {
			h, err := record.ParseHeader(b[pos:])
			if err != nil {
				t.Fatalf("pristine %s at byte %d: %v", rel, pos, err)
			}
			batches[rel] = append(batches[rel], batchPos{pos: pos, end: pos + int64(h.Length), base: h.BaseOffset})
			pos += int64(h.Length)
		}
	}
	slices.Sort(objs)
	if compacted == 0 || len(objs)-compacted < 20 {
		t.Fatalf("%d objects, %d of them compacted; the test wants both kinds", len(objs), compacted)
	}
	return snap, objs, batches, want
}

func objectOptions(root string) Options {
	return Options{Dir: filepath.Join(root, "data"), Storage: StorageOptions{URL: "dir://" + filepath.Join(root, "store")}}
}

// readsFrom returns where to start reading a damaged object or segment:
// at 0, and at the last offset of the first damaged batch, since a reader
// that starts inside an object skips the batches that end before its
// offset, and checks only their headers.
func readsFrom(batches []batchPos, lo, hi int64) []Offset {
	for k, b := range batches {
		if b.end > lo && b.pos <= hi && k+1 < len(batches) && batches[k+1].base > b.base+1 {
			return []Offset{0, Offset(batches[k+1].base - 1)}
		}
	}
	return []Offset{0}
}

// baseFlips clears, one at a time, the set bits of the base offset of a
// batch in every third object: a batch that seems to end earlier than it
// does is one a reader starting after it skips without checking it.
func baseFlips(snap map[string][]byte, objs []string, batches map[string][]batchPos) []damage {
	var out []damage
	for i := 0; i < len(objs); i += 3 {
		rel := objs[i]
		bs := batches[rel]
		b := bs[len(bs)/2]
		for bit := range 64 {
			at := b.pos + 16 + int64(bit/8)
			if snap[rel][at]&(1<<(bit%8)) == 0 {
				continue
			}
			out = append(out, damage{rel: rel, desc: fmt.Sprintf("%s: bit %d of the base offset of the batch at byte %d cleared", rel, bit, b.pos),
				apply: func(p []byte) { p[at] &^= 1 << (bit % 8) }})
		}
	}
	return out
}

// TestObjectDamage zeroes and flips bits of the objects of an object log
// (fragments and compacted objects, of sealed segments, and of the open
// segment a crash left) and reads the log after each, from its start and
// from inside the damaged batch: every entry returned is as written, and
// every damage is reported as ErrCorrupt naming the object. An object is
// stored whole or not at all, so there is no torn tail to excuse.
func TestObjectDamage(t *testing.T) {
	seed := damageSeed(t)
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			snap, objs, batches, want := objectLog(t, crash)
			flips := 200
			if testing.Short() {
				flips = 40
			}
			cases := append(zeroBlocks(snap, objs, 40), bitFlips(rng, snap, objs, flips)...)
			cases = append(cases, baseFlips(snap, objs, batches)...)
			// One client, and the damage made in place and undone: a
			// client's Open costs fsyncs (the bucket's probe, bbolt).
			root := t.TempDir()
			restore(t, root, snap, "", nil)
			c, err := Open(t.Context(), objectOptions(root))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var tl tally
			for _, d := range cases {
				pristine := snap[d.rel]
				damaged := d.damaged(pristine)
				lo, hi := damagedRange(pristine, damaged)
				if lo < 0 {
					continue
				}
				path := filepath.Join(root, filepath.FromSlash(d.rel))
				if err := os.WriteFile(path, damaged, 0o644); err != nil {
					t.Fatal(err)
				}
				key := strings.TrimPrefix(d.rel, "store/")
				o := intact
				for _, from := range readsFrom(batches[d.rel], lo, hi) {
					got, why := readDamagedFrom(t.Context(), c, "disk", want, from, key)
					if err := c.CloseLog("disk"); err != nil {
						t.Fatal(err)
					}
					if got != intact || o == intact {
						o = got
					}
					if got == wrongResult {
						t.Errorf("%s, reading from offset %d: %s", d.desc, from, why)
						break
					}
				}
				if o == intact {
					t.Errorf("%s: the damage went unnoticed (the data read was right)", d.desc)
				}
				tl.add(o, true)
				if err := os.WriteFile(path, pristine, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("objects (%d, crash %v): %v", len(objs), crash, &tl)
			tl.checkTotal(t)
		})
	}
}

// diskFault fails operations of one kind on a log's files: from the at-th
// such operation (counting from 0), count of them in a row. With short, a
// failed write first writes half its bytes, as a write(2) that fills the
// disk does before the next one fails with ENOSPC.
type diskFault struct {
	op    vfs.Op
	err   error
	short bool
	at    int
	count int

	mu   sync.Mutex
	seen int // operations of kind op so far
	hits int // failed so far
}

// onLogFile reports whether an operation is one diskFault counts: on a
// segment file, or a directory sync of a log's directory.
func onLogFile(op vfs.Op, name string) bool {
	return strings.Contains(name, string(filepath.Separator)+"logs"+string(filepath.Separator)) &&
		(op == vfs.OpSyncDir || strings.HasSuffix(name, ".seg"))
}

// fails reports whether an operation of kind op on name fails now.
func (f *diskFault) fails(op vfs.Op, name string) bool {
	if op != f.op || !onLogFile(op, name) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.seen
	f.seen++
	if n >= f.at && n < f.at+f.count {
		f.hits++
		return true
	}
	return false
}

func (f *diskFault) inject(op vfs.Op, name string) error {
	if op == vfs.OpWrite && f.short {
		return nil // shortWriteFile fails the write
	}
	if f.fails(op, name) {
		return f.err
	}
	return nil
}

// shortWriteFS makes a write that f fails write half its bytes first.
type shortWriteFS struct {
	vfs.FS
	f *diskFault
}

func (s shortWriteFS) Create(name string) (vfs.File, error) { return s.wrap(s.FS.Create(name)) }
func (s shortWriteFS) OpenRW(name string) (vfs.File, error) { return s.wrap(s.FS.OpenRW(name)) }

func (s shortWriteFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return shortWriteFile{f, s.f}, nil
}

type shortWriteFile struct {
	vfs.File
	f *diskFault
}

func (w shortWriteFile) Write(p []byte) (int, error) {
	if !w.f.fails(vfs.OpWrite, w.Name()) {
		return w.File.Write(p)
	}
	n, err := w.File.Write(p[:len(p)/2])
	if err == nil {
		err = w.f.err
	}
	return n, &os.PathError{Op: "write", Path: w.Name(), Err: err}
}

// faultRun is what a workload under faults attempted and was told.
type faultRun struct {
	acked  map[Offset]string
	failed map[string]error // payload -> the error its append got
	batch  map[string]int   // payload -> its append
	sizes  map[int]int      // append -> entries
}

// faultWorkload appends batches of 1 to 3 entries, up to 700 bytes each,
// into 4 KiB segments (so that segments are created, synced into their
// directory and sealed along the way), and goes on after failures. Before
// the client is closed (which seals and syncs), it calls atEnd.
func faultWorkload(t *testing.T, dir string, fs vfs.FS, appends int, atEnd func()) faultRun {
	run := faultRun{acked: map[Offset]string{}, failed: map[string]error{}, batch: map[string]int{}, sizes: map[int]int{}}
	c, err := Open(t.Context(), Options{Dir: dir, fs: fs})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer c.Close()
	l, err := c.CreateLog(t.Context(), "faults", LogOptions{SegmentBytes: 4096})
	if err != nil {
		t.Fatalf("create log: %v", err)
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatalf("open writer: %v", err)
	}
	for i := range appends {
		es := make([]Entry, 1+i%3)
		for j := range es {
			p := fmt.Sprintf("a%d.%d-%s", i, j, strings.Repeat("z", (i*97+j*31)%700))
			es[j] = Entry{Payload: []byte(p)}
			run.batch[p] = i
		}
		run.sizes[i] = len(es)
		off, err := w.AppendBatch(t.Context(), es)
		for j, e := range es {
			if err != nil {
				run.failed[string(e.Payload)] = err
			} else {
				run.acked[off+Offset(j)] = string(e.Payload)
			}
		}
	}
	atEnd()
	return run
}

// check reopens the log on fs and checks it against the run: every
// acknowledged entry is there, as written; the offsets are dense; whatever
// else is there is whole batches of failed appends; and the log takes a
// new append.
func (run faultRun) check(t *testing.T, dir string, fs vfs.FS, what string) {
	t.Helper()
	c, err := Open(t.Context(), Options{Dir: dir, fs: fs})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer c.Close()
	l, err := c.OpenLog(t.Context(), "faults")
	if err != nil {
		t.Fatalf("%s: open log: %v", what, err)
	}
	got := readAll(t, l, 0)
	perBatch := map[int]int{}
	for _, e := range got {
		p := string(e.Payload)
		if want, ok := run.acked[e.Offset]; ok {
			if p != want {
				t.Fatalf("%s: acknowledged offset %d holds %.20q, want %.20q", what, e.Offset, p, want)
			}
			continue
		}
		if _, ok := run.failed[p]; !ok {
			t.Fatalf("%s: offset %d holds %.20q, which was not appended", what, e.Offset, p)
		}
		perBatch[run.batch[p]]++
	}
	for off := range run.acked {
		if off >= Offset(len(got)) {
			t.Fatalf("%s: acknowledged offset %d is missing: the log ends at %d", what, off, len(got))
		}
	}
	for b, n := range perBatch {
		if n != run.sizes[b] {
			t.Fatalf("%s: %d of the %d entries of failed append %d are in the log", what, n, run.sizes[b], b)
		}
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatalf("%s: open writer: %v", what, err)
	}
	if off, err := w.Append(t.Context(), Entry{Payload: []byte("after")}); err != nil || off != Offset(len(got)) {
		t.Fatalf("%s: append after reopening: offset %d, %v; want offset %d", what, off, err, len(got))
	}
}

// TestDiskFullAndIOErrors fails, at every point of a workload that creates,
// fills, syncs and seals segments, one operation or three in a row (a disk
// that stays full a while) with ENOSPC or EIO: writes (also short writes
// that fill the disk partway), fsyncs, file creations, directory syncs,
// and the truncation that undoes a failed write. Every append that fails
// says why (ENOSPC as a full disk); every append acknowledged is in the
// log after reopening, both with the files as they are and as a power loss
// before Close would leave them (so nothing was acknowledged that no later
// fsync covered); and the log goes on. TestIOErrors and
// TestFsyncFailureIsNotRetried cover one fault after a steady state.
func TestDiskFullAndIOErrors(t *testing.T) {
	const appends = 20
	type kind struct {
		op    vfs.Op
		err   error
		short bool
		every int // fail one operation in every so many points (each costs three Opens)
	}
	kinds := []kind{
		{vfs.OpWrite, syscall.ENOSPC, true, 1},
		{vfs.OpWrite, syscall.ENOSPC, false, 1},
		{vfs.OpWrite, syscall.EIO, false, 3}, // as TestIOErrors, at fewer points
		{vfs.OpSync, syscall.ENOSPC, false, 1},
		{vfs.OpSync, syscall.EIO, false, 1},
		{vfs.OpCreate, syscall.ENOSPC, false, 1},
		{vfs.OpSyncDir, syscall.EIO, false, 1},
		{vfs.OpTruncate, syscall.EIO, false, 1},
	}
	// A reference run counts each kind's operations.
	var mu sync.Mutex
	counts := map[vfs.Op]int{}
	faultWorkload(t, t.TempDir(), vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, name string) error {
		if onLogFile(op, name) {
			mu.Lock()
			counts[op]++
			mu.Unlock()
		}
		return nil
	}), appends, func() {})
	if counts[vfs.OpCreate] < 3 || counts[vfs.OpSyncDir] < 3 || counts[vfs.OpWrite] < appends || counts[vfs.OpTruncate] != 0 {
		t.Fatalf("the reference run made %v operations; the workload is broken", counts)
	}
	runs, failed := 0, 0
	for _, k := range kinds {
		for _, count := range []int{1, 3} {
			points := counts[k.op]
			if k.op == vfs.OpTruncate {
				points = 1 // the cut back after the failed write
			}
			every := k.every
			if count > 1 {
				every *= 5 // a fault that lasts: fewer points
			}
			if testing.Short() {
				every *= 3
			}
			for at := 0; at < points; at += every {
				name := fmt.Sprintf("%v %v short=%v at=%d count=%d", k.op, k.err, k.short, at, count)
				f := &diskFault{op: k.op, err: k.err, short: k.short, at: at, count: count}
				mem := vfs.NewMem()
				var fs vfs.FS = mem
				if k.short {
					fs = shortWriteFS{mem, f}
				}
				fs = vfs.WithErrors(fs, f.inject)
				if k.op == vfs.OpTruncate {
					w := &diskFault{op: vfs.OpWrite, err: syscall.ENOSPC, at: 9, count: 1}
					fs = vfs.WithErrors(fs, w.inject)
				}
				dir := t.TempDir()
				var crashed vfs.FS
				hitsBeforeClose := 0
				run := faultWorkload(t, dir, fs, appends, func() {
					crashed = mem.Crash(rand.New(rand.NewPCG(uint64(at), uint64(count))))
					f.mu.Lock()
					hitsBeforeClose = f.hits
					f.mu.Unlock()
				})
				runs++
				failed += len(run.failed)
				t.Run(name, func(t *testing.T) {
					if f.hits == 0 {
						t.Fatal("the fault was never injected")
					}
					if len(run.failed) == 0 && hitsBeforeClose > 0 {
						t.Fatal("the fault hit the appends, and none failed")
					}
					for p, err := range run.failed {
						if !errors.Is(err, k.err) && !(k.op == vfs.OpTruncate && errors.Is(err, syscall.ENOSPC)) {
							t.Fatalf("append of %.12q failed with %v, which does not say %v", p, err, k.err)
						}
						if errors.Is(err, syscall.ENOSPC) && !strings.Contains(err.Error(), "no space left on device") {
							t.Fatalf("append of %.12q failed with %q, which does not say the disk is full", p, err)
						}
					}
					// The power loss first: the healthy reopen appends.
					run.check(t, dir, crashed, "after a power loss before Close")
					run.check(t, dir, mem, "reopened")
				})
				if t.Failed() {
					return
				}
			}
		}
	}
	t.Logf("%d fault runs, %d appends failed", runs, failed)
}
