package grpcopts

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ternwal/tern/client/ternpb"
)

// The answers of an AppendStream take the same shortcut as its requests
// (append.go): the server encodes each batch's result straight into the
// response, and the client decodes a response into a slice it reuses, where
// proto allocated a message per result at each end.

// Field numbers of api/ternpb/tern.proto.
const (
	fieldResponseResults = 1 // AppendStreamResponse.results
	fieldResultOffset    = 1 // AppendResult.offset
	fieldResultError     = 2 // AppendResult.error
)

// EncodedResults is an AppendStreamResponse for a server stream's SendMsg,
// built a result at a time. gRPC may hold its bytes after SendMsg returns:
// the next response needs an EncodedResults of its own.
type EncodedResults struct {
	b []byte
	n int
}

// Offset adds the result of a batch appended at off.
func (r *EncodedResults) Offset(off uint64) {
	r.grow()
	r.b = protowire.AppendTag(r.b, fieldResponseResults, protowire.BytesType)
	if off == 0 { // proto3 leaves out a zero
		r.b = protowire.AppendVarint(r.b, 0)
	} else {
		r.b = protowire.AppendVarint(r.b, uint64(protowire.SizeTag(fieldResultOffset)+protowire.SizeVarint(off)))
		r.b = protowire.AppendTag(r.b, fieldResultOffset, protowire.VarintType)
		r.b = protowire.AppendVarint(r.b, off)
	}
	r.n++
}

// Error adds the result of a batch that failed with e.
func (r *EncodedResults) Error(e *ternpb.Error) {
	n := proto.Size(e)
	r.grow()
	r.b = protowire.AppendTag(r.b, fieldResponseResults, protowire.BytesType)
	r.b = protowire.AppendVarint(r.b, uint64(protowire.SizeTag(fieldResultError)+protowire.SizeBytes(n)))
	r.b = protowire.AppendTag(r.b, fieldResultError, protowire.BytesType)
	r.b = protowire.AppendVarint(r.b, uint64(n))
	var err error
	if r.b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(r.b, e); err != nil {
		// An Error holds strings, which Proto (rpcerr) makes valid.
		panic(fmt.Sprintf("grpcopts: encode an append's error: %v", err))
	}
	r.n++
}

// Len returns the number of results added.
func (r *EncodedResults) Len() int { return r.n }

// grow gives an empty response room for a few dozen results.
func (r *EncodedResults) grow() {
	if r.b == nil {
		r.b = make([]byte, 0, 512)
	}
}

// Result is a batch's result in a DecodedResults: its first offset, or why
// it failed.
type Result struct {
	Offset uint64
	Err    *ternpb.Error // nil when the batch was appended
}

// DecodedResults is an AppendStreamResponse decoded for a client stream's
// RecvMsg. Each RecvMsg reuses Results.
type DecodedResults struct {
	Results []Result
}

func unmarshalResults(data mem.BufferSlice, r *DecodedResults) error {
	return inOneBuffer(data, func(b []byte) error { return parseResults(b, r) })
}

// parseResults decodes b into r as proto.Unmarshal would decode it into the
// generated message; nothing in r aliases b.
func parseResults(b []byte, r *DecodedResults) error {
	r.Results = r.Results[:0]
	return walk(b, "AppendStreamResponse", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		if num != fieldResponseResults || typ != protowire.BytesType {
			return skip, nil
		}
		v, n := protowire.ConsumeBytes(b)
		if n >= 0 {
			res, err := parseResult(v)
			if err != nil {
				return 0, err
			}
			r.Results = append(r.Results, res)
		}
		return n, nil
	})
}

func parseResult(b []byte) (Result, error) {
	var res Result
	err := walk(b, "AppendStreamResponse", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case num == fieldResultOffset && typ == protowire.VarintType:
			var n int
			res.Offset, n = protowire.ConsumeVarint(b)
			return n, nil
		case num == fieldResultError && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n >= 0 {
				if res.Err == nil {
					res.Err = new(ternpb.Error)
				}
				// A message field given twice is merged, as proto does.
				if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(v, res.Err); err != nil {
					return 0, fmt.Errorf("grpcopts: AppendResult.error: %w", err)
				}
			}
			return n, nil
		}
		return skip, nil
	})
	return res, err
}
