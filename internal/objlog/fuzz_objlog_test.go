package objlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
)

// memMeta is a Meta in memory, holding the segments it is given.
type memMeta struct {
	mu   sync.Mutex
	segs []meta.Segment
}

func (m *memMeta) CreateSegment(ctx context.Context, s meta.Segment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.segs = append(m.segs, s)
	return nil
}

func (m *memMeta) SealSegment(ctx context.Context, s meta.Segment) (meta.Segment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.segs {
		if m.segs[i].Seq == s.Seq {
			if m.segs[i].Pending {
				return meta.Segment{}, meta.ErrPending
			}
			m.segs[i] = s
			if i+1 < len(m.segs) && m.segs[i+1].Pending {
				m.segs[i+1].Base, m.segs[i+1].Pending = s.End, false
			}
			return s, nil
		}
	}
	return meta.Segment{}, meta.ErrSegmentNotFound
}

func (m *memMeta) ReplaceObjects(ctx context.Context, seq uint64, old, new []meta.SegmentObject) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.segs {
		if m.segs[i].Seq == seq {
			m.segs[i].Objects = new
			return nil
		}
	}
	return meta.ErrSegmentNotFound
}

func (m *memMeta) Segments(ctx context.Context) ([]meta.Segment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.segs), nil
}

func (m *memMeta) DeleteSegment(ctx context.Context, seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.segs = slices.DeleteFunc(m.segs, func(s meta.Segment) bool { return s.Seq == seq })
	return nil
}

// fuzzBatches returns the bytes of count batches of n entries each from
// offset base on, as a fragment holds them.
func fuzzBatches(base uint64, count, n int) []byte {
	var out []byte
	for range count {
		var es []record.Entry
		for i := range n {
			e := record.Entry{Time: int64(base) + int64(i), Payload: []byte{byte(base), byte(i)}}
			if i%2 == 1 {
				e.Properties = map[string][]byte{"k": []byte("v")}
			}
			es = append(es, e)
		}
		out = append(out, record.Encode(base, 1, es)...)
		base += uint64(n)
	}
	return out
}

// fixCRCs sets the CRC of each batch of data, in turn, whose header parses.
func fixCRCs(data []byte) {
	for len(data) >= record.HeaderBytes {
		h, err := record.ParseHeader(data)
		if err != nil || uint64(h.Length) > uint64(len(data)) {
			return
		}
		binary.LittleEndian.PutUint32(data[12:], crc32.Checksum(data[16:h.Length], crc32.MakeTable(crc32.Castagnoli)))
		data = data[h.Length:]
	}
}

func sameEntry(a, b record.Entry) bool {
	return a.Time == b.Time && bytes.Equal(a.Payload, b.Payload) &&
		maps.EqualFunc(a.Properties, b.Properties, func(x, y []byte) bool { return bytes.Equal(x, y) })
}

