package grpcopts

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// An AppendStream carries every append of a remote writer, usually a few
// dozen small batches per request. Through proto, the client built an
// Entry message per entry (its payload copied) and sized the request three
// times, and the server allocated an Entry and a Batch message per entry and
// copied every payload out of the request; at 1 KiB entries that was a
// quarter of the CPU of an append. The types here carry the same bytes on
// the wire: the client encodes each batch once, straight from its entries,
// and the server decodes a request into one slice of entries whose payloads
// alias the request's buffer.

// Field numbers of api/ternpb/tern.proto.
const (
	fieldRequestLog      = 1 // AppendStreamRequest.log
	fieldRequestEpoch    = 2 // AppendStreamRequest.epoch
	fieldRequestBatches  = 3 // AppendStreamRequest.batches
	fieldRequestShared   = 4 // AppendStreamRequest.shared
	fieldRequestProducer = 5 // AppendStreamRequest.producer
	fieldRequestAcked    = 6 // AppendStreamRequest.acked
	fieldBatchEntries    = 1 // Batch.entries
	fieldBatchSeq        = 2 // Batch.seq
	fieldBatchIfEnd      = 3 // Batch.if_end
	fieldEntryPayload    = 2 // Entry.payload
	fieldEntryProps      = 3 // Entry.properties, a map<string, bytes>
	fieldEntryTime       = 4 // Entry.time_unix_nano
	fieldMapKey          = 1
	fieldMapValue        = 2
)

// EncodedAppend is an AppendStreamRequest for a client stream's SendMsg,
// whose batches EncodeBatch has encoded already. The codec sends the
// batches without copying them and does not keep or free them: the sender
// owns them, and may send them again on another stream (a retry) or give
// them back with ReleaseBatch once the server has answered them.
type EncodedAppend struct {
	Log      string
	Epoch    uint64
	Shared   bool
	Producer uint64
	Acked    uint64
	Batches  []*[]byte // from EncodeBatch
}

// BatchHeader is what a Batch carries besides its entries.
type BatchHeader struct {
	Seq   uint64 // 0: none
	IfEnd bool   // End is set
	End   uint64
}

// size returns the bytes h adds to a Batch message.
func (h BatchHeader) size() int {
	n := 0
	if h.Seq != 0 {
		n += protowire.SizeTag(fieldBatchSeq) + protowire.SizeVarint(h.Seq)
	}
	if h.IfEnd {
		n += protowire.SizeTag(fieldBatchIfEnd) + protowire.SizeVarint(h.End)
	}
	return n
}

// BatchSize returns the bytes of the Batch message of es and h.
func BatchSize(es []Entry, h BatchHeader) int {
	n := h.size()
	for _, e := range es {
		n += entrySize(e)
	}
	return n
}

// EncodeBatch encodes a Batch of es and h, whose message is msgSize bytes
// (BatchSize), as a field of an AppendStreamRequest, into a buffer from
// the pool: the entries' one copy on the client.
func EncodeBatch(es []Entry, msgSize int, h BatchHeader) *[]byte {
	size := protowire.SizeTag(fieldRequestBatches) + protowire.SizeBytes(msgSize)
	buf := bufferPool.Get(size)
	b := protowire.AppendTag((*buf)[:0], fieldRequestBatches, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(msgSize))
	for _, e := range es {
		b = appendEntry(b, e)
	}
	if h.Seq != 0 {
		b = protowire.AppendTag(b, fieldBatchSeq, protowire.VarintType)
		b = protowire.AppendVarint(b, h.Seq)
	}
	if h.IfEnd {
		b = protowire.AppendTag(b, fieldBatchIfEnd, protowire.VarintType)
		b = protowire.AppendVarint(b, h.End)
	}
	*buf = b
	return buf
}

// ReleaseBatch gives a batch from EncodeBatch back to the pool. It must not
// be sent again, and no stream may still be sending it.
func ReleaseBatch(b *[]byte) { bufferPool.Put(b) }

func entrySize(e Entry) int {
	n := entryFieldsSize(e)
	return protowire.SizeTag(fieldBatchEntries) + protowire.SizeBytes(n)
}

func entryFieldsSize(e Entry) int {
	n := 0
	if len(e.Payload) > 0 {
		n += protowire.SizeTag(fieldEntryPayload) + protowire.SizeBytes(len(e.Payload))
	}
	for k, v := range e.Properties {
		n += protowire.SizeTag(fieldEntryProps) + protowire.SizeBytes(mapEntrySize(k, v))
	}
	if e.UnixNano != 0 {
		n += protowire.SizeTag(fieldEntryTime) + protowire.SizeVarint(uint64(e.UnixNano))
	}
	return n
}

