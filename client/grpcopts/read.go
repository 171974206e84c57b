package grpcopts

import (
	"bytes"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// A reader's stream carries ReadResponses of up to about 1 MiB of entries.
// Through proto, the server built an Entry message for every entry and
// encoded each property by reflection, and the client allocated an Entry
// message and a copy of the payload for every entry, and built each
// property map by reflection. EncodedRead and DecodedRead carry the same
// bytes: the server encodes a response straight from its entries, and the
// client decodes it into one copy of the response, which its entries alias,
// and one slice of entries.

// Field numbers of api/ternpb/tern.proto.
const (
	fieldReadEntries = 1 // ReadResponse.entries
	fieldReadTick    = 2 // ReadResponse.tick
	fieldEntryOffset = 1 // Entry.offset
	fieldTickTime    = 1 // TimeTick.time
	fieldTickOffset  = 2 // TimeTick.offset
)

// DecodedRead is a ReadResponse decoded for a client stream's RecvMsg. Its
// entries' payloads and property values alias one copy of the response
// that nothing else uses or reuses: they are the receiver's, and an entry
// kept keeps the response's bytes (about 1 MiB at most) in memory. The
// property keys are strings of their own.
type DecodedRead struct {
	Entries []ReadEntry
	HasTick bool // the response has a tick
	Tick    ReadTick
}

// ReadEntry is an entry of a ReadResponse.
type ReadEntry struct {
	Offset uint64
	Entry
}

// ReadTick is a ReadResponse's time tick.
type ReadTick struct {
	Time   uint64
	Offset uint64
}

// unmarshalRead decodes data into r, copying it into one new buffer, which
// r's entries alias. bytes.Join allocates it without zeroing it first, as
// proto.Unmarshal's copies of payloads were.
func unmarshalRead(data mem.BufferSlice, r *DecodedRead) error {
	parts := make([][]byte, len(data))
	for i, d := range data {
		parts[i] = d.ReadOnlyData()
	}
	return parseRead(bytes.Join(parts, nil), r)
}

// parseRead decodes b, a ReadResponse, into r as proto.Unmarshal would
// decode it into the generated message: unknown fields, and known ones of
// another wire type, are skipped; the last of a repeated scalar wins; a
// tick given twice is merged; strings must be UTF-8.
func parseRead(b []byte, r *DecodedRead) error {
	*r = DecodedRead{}
	n := 0 // the entries, to size the slice once
	err := walk(b, "ReadResponse", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		if num == fieldReadEntries && typ == protowire.BytesType {
			n++
		}
		return skip, nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		r.Entries = make([]ReadEntry, 0, n)
	}
	return walk(b, "ReadResponse", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case num == fieldReadEntries && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n >= 0 {
				e, err := parseReadEntry(v)
				if err != nil {
					return 0, err
				}
				r.Entries = append(r.Entries, e)
			}
			return n, nil
		case num == fieldReadTick && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n >= 0 {
				r.HasTick = true
				if err := r.Tick.parse(v); err != nil {
					return 0, err
				}
			}
			return n, nil
		}
		return skip, nil
	})
}

// parseReadEntry decodes an Entry of a ReadResponse, offset included.
func parseReadEntry(b []byte) (ReadEntry, error) {
	var e ReadEntry
	err := walk(b, "ReadResponse", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		if num == fieldEntryOffset && typ == protowire.VarintType {
			var n int
			e.Offset, n = protowire.ConsumeVarint(b)
			return n, nil
		}
		return e.field(num, typ, b)
	})
	return e, err
}

// parse merges a TimeTick into t.
func (t *ReadTick) parse(b []byte) error {
	return walk(b, "ReadResponse", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case num == fieldTickTime && typ == protowire.VarintType:
			var n int
			t.Time, n = protowire.ConsumeVarint(b)
			return n, nil
		case num == fieldTickOffset && typ == protowire.VarintType:
			var n int
			t.Offset, n = protowire.ConsumeVarint(b)
			return n, nil
		}
		return skip, nil
	})
}

// EncodedRead is a ReadResponse of entries, no tick, for a server stream's
// SendMsg: the codec encodes it as proto encodes the generated message,
// into a buffer from the pool that gRPC gives back once it is sent. The
// entries are only read, while SendMsg encodes them.
type EncodedRead struct {
	Entries []ReadEntry
}

// readEntrySize is the bytes of e as an element of ReadResponse.entries.
func readEntrySize(e ReadEntry) int {
	n := readEntryFieldsSize(e)
	return protowire.SizeTag(fieldReadEntries) + protowire.SizeBytes(n)
}

func readEntryFieldsSize(e ReadEntry) int {
	n := entryFieldsSize(e.Entry)
	if e.Offset != 0 {
		n += protowire.SizeTag(fieldEntryOffset) + protowire.SizeVarint(e.Offset)
	}
	return n
}

// marshalRead encodes r.
func marshalRead(r *EncodedRead) mem.BufferSlice {
	size := 0
	for _, e := range r.Entries {
		size += readEntrySize(e)
	}
	var buf *[]byte
	if mem.IsBelowBufferPoolingThreshold(size) {
		b := make([]byte, 0, size)
		buf = &b
	} else {
		buf = bufferPool.Get(size)
	}
	b := (*buf)[:0]
	for _, e := range r.Entries {
		b = protowire.AppendTag(b, fieldReadEntries, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(readEntryFieldsSize(e)))
		if e.Offset != 0 {
			b = protowire.AppendTag(b, fieldEntryOffset, protowire.VarintType)
			b = protowire.AppendVarint(b, e.Offset)
		}
		b = appendEntryFields(b, e.Entry)
	}
	*buf = b
	if mem.IsBelowBufferPoolingThreshold(size) {
		return mem.BufferSlice{mem.SliceBuffer(b)}
	}
	return mem.BufferSlice{mem.NewBuffer(buf, bufferPool)}
}
