package grpcopts

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// codec encodes messages as gRPC's own proto codec does, but in buffers
// from bufferPool: gRPC's codec takes them from its default pool, whatever
// pool the connection has, and that pool's largest tier is 1 MiB, so every
// larger message (a replica's answer to a read of a fragment, a big batch)
// was a new buffer, zeroed. A message that arrives in one buffer is decoded
// in place: proto.Unmarshal copies what it keeps. Append streams' requests
// and answers (append.go, results.go) and a reader's responses (read.go)
// take shorter paths.
type codec struct{}

var _ encoding.CodecV2 = codec{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	switch r := v.(type) {
	case *EncodedAppend:
		return marshalAppend(r), nil
	case *EncodedResults:
		return mem.BufferSlice{mem.SliceBuffer(r.b)}, nil
	case *EncodedRead:
		return marshalRead(r), nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("grpcopts: cannot encode %T: not a proto.Message", v)
	}
	// The size, cached in m, is what MarshalAppend writes with UseCachedSize.
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		return mem.BufferSlice{mem.SliceBuffer(b)}, err
	}
	buf := bufferPool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		bufferPool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, bufferPool)}, nil
}

// Decoding is a message a server's stream handler receives into when it
// reports a malformed message itself: gRPC answers a stream message its
// codec cannot decode with INTERNAL at once, before the handler can say
// INVALID_ARGUMENT. Unmarshal into a *Decoding decodes into M and keeps the
// error in Err, returning nil.
type Decoding struct {
	M   any
	Err error
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch r := v.(type) {
	case *Decoding:
		r.Err = c.Unmarshal(data, r.M)
		return nil
	case *DecodedAppend:
		return unmarshalAppend(data, r)
	case *DecodedResults:
		return unmarshalResults(data, r)
	case *DecodedRead:
		return unmarshalRead(data, r)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("grpcopts: cannot decode into %T: not a proto.Message", v)
	}
	return inOneBuffer(data, func(b []byte) error { return proto.Unmarshal(b, m) })
}

// inOneBuffer calls decode with data's bytes in one slice: its only buffer,
// or a copy gathered from its buffers, which goes back to the pool when
// decode returns. decode must not keep the slice.
func inOneBuffer(data mem.BufferSlice, decode func([]byte) error) error {
	if len(data) == 1 {
		return decode(data[0].ReadOnlyData())
	}
	buf := data.MaterializeToBuffer(bufferPool)
	defer buf.Free()
	return decode(buf.ReadOnlyData())
}

// tieredPool is a mem.BufferPool with a tier at every power of two up to
// maxTierBytes. It does not zero the buffers it hands out, as gRPC's pools
// do: gRPC writes every byte of a buffer it gets (a frame read into it, a
// message encoded or gathered into it) before it reads any.
type tieredPool struct {
	tiers [maxTierShift + 1]sync.Pool // tiers[i] holds buffers of capacity 1<<i
}

// maxTierShift is the largest tier, 1<<maxTierShift bytes: that of the
// largest message (MaxMessageBytes). Larger buffers are not kept.
const maxTierShift = 26

var _ mem.BufferPool = (*tieredPool)(nil)

func (p *tieredPool) Get(size int) *[]byte {
	tier := bits.Len(uint(max(size, 1) - 1)) // the smallest with 1<<tier >= size
	if tier > maxTierShift {
		b := make([]byte, size)
		return &b
	}
	if b, ok := p.tiers[tier].Get().(*[]byte); ok {
		*b = (*b)[:size]
		return b
	}
	b := make([]byte, size, 1<<tier)
	return &b
}

func (p *tieredPool) Put(b *[]byte) {
	c := cap(*b)
	tier := bits.Len(uint(c)) - 1 // the largest with 1<<tier <= c
	if c == 0 || tier > maxTierShift || c != 1<<tier {
		return // not one of ours
	}
	p.tiers[tier].Put(b)
}