func mapEntrySize(k string, v []byte) int {
	return protowire.SizeTag(fieldMapKey) + protowire.SizeBytes(len(k)) +
		protowire.SizeTag(fieldMapValue) + protowire.SizeBytes(len(v))
}

// appendEntry appends e, as an element of Batch.entries, to b as proto
// encodes it (a zero time is left out: the server's clock).
func appendEntry(b []byte, e Entry) []byte {
	b = protowire.AppendTag(b, fieldBatchEntries, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(entryFieldsSize(e)))
	return appendEntryFields(b, e)
}

// appendEntryFields appends the fields of e but its offset to b as proto
// encodes them.
func appendEntryFields(b []byte, e Entry) []byte {
	if len(e.Payload) > 0 {
		b = protowire.AppendTag(b, fieldEntryPayload, protowire.BytesType)
		b = protowire.AppendBytes(b, e.Payload)
	}
	for k, v := range e.Properties {
		b = protowire.AppendTag(b, fieldEntryProps, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(mapEntrySize(k, v)))
		b = protowire.AppendTag(b, fieldMapKey, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, fieldMapValue, protowire.BytesType)
		b = protowire.AppendBytes(b, v)
	}
	if e.UnixNano != 0 {
		b = protowire.AppendTag(b, fieldEntryTime, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.UnixNano))
	}
	return b
}

// marshalAppend encodes r: a header of its own, then the batches, not
// copied, which stay the sender's.
func marshalAppend(r *EncodedAppend) mem.BufferSlice {
	h := make([]byte, 0, len(r.Log)+64) // tags, the log's length and the numbers take under 64
	if r.Log != "" {
		h = protowire.AppendTag(h, fieldRequestLog, protowire.BytesType)
		h = protowire.AppendString(h, r.Log)
	}
	if r.Epoch != 0 {
		h = protowire.AppendTag(h, fieldRequestEpoch, protowire.VarintType)
		h = protowire.AppendVarint(h, r.Epoch)
	}
	if r.Shared {
		h = protowire.AppendTag(h, fieldRequestShared, protowire.VarintType)
		h = protowire.AppendVarint(h, 1)
	}
	if r.Producer != 0 {
		h = protowire.AppendTag(h, fieldRequestProducer, protowire.VarintType)
		h = protowire.AppendVarint(h, r.Producer)
	}
	if r.Acked != 0 {
		h = protowire.AppendTag(h, fieldRequestAcked, protowire.VarintType)
		h = protowire.AppendVarint(h, r.Acked)
	}
	bs := make(mem.BufferSlice, 0, 1+len(r.Batches))
	bs = append(bs, mem.SliceBuffer(h))
	for _, b := range r.Batches {
		bs = append(bs, mem.SliceBuffer(*b))
	}
	return bs
}

// DecodedAppend is an AppendStreamRequest decoded for a server stream's
// RecvMsg: the entries of every batch in one slice, whose payloads and
// property values alias the request's buffer, which nothing else uses.
type DecodedAppend struct {
	Log      string
	Epoch    uint64
	Shared   bool
	Producer uint64
	Acked    uint64
	Entries  []Entry
	Ends     []int         // batch i is Entries[Ends[i-1]:Ends[i]], with Ends[-1] = 0
	Headers  []BatchHeader // batch i's is Headers[i]

	buf *[]byte // what the entries alias, from bufferPool
}

// Release returns the request's buffer to the pool: the entries' bytes
// must not be used after it.
func (r *DecodedAppend) Release() {
	if r.buf != nil {
		bufferPool.Put(r.buf)
		r.buf = nil
	}
	r.Entries = nil
}

// Entry is an entry of a batch appended through an AppendStream.
type Entry struct {
	Payload    []byte
	Properties map[string][]byte
	UnixNano   int64
}

// unmarshalAppend decodes data into r, copying it into one buffer of its
// own, which r's entries alias until r.Release.
func unmarshalAppend(data mem.BufferSlice, r *DecodedAppend) error {
	buf := bufferPool.Get(data.Len())
	data.CopyTo(*buf)
	if err := parseAppend(*buf, r); err != nil {
		bufferPool.Put(buf)
		return err
	}
	r.buf = buf
	return nil
}

var errInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// parseAppend decodes b, an AppendStreamRequest, into r as proto.Unmarshal
// would decode it into the generated message: unknown fields, and known
// ones of another wire type, are skipped; the last of a repeated scalar
// wins; strings must be UTF-8.
func parseAppend(b []byte, r *DecodedAppend) error {
	*r = DecodedAppend{}
	return walk(b, "AppendStreamRequest", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case num == fieldRequestLog && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n >= 0 && !utf8.Valid(v) {
				return 0, fmt.Errorf("grpcopts: AppendStreamRequest.log: %w", errInvalidUTF8)
			}
			r.Log = string(v)
			return n, nil
		case num == fieldRequestEpoch && typ == protowire.VarintType:
			var n int
			r.Epoch, n = protowire.ConsumeVarint(b)
			return n, nil
		case num == fieldRequestShared && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			r.Shared = v != 0
			return n, nil
		case num == fieldRequestProducer && typ == protowire.VarintType:
			var n int
			r.Producer, n = protowire.ConsumeVarint(b)
			return n, nil
		case num == fieldRequestAcked && typ == protowire.VarintType:
			var n int
			r.Acked, n = protowire.ConsumeVarint(b)
			return n, nil
		case num == fieldRequestBatches && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n >= 0 {
				if err := r.parseBatch(v); err != nil {
					return 0, err
				}
			}
			return n, nil
		}
		return skip, nil
	})
}

// parseBatch appends a Batch's entries to r and ends a batch there.
func (r *DecodedAppend) parseBatch(b []byte) error {
	var h BatchHeader
	err := walk(b, "AppendStreamRequest", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case num == fieldBatchSeq && typ == protowire.VarintType:
			var n int
			h.Seq, n = protowire.ConsumeVarint(b)
			return n, nil
		case num == fieldBatchIfEnd && typ == protowire.VarintType:
			var n int
			h.End, n = protowire.ConsumeVarint(b)
			h.IfEnd = true
			return n, nil
		case num != fieldBatchEntries || typ != protowire.BytesType:
			return skip, nil
		}
		v, n := protowire.ConsumeBytes(b)
		if n >= 0 {
			e, err := parseEntry(v)
			if err != nil {
				return 0, err
			}
			r.Entries = append(r.Entries, e)
		}
		return n, nil
	})
	r.Ends = append(r.Ends, len(r.Entries))
	r.Headers = append(r.Headers, h)
	return err
}

func parseEntry(b []byte) (Entry, error) {
	var e Entry
	err := walk(b, "AppendStreamRequest", e.field)
	return e, err
}

// field decodes a field of an Entry message into e, as a walk's field
// function: its offset, which only reads set, is skipped.
func (e *Entry) field(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
	switch {
	case num == fieldEntryPayload && typ == protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		e.Payload = v
		return n, nil
	case num == fieldEntryProps && typ == protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n >= 0 {
			k, val, err := parseMapEntry(v)
			if err != nil {
				return 0, err
			}
			if e.Properties == nil {
				e.Properties = map[string][]byte{}
			}
			e.Properties[k] = val
		}
		return n, nil
	case num == fieldEntryTime && typ == protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		e.UnixNano = int64(v)
		return n, nil
	}
	return skip, nil
}

func parseMapEntry(b []byte) (string, []byte, error) {
	var k, val []byte
	err := walk(b, "Entry.properties", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case num == fieldMapKey && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n >= 0 && !utf8.Valid(v) {
				return 0, fmt.Errorf("grpcopts: Entry.properties key: %w", errInvalidUTF8)
			}
			k = v
			return n, nil
		case num == fieldMapValue && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			val = v
			return n, nil
		}
		return skip, nil
	})
	return string(k), val, err
}

// skip is what a walk's field function returns for a field it does not
// decode: walk skips it, as proto.Unmarshal skips an unknown field or a
// known one of another wire type.
const skip = math.MinInt

// walk decodes the fields of b, a message of type what, in order. field gets
// each field's number and wire type and the bytes after its tag, and returns
// how many of them the value took (a protowire error code when negative),
// skip, or an error of its own.
func walk(b []byte, what string, field func(num protowire.Number, typ protowire.Type, b []byte) (int, error)) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return malformed(what, n)
		}
		b = b[n:]
		m, err := field(num, typ, b)
		if err != nil {
			return err
		}
		if m == skip {
			m = protowire.ConsumeFieldValue(num, typ, b)
		}
		if m < 0 {
			return malformed(what, m)
		}
		b = b[m:]
	}
	return nil
}

// consumeTag is protowire.ConsumeTag, which also refuses a field number
// above protowire.MaxValidNumber as proto.Unmarshal does.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -2 // protowire.ParseError(-2) is "invalid field number"
	}
	return num, typ, n
}

func malformed(what string, n int) error {
	return fmt.Errorf("grpcopts: malformed %s: %w", what, protowire.ParseError(n))
}
