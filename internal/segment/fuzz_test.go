package segment_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
)

// FuzzRecover recovers arbitrary file contents, seeded with real segments.
// The base offset, and so the file name, comes from the header bytes, so that
// mutations get past the name check. Recovery must not panic; when it fails
// the file must be untouched, and when it succeeds with an open segment, the
// file must hold exactly the valid batches it reports, with dense offsets,
// and accept appends. A sealed segment's batches are trusted after its
// footer's CRC, so for one only the footer's claims are checked.
func FuzzRecover(f *testing.F) {
	rng := rand.New(rand.NewPCG(30, 30))
	for _, base := range []uint64{0, 1000, math.MaxUint64 - 20} {
		bs := makeBatches(rng, base, 3, 40)
		open := segmentBytes(f, base, bs, false)
		f.Add(open)
		f.Add(segmentBytes(f, base, bs, true))
		f.Add(segmentBytes(f, base, bs[:1], false))
		f.Add(open[:len(open)-5])
		f.Add(append(slices.Clone(open), 0, 0, 0, 0, 0))
	}
	empty := segmentBytes(f, 7, nil, false)
	f.Add(empty)
	f.Add(empty[:20])
	f.Add(segmentBytes(f, 7, nil, true))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2048 {
			return // bigger inputs reach nothing new and slow the fuzzer down
		}
		var base uint64
		if len(data) >= 16 {
			base = binary.LittleEndian.Uint64(data[8:])
		}
		fs, path := memFile(t, base, data)
		info, w, err := segment.Recover(fs, path, 0)
		after := readFile(t, fs, path)
		if err != nil {
			if !errors.Is(err, rpcerr.ErrCorrupt) && !errors.Is(err, segment.ErrUnfinished) {
				t.Fatalf("Recover: %v, want rpcerr.ErrCorrupt or ErrUnfinished", err)
			}
			if ce, ok := errors.AsType[*rpcerr.CorruptError](err); ok && (ce.Path != path || ce.Pos < 0 || ce.Pos > int64(len(data))) {
				t.Fatalf("rpcerr.CorruptError names %s at byte %d of %d", ce.Path, ce.Pos, len(data))
			}
			if !bytes.Equal(after, data) {
				t.Fatal("a failed Recover modified the file")
			}
			return
		}
		if info.Path != path || info.Base != base || info.Size != int64(len(after)) {
			t.Fatalf("Info %+v for %s of %d bytes", info, path, len(after))
		}
		checkFooterInfo(t, info)
		if info.Sealed {
			if w != nil {
				t.Fatal("Recover of a sealed segment returned a writer")
			}
			if !bytes.Equal(after, data) {
				t.Fatal("Recover modified a sealed segment")
			}
			return
		}
		if w == nil {
			t.Fatal("Recover of an open segment returned no writer")
		}
		if !bytes.Equal(after, data[:info.End]) {
			t.Fatalf("after Recover the file has %d bytes, want the first %d of %d", len(after), info.End, len(data))
		}
		next, maxTime := info.Base, int64(0)
		indexed := make(map[int64]uint64)
		file, err := fs.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		s := segment.NewScanner(file, segment.HeaderBytes, info.End)
		for {
			b, pos, err := s.Next()
			if err != nil {
				if s.Pos() != info.End {
					t.Fatalf("scan of the recovered segment stopped at %d of %d: %v", pos, info.End, err)
				}
				break
			}
			if b.BaseOffset != next {
				t.Fatalf("batch at %d has offset %d, want %d", pos, b.BaseOffset, next)
			}
			b.Each(func(_ uint64, e record.Entry) error { maxTime = max(maxTime, e.Time); return nil })
			indexed[pos] = b.BaseOffset
			next = b.NextOffset()
		}
		file.Close()
		if next != info.Next || maxTime != info.MaxTime {
			t.Fatalf("batches run to offset %d with max time %d, Info says %d and %d", next, maxTime, info.Next, info.MaxTime)
		}
		for _, e := range info.Index {
			if off, ok := indexed[e.Pos]; !ok || off != e.Offset {
				t.Fatalf("index entry %+v does not locate a batch", e)
			}
		}
		if info.Next == math.MaxUint64 {
			w.Close()
			return
		}
		batch := record.Encode(info.Next, 1, []record.Entry{{Time: 1, Payload: []byte("x")}})
		h, _ := record.ParseHeader(batch)
		if err := w.Append(batch, h, 1); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		again, w, err := segment.Recover(fs, path, 0)
		if err != nil {
			t.Fatalf("Recover after an append: %v", err)
		}
		w.Close()
		if again.Next != info.Next+1 || again.End != info.End+int64(len(batch)) {
			t.Fatalf("after an append, recovered Next %d End %d; want %d and %d", again.Next, again.End, info.Next+1, info.End+int64(len(batch)))
		}
	})
}

