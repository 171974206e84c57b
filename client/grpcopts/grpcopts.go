// Package grpcopts holds what the remote client and the server agree on about
// their gRPC connections: message limits, flow-control windows, and the
// buffer pool both sides parse and encode messages with.
package grpcopts

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// FromHeader is the response header in which the server tells a Read stream
// the offset it opened at: from_start and from_end resolved to the log's
// start or end then (a decimal number). A client that reconnects a reader
// which returned no entry yet reopens there, so that it skips nothing
// appended meanwhile.
const FromHeader = "tern-from"

// MaxMessageBytes bounds one gRPC message each way: an append request, and
// a response of the Read and Subscribe streams. It leaves room for a batch
// of entries of tern.DefaultMaxEntryBytes and more.
const MaxMessageBytes = 64 << 20

// WindowBytes is the HTTP/2 flow-control window, per stream and per
// connection, that both sides advertise. gRPC's default starts at 64 KiB and
// grows with its bandwidth estimate; an append stream keeps several requests
// of up to a few MiB in flight, and at the default window its sender would
// stop for a window update on most round trips.
const WindowBytes = 16 << 20

// bufferPool replaces gRPC's default pool, whose tiers jump from 32 KiB to
// 1 MiB: a request of 33 KiB (32 entries of 1 KiB, a common group) took a
// 1 MiB buffer, zeroed on every Get. Tiers at every power of two keep a
// buffer within twice the message, and nothing is zeroed.
var bufferPool mem.BufferPool = new(tieredPool)

// Server returns the options of a gRPC server of the Tern service.
func Server() []grpc.ServerOption {
	return []grpc.ServerOption{
		experimental.BufferPool(bufferPool),
		grpc.ForceServerCodecV2(codec{}),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.InitialWindowSize(WindowBytes),
		grpc.InitialConnWindowSize(WindowBytes),
	}
}

// Dial returns the options of a client connection to a Tern server,
// besides its credentials.
func Dial() []grpc.DialOption {
	return []grpc.DialOption{
		experimental.WithBufferPool(bufferPool),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes), grpc.ForceCodecV2(codec{})),
		grpc.WithInitialWindowSize(WindowBytes),
		grpc.WithInitialConnWindowSize(WindowBytes),
	}
}