// FuzzRead keeps two objects of arbitrary bytes as the first fragments of
// a log's open segment, as a crashed writer leaves them, opens the log as a
// reader's process does (scan), and reads it from its start to its end
// with ranged GETs of a few bytes (the fetcher). The segment's base offset
// is the first fragment's header's, so that mutations get past that check;
// with fix, the CRC of every batch whose header parses is made to match,
// so that mutations of the headers and entries are tried too.
//
// Nothing may panic or hang. Open may refuse the objects; if it accepts
// them, readers starting at each of the first offsets return entries at
// dense offsets, each as some batch of the objects holds it and as every
// other reader returns it, never at or past the log's end, until they
// reach the end or fail with an error that says the bytes are damaged
// (record.ErrCorrupt or io.ErrUnexpectedEOF).
func FuzzRead(f *testing.F) {
	f.Add(fuzzBatches(0, 2, 3), fuzzBatches(6, 1, 2), uint8(0), false)
	f.Add(fuzzBatches(100, 1, 1), fuzzBatches(101, 3, 1), uint8(7), false)
	f.Add(fuzzBatches(0, 3, 2), []byte(nil), uint8(200), false)
	f.Add(fuzzBatches(0, 1, 3), fuzzBatches(5, 1, 2), uint8(30), false)  // a gap
	f.Add(fuzzBatches(0, 1, 3), fuzzBatches(2, 1, 2), uint8(30), false)  // an overlap
	f.Add(fuzzBatches(0, 1, 10), fuzzBatches(5, 1, 2), uint8(30), false) // the first runs past the second
	f.Add(fuzzBatches(0, 2, 3), append([]byte("TRNFENCE"), 2, 0, 0, 0, 0, 0, 0, 0), uint8(1), false)
	f.Add(fuzzBatches(0, 2, 3)[:70], fuzzBatches(6, 1, 2), uint8(0), false)
	f.Add(fuzzBatches(0, 2, 3), fuzzBatches(6, 1, 2), uint8(3), true)
	f.Fuzz(func(t *testing.T, frag0, frag1 []byte, chunk uint8, fix bool) {
		if len(frag0)+len(frag1) > 4096 {
			return // longer inputs reach nothing new
		}
		frag0, frag1 = slices.Clone(frag0), slices.Clone(frag1)
		if fix {
			fixCRCs(frag0)
			fixCRCs(frag1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var base uint64
		if len(frag0) >= 24 {
			base = binary.LittleEndian.Uint64(frag0[16:])
		}
		bucket := blob.NewMem()
		frags := [][]byte{frag0, frag1}
		if len(frag1) == 0 {
			frags = frags[:1]
		}
		for i, data := range frags {
			if err := bucket.PutIfAbsent(ctx, "7/00000001/"+fragKey(i), data); err != nil {
				t.Fatal(err)
			}
		}
		m := &memMeta{segs: []meta.Segment{{Seq: 1, Epoch: 1, Base: base}}}
		l, err := Open(ctx, Options{Bucket: bucket, Meta: m, Prefix: "7/", Epoch: 1, ChunkBytes: 16 + int(chunk), ReadAhead: 2})
		if err != nil {
			return
		}
		defer l.Close()

		// What the objects hold at each offset, in any of their valid
		// batches, found as a reader finds them: by the lengths in the
		// headers, past a batch that fails its checks, which a reader
		// starting after it skips.
		held := map[uint64][]record.Entry{}
		for _, data := range frags {
			for len(data) > 0 {
				h, err := record.ParseHeader(data)
				if err != nil || uint64(h.Length) > uint64(len(data)) {
					break
				}
				if b, err := record.Decode(data); err == nil {
					b.Each(func(off uint64, e record.Entry) error {
						held[off] = append(held[off], e)
						return nil
					})
				}
				data = data[h.Length:]
			}
		}

		// Readers starting at each of the first offsets: every entry any
		// of them returns is the one the others return at its offset.
		st := l.Stats()
		seen := map[uint64]record.Entry{}
		for from := st.Start; from < min(st.End, st.Start+8); from++ {
			fuzzReadFrom(t, ctx, l, from, st, held, seen)
		}
	})
}

// fuzzReadFrom reads l from offset from to st.End for FuzzRead, and checks
// each entry against what the objects hold (held) and what readers
// starting elsewhere read (seen, which it adds to).
func fuzzReadFrom(t *testing.T, ctx context.Context, l *Log, from uint64, st engine.Stats, held map[uint64][]record.Entry, seen map[uint64]record.Entry) {
	r, err := l.NewReader(from, false)
	if err != nil {
		t.Fatalf("NewReader at %d of [%d, %d): %v", from, st.Start, st.End, err)
	}
	defer r.Close()
	for next := from; next < st.End; {
		es, err := r.NextBatch(ctx, 64, 0)
		if err != nil {
			if !errors.Is(err, record.ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("read at %d of [%d, %d): %v, want an error that says the objects are damaged", next, st.Start, st.End, err)
			}
			return
		}
		for _, e := range es {
			if e.IsTick || e.Offset != next || e.Offset >= st.End {
				t.Fatalf("read %+v, want the entry at %d of [%d, %d)", e, next, st.Start, st.End)
			}
			if !slices.ContainsFunc(held[e.Offset], func(h record.Entry) bool { return sameEntry(h, e.Entry) }) {
				t.Fatalf("read entry %d as %+v, which no batch of the objects holds", e.Offset, e.Entry)
			}
			if prev, ok := seen[e.Offset]; ok && !sameEntry(prev, e.Entry) {
				t.Fatalf("a reader from %d read entry %d as %+v, another reader as %+v", from, e.Offset, e.Entry, prev)
			}
			seen[e.Offset] = e.Entry
			next++
		}
	}
}

// FuzzBatchAt looks up offsets in arbitrary bytes as a tail reader looks
// them up in a fragment held in memory. It must not panic, and a batch it
// returns must be a whole valid batch of the bytes that holds entries from
// the offset on.
func FuzzBatchAt(f *testing.F) {
	f.Add(fuzzBatches(0, 3, 2), uint64(3))
	f.Add(fuzzBatches(10, 2, 1), uint64(0))
	f.Add(fuzzBatches(10, 2, 1), uint64(12))
	f.Add(fuzzBatches(0, 2, 2)[:60], uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, off uint64) {
		b, err := batchAt(data, off)
		if err != nil {
			return
		}
		if b.NextOffset() <= off {
			t.Fatalf("batchAt(%d) = batch of [%d, %d)", off, b.BaseOffset, b.NextOffset())
		}
		for k := 0; k+record.HeaderBytes <= len(data); k++ {
			if d, err := record.Decode(data[k:]); err == nil && d.Header == b.Header {
				return
			}
		}
		t.Fatalf("batchAt(%d) = batch of [%d, %d), which is not in the bytes", off, b.BaseOffset, b.NextOffset())
	})
}