// checkFooterInfo checks what Info any segment, sealed or not, must satisfy:
// offsets in order and an index that points into the batches.
func checkFooterInfo(t *testing.T, info segment.Info) {
	t.Helper()
	if info.Next < info.Base || info.End < segment.HeaderBytes || info.End > info.Size {
		t.Fatalf("Info out of range: %+v", info)
	}
	for k, e := range info.Index {
		if e.Pos < segment.HeaderBytes || e.Pos >= info.End || e.Offset < info.Base || e.Offset >= info.Next {
			t.Fatalf("index entry %d %+v outside the segment: %+v", k, e, info)
		}
		if k > 0 && (e.Pos <= info.Index[k-1].Pos || e.Offset <= info.Index[k-1].Offset) {
			t.Fatalf("index entries %d and %d out of order: %+v", k-1, k, info)
		}
	}
	for _, off := range []uint64{0, info.Base, info.Next, info.Next - 1, math.MaxUint64} {
		if pos := info.Find(off); pos < segment.HeaderBytes || (pos >= info.End && pos != segment.HeaderBytes) {
			t.Fatalf("Find(%d) = %d, outside the batches of %+v", off, pos, info)
		}
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// footer encodes a footer as doc.go describes it.
func footer(index []segment.IndexEntry, end int64, next uint64, maxTime int64) []byte {
	var b []byte
	for _, e := range index {
		b = binary.LittleEndian.AppendUint64(b, e.Offset)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.Pos))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(end))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(index)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, next)
	b = binary.LittleEndian.AppendUint64(b, uint64(maxTime))
	b = binary.LittleEndian.AppendUint64(b, uint64(end-segment.HeaderBytes))
	b = append(b, 0, 0, 0, 0, 'T', 'R', 'N', 'F')
	return fixFooterCRC(b)
}

func fixFooterCRC(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[len(b)-8:], crc32.Checksum(b[:len(b)-8], castagnoli))
	return b
}

// FuzzReadSealed reads a segment whose footer is the fuzz input, after a
// fixed header and batches. Each input is read three ways: as is, with its
// CRC made to match, and with its CRC, index count, end position and magic
// made to fit the file, so that mutations reach the fields a CRC protects.
// ReadSealed must not panic, and what it accepts must describe a segment
// whose index points into its batches.
func FuzzReadSealed(f *testing.F) {
	const base = 10
	bs := makeBatches(rand.New(rand.NewPCG(31, 31)), base, 3, 40)
	prefix := segmentBytes(f, base, bs, false)
	pos, end := positions(bs)
	next := bs[2].h.NextOffset()
	f.Add(segmentBytes(f, base, bs, true)[end:])
	f.Add(footer(nil, end, next, 0))
	f.Add(footer([]segment.IndexEntry{{Offset: base, Pos: pos[0]}, {Offset: bs[1].h.BaseOffset, Pos: pos[1]},
		{Offset: bs[2].h.BaseOffset, Pos: pos[2]}}, end, next, math.MaxInt64))
	f.Add(footer([]segment.IndexEntry{{Offset: base, Pos: pos[0]}}, pos[1], bs[0].h.NextOffset(), -1))
	f.Fuzz(func(t *testing.T, foot []byte) {
		if len(foot) > trailerBytes+8*16 {
			return // more index entries reach nothing new
		}
		read := func(foot []byte) {
			fs, path := memFile(t, base, append(slices.Clone(prefix), foot...))
			info, err := segment.ReadSealed(fs, path)
			if err != nil {
				if !errors.Is(err, rpcerr.ErrCorrupt) {
					t.Fatalf("ReadSealed: %v, want rpcerr.ErrCorrupt", err)
				}
				return
			}
			size := int64(len(prefix) + len(foot))
			if !info.Sealed || info.Base != base || info.Size != size || info.End+int64(len(info.Index))*16+trailerBytes != size {
				t.Fatalf("Info %+v for a file of %d bytes", info, size)
			}
			checkFooterInfo(t, info)
			again, w, err := segment.Recover(fs, path, 0)
			if err != nil || w != nil {
				t.Fatalf("Recover of a segment ReadSealed accepts: writer %v, %v", w, err)
			}
			checkInfo(t, "Recover", again, info)
		}
		read(foot)
		if len(foot) < trailerBytes {
			return
		}
		read(fixFooterCRC(slices.Clone(foot)))
		n := (len(foot) - trailerBytes) / 16
		fit := slices.Clone(foot[:n*16+trailerBytes])
		tr := fit[n*16:]
		binary.LittleEndian.PutUint64(tr[0:], uint64(len(prefix)))
		binary.LittleEndian.PutUint32(tr[8:], uint32(n))
		copy(tr[44:], "TRNF")
		read(fixFooterCRC(fit))
	})
}
