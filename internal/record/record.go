package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"unsafe"
)

// Wire-format constants: changing any of them changes the bytes on disk.
const (
	HeaderBytes = 48
	// Version is that of an uncompressed batch; a compressed one is
	// VersionCompressed, which readers before compression refuse.
	Version           = 1
	VersionCompressed = 2
	// Magic starts every batch; recovery searches for it past damage.
	Magic    = "TRNB"
	magic    = uint32('T') | uint32('R')<<8 | uint32('N')<<16 | uint32('B')<<24
	crcStart = 16
	// FlagAppends marks a batch that ends with an appends section.
	FlagAppends = 1 << 3
)

// ErrCorrupt is wrapped by every error that reports bytes that are not a valid
// batch.
var ErrCorrupt = errors.New("record: corrupt batch")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is one entry as the record layer sees it.
type Entry struct {
	Time       int64 // Unix nanoseconds
	Payload    []byte
	Properties map[string][]byte
}

// Header is the decoded fixed header of a batch.
type Header struct {
	Length     uint32
	CRC        uint32
	BaseOffset uint64
	Epoch      uint64
	FirstTime  int64
	Count      uint32
	Flags      uint8
	// BodyBytes is the size of the body (entries and appends section)
	// uncompressed: Length - HeaderBytes for an uncompressed batch, the
	// size the header declares for a compressed one.
	BodyBytes uint32
}

// Codec is how the batch's body is compressed.
func (h Header) Codec() Codec { return Codec(h.Flags & codecMask) }

// LogicalBytes is the size the batch has uncompressed: what it counts for
// as the bytes appended, whatever it takes stored.
func (h Header) LogicalBytes() int64 { return HeaderBytes + int64(h.BodyBytes) }

// NextOffset is the offset that follows the batch's last entry.
func (h Header) NextOffset() uint64 { return h.BaseOffset + uint64(h.Count) }

// EncodedBytes is an upper bound of the bytes e takes inside a batch.
func EncodedBytes(e Entry) int {
	n := 3*binary.MaxVarintLen64 + len(e.Payload)
	for k, v := range e.Properties {
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	return n
}

// Builder encodes entries into a batch. The zero value is ready to use. A
// Builder is not safe for concurrent use.
type Builder struct {
	buf   []byte // the header and the entries; Finish adds the appends section
	zbuf  []byte // the compressed batch Finish returned, if it did
	codec Codec
	count uint32
	first int64
	keys  []string
	as    appendsSection
}

// Reset empties the builder and keeps its buffers. It sets the codec
// back to None.
func (b *Builder) Reset() {
	b.buf = b.buf[:0]
	b.codec = None
	b.count = 0
	b.as.reset()
}

// StartAppend starts an append of producer, numbered seq in the producer's
// stream: the entries added until the next StartAppend are that append's.
// Entries added before any StartAppend form an anonymous append (producer
// 0). A batch in which some append has a producer other than 0 ends with
// an appends section (see doc.go); one without does not. seq must be 0 for
// producer 0.
func (b *Builder) StartAppend(producer, seq uint64) {
	b.as.start(producer, seq)
}

// SetCodec makes Finish compress the batch's body with c, unless the body
// is over MaxBodyBytes or does not get shorter. c must be a Codec this
// package defines.
func (b *Builder) SetCodec(c Codec) {
	if !c.valid() {
		panic(fmt.Sprintf("record: unknown codec %d", c))
	}
	b.codec = c
}

// Cap is the bytes the builder's buffers hold, for a caller that decides
// whether to keep it for later batches.
func (b *Builder) Cap() int {
	return cap(b.buf) + cap(b.zbuf) + cap(b.as.list)*int(unsafe.Sizeof(Append{}))
}

// Count is the number of entries added since the last Reset.
func (b *Builder) Count() int { return int(b.count) }

// Bytes is the size the batch will have if finished now without
// compression: with a codec, Finish returns at most this many bytes.
func (b *Builder) Bytes() int {
	if b.count == 0 {
		return HeaderBytes
	}
	return len(b.buf) + b.as.size()
}

// Add appends e to the batch. It copies e's bytes.
func (b *Builder) Add(e Entry) {
	if b.count == 0 {
		b.buf = append(b.buf[:0], make([]byte, HeaderBytes)...)
		b.first = e.Time
	}
	b.count++
	b.as.add()
	b.buf = binary.AppendVarint(b.buf, e.Time-b.first)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(e.Payload)))
	b.buf = append(b.buf, e.Payload...)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(e.Properties)))
	if len(e.Properties) == 0 {
		return
	}
	b.keys = b.keys[:0]
	for k := range e.Properties {
		b.keys = append(b.keys, k)
	}
	slices.Sort(b.keys)
	for _, k := range b.keys {
		v := e.Properties[k]
		b.buf = binary.AppendUvarint(b.buf, uint64(len(k)))
		b.buf = append(b.buf, k...)
		b.buf = binary.AppendUvarint(b.buf, uint64(len(v)))
		b.buf = append(b.buf, v...)
	}
}

// Finish writes the header for a batch whose first entry has offset base and
// returns the batch's bytes, compressed if the builder has a codec and
// that makes them shorter. They stay valid until the next Reset or Add. It
// panics if no entry was added or the batch exceeds 4 GiB, which callers
// prevent by bounding batch sizes.
func (b *Builder) Finish(base, epoch uint64) []byte {
	return PutCRC(b.FinishUnsummed(base, epoch))
}

// FinishUnsummed is Finish without the CRC: PutCRC sets it, on these bytes
// or on a copy of them. A caller that copies the batch anyway sums the copy,
// which the copy has just brought into the CPU's cache.
func (b *Builder) FinishUnsummed(base, epoch uint64) []byte {
	if b.count == 0 || uint64(b.Bytes()) > math.MaxUint32 {
		panic(fmt.Sprintf("record: finish of a batch of %d entries, %d bytes", b.count, b.Bytes()))
	}
	entries := len(b.buf)
	var flags byte
	if b.as.named {
		flags = FlagAppends
		b.buf = b.as.appendTo(b.buf)
	}
	out := b.buf
	b.buf = b.buf[:entries] // a later Add or Finish starts from the entries again
	version, bodyBytes := byte(Version), uint32(0)
	if body := out[HeaderBytes:]; b.codec != None && len(body) <= MaxBodyBytes {
		z, ok := compress(b.codec, append(b.zbuf[:0], out[:HeaderBytes]...), body)
		b.zbuf = z
		if ok {
			out, version, bodyBytes = z, VersionCompressed, uint32(len(body))
			flags |= byte(b.codec)
		}
	}
	h := out[:HeaderBytes]
	binary.LittleEndian.PutUint32(h[0:], magic)
	h[4] = version
	h[5] = flags
	binary.LittleEndian.PutUint16(h[6:], 0)
	binary.LittleEndian.PutUint32(h[8:], uint32(len(out)))
	binary.LittleEndian.PutUint64(h[16:], base)
	binary.LittleEndian.PutUint64(h[24:], epoch)
	binary.LittleEndian.PutUint64(h[32:], uint64(b.first))
	binary.LittleEndian.PutUint32(h[40:], b.count)
	binary.LittleEndian.PutUint32(h[44:], bodyBytes)
	binary.LittleEndian.PutUint32(h[12:], 0)
	return out
}

// PutCRC writes into the header of batch, which is one whole batch from
// FinishUnsummed, its CRC, and returns batch.
func PutCRC(batch []byte) []byte {
	binary.LittleEndian.PutUint32(batch[12:], crc32.Checksum(batch[crcStart:], castagnoli))
	return batch
}

// Encode is a convenience for building one batch from entries, as one
// anonymous append.
func Encode(base, epoch uint64, entries []Entry) []byte {
	var b Builder
	for _, e := range entries {
		b.Add(e)
	}
	return b.Finish(base, epoch)
}

// EncodeAppends builds one batch of entries made of appends, whose counts
// sum to len(entries) and are each at least 1. It panics otherwise.
func EncodeAppends(base, epoch uint64, entries []Entry, appends []Append) []byte {
	var b Builder
	i := 0
	for _, a := range appends {
		if a.Count == 0 || uint64(i)+uint64(a.Count) > uint64(len(entries)) {
			panic("record: append counts do not match the entries")
		}
		b.StartAppend(a.Producer, a.Seq)
		for _, e := range entries[i : i+int(a.Count)] {
			b.Add(e)
		}
		i += int(a.Count)
	}
	if i != len(entries) {
		panic("record: append counts do not match the entries")
	}
	return b.Finish(base, epoch)
}

// ParseHeader decodes and checks the fixed header at the start of p without
// checking the CRC. It returns io.ErrUnexpectedEOF if p is shorter than a
// header, and an error wrapping ErrCorrupt if the header is not valid.
func ParseHeader(p []byte) (Header, error) {
	if len(p) < HeaderBytes {
		return Header{}, io.ErrUnexpectedEOF
	}
	if m := binary.LittleEndian.Uint32(p[0:]); m != magic {
		return Header{}, fmt.Errorf("%w: bad magic %#08x", ErrCorrupt, m)
	}
	version, codec := p[4], Codec(p[5]&codecMask)
	switch {
	case version != Version && version != VersionCompressed:
		return Header{}, fmt.Errorf("%w: unknown version %d (written by a newer tern?)", ErrCorrupt, p[4])
	case p[5]&^(FlagAppends|codecMask) != 0 || !codec.valid():
		return Header{}, fmt.Errorf("%w: unsupported flags %#02x", ErrCorrupt, p[5])
	case (version == VersionCompressed) != (codec != None):
		return Header{}, fmt.Errorf("%w: version %d with compression %s", ErrCorrupt, version, codec)
	case binary.LittleEndian.Uint16(p[6:]) != 0 || (version == Version && binary.LittleEndian.Uint32(p[44:]) != 0):
		return Header{}, fmt.Errorf("%w: reserved header bytes are not zero", ErrCorrupt)
	}
	h := Header{
		Length:     binary.LittleEndian.Uint32(p[8:]),
		CRC:        binary.LittleEndian.Uint32(p[12:]),
		BaseOffset: binary.LittleEndian.Uint64(p[16:]),
		Epoch:      binary.LittleEndian.Uint64(p[24:]),
		FirstTime:  int64(binary.LittleEndian.Uint64(p[32:])),
		Count:      binary.LittleEndian.Uint32(p[40:]),
		Flags:      p[5],
	}
	if h.Count == 0 {
		return Header{}, fmt.Errorf("%w: no entries", ErrCorrupt)
	}
	if h.Length <= HeaderBytes {
		return Header{}, fmt.Errorf("%w: length %d too small for %d entries", ErrCorrupt, h.Length, h.Count)
	}
	h.BodyBytes = h.Length - HeaderBytes
	if codec != None {
		// Checked before anything is allocated for the body.
		h.BodyBytes = binary.LittleEndian.Uint32(p[44:])
		if h.BodyBytes > MaxBodyBytes {
			return Header{}, fmt.Errorf("%w: compressed body of %d bytes declared, over the %d a batch may have", ErrCorrupt, h.BodyBytes, MaxBodyBytes)
		}
	}
	// Each entry takes at least 3 bytes.
	if uint64(h.BodyBytes) < 3*uint64(h.Count) {
		return Header{}, fmt.Errorf("%w: body of %d bytes too small for %d entries", ErrCorrupt, h.BodyBytes, h.Count)
	}
	if h.BaseOffset+uint64(h.Count) < h.BaseOffset {
		return Header{}, fmt.Errorf("%w: offsets overflow", ErrCorrupt)
	}
	return h, nil
}

// Batch is a batch whose header and CRC have been checked. Its entries alias
// the bytes it was decoded from, or for a compressed batch a buffer of its
// own that Decode allocated.
type Batch struct {
	Header
	body    []byte
	entries int // where the entries end in body, and the appends section starts
}

// Decode checks the batch at the start of p (header and CRC) and returns it,
// decompressing its body if it is compressed (into a new buffer of at most
// MaxBodyBytes). p may hold more bytes after the batch. It returns
// io.ErrUnexpectedEOF if p ends before the batch does, and an error wrapping
// ErrCorrupt if the bytes are not a valid batch, compressed bytes that do
// not decompress to the size declared included. It is safe for concurrent
// use.
func Decode(p []byte) (Batch, error) {
	h, err := ParseHeader(p)
	if err != nil {
		return Batch{}, err
	}
	if uint64(len(p)) < uint64(h.Length) {
		return Batch{}, io.ErrUnexpectedEOF
	}
	if crc := crc32.Checksum(p[crcStart:h.Length], castagnoli); crc != h.CRC {
		return Batch{}, fmt.Errorf("%w: crc %#08x, header says %#08x", ErrCorrupt, crc, h.CRC)
	}
	b := Batch{Header: h, body: p[HeaderBytes:h.Length]}
	if c := h.Codec(); c != None {
		if b.body, err = decompress(c, b.body, int(h.BodyBytes)); err != nil {
			return Batch{}, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	// Walk the entries once so that a batch that decodes is fully valid.
	rest, err := b.walk(b.body, nil)
	if err != nil {
		return Batch{}, err
	}
	b.entries = len(b.body) - len(rest)
	if h.Flags&FlagAppends == 0 {
		if len(rest) != 0 {
			return Batch{}, fmt.Errorf("%w: %d bytes after the last entry", ErrCorrupt, len(rest))
		}
		return b, nil
	}
	if err := checkSection(rest, h.Count); err != nil {
		return Batch{}, err
	}
	return b, nil
}

// Each calls fn for every entry in offset order and stops at fn's first error.
// The entries' bytes alias the batch; fn must copy what it keeps past the
// batch's lifetime. Properties is nil for entries without properties.
//
// Each accepts only the one encoding Builder writes (minimal varints, the
// first entry's time equal to the header's first time, property keys strictly
// ascending), so a batch that decodes re-encodes to the same bytes.
func (b Batch) Each(fn func(off uint64, e Entry) error) error {
	rest, err := b.walk(b.body[:b.entries], fn)
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: %d bytes after the last entry", ErrCorrupt, len(rest))
	}
	return err
}

// Appends appends to dst the appends the batch holds, in entry order, and
// returns it: those of its appends section, or one anonymous append of
// every entry for a batch without one.
func (b Batch) Appends(dst []Append) []Append {
	if b.Flags&FlagAppends == 0 {
		return append(dst, Append{Count: b.Count})
	}
	parseSection(b.body[b.entries:], func(a Append) { dst = append(dst, a) }) // checked by Decode
	return dst
}

// walk decodes the entries at the start of p, calls fn for each, and
// returns the bytes after them. With fn nil it only checks them, and builds
// no Properties.
//
// Each entry with properties costs one allocation, its map: a key that
// the entry before had at the same place reuses that entry's string, so a
// batch whose entries have the same keys allocates each key once.
func (b Batch) walk(p []byte, fn func(off uint64, e Entry) error) ([]byte, error) {
	var keys []string // the keys of the last entry with properties, in order
	for i := range b.Count {
		var e Entry
		var err error
		delta, n := binary.Varint(p)
		if !minimal(p, n) || (i == 0 && delta != 0) {
			return nil, b.bad(i, "time")
		}
		p = p[n:]
		e.Time = b.FirstTime + delta
		if e.Payload, p, err = bytesField(p); err != nil {
			return nil, b.bad(i, "payload")
		}
		nprops, n := binary.Uvarint(p)
		if !minimal(p, n) || nprops > uint64(len(p)) {
			return nil, b.bad(i, "property count")
		}
		p = p[n:]
		if nprops > 0 && fn != nil {
			e.Properties = make(map[string][]byte, nprops)
		}
		var prev []byte
		for j := range nprops {
			var k, v []byte
			if k, p, err = bytesField(p); err != nil || (j > 0 && bytes.Compare(prev, k) >= 0) {
				return nil, b.bad(i, "property key")
			}
			if v, p, err = bytesField(p); err != nil {
				return nil, b.bad(i, "property value")
			}
			prev = k
			if fn == nil {
				continue
			}
			if j < uint64(len(keys)) && keys[j] == string(k) { // compared without a copy
				e.Properties[keys[j]] = v
				continue
			}
			key := string(k)
			if j < uint64(len(keys)) {
				keys[j] = key
			} else {
				keys = append(keys, key)
			}
			e.Properties[key] = v
		}
		if fn == nil {
			continue
		}
		if err := fn(b.BaseOffset+uint64(i), e); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (b Batch) bad(i uint32, field string) error {
	return fmt.Errorf("%w: entry %d (offset %d): bad %s", ErrCorrupt, i, b.BaseOffset+uint64(i), field)
}

func bytesField(p []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(p)
	if !minimal(p, k) || n > uint64(len(p)-k) {
		return nil, nil, ErrCorrupt
	}
	end := k + int(n)
	return p[k:end:end], p[end:], nil
}

// minimal reports whether the varint of n bytes at the start of p was decoded
// (n > 0) and has no redundant trailing zero groups, as binary.AppendUvarint
// and AppendVarint write it.
func minimal(p []byte, n int) bool {
	return n == 1 || (n > 1 && p[n-1] != 0)
}
