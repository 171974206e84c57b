package replica

import (
	"context"
	"fmt"

	"github.com/ternwal/tern/client/rpcerr"
)

// SegmentID names a segment on a replica.
type SegmentID struct {
	Log uint64 // the log's ID
	Seq uint64 // the segment's sequence number in the log
}

func (id SegmentID) String() string { return fmt.Sprintf("%d/%d", id.Log, id.Seq) }

// The errors of a replica are defined in package rpcerr, with the gRPC
// status each crosses as, so errors.Is works the same on a *Local and on a
// *Conn: rpcerr.ErrSegmentFenced, ErrSegmentSealed, ErrFragmentGap,
// ErrReplicaFull, ErrSegmentNotFound, ErrFragmentMismatch, ErrInvalid,
// ErrReplicaClosed and ErrJournalCorrupt.

// CorruptError reports damage that Open will not repair, found in a file at
// a position.
type CorruptError struct {
	Path string
	Pos  int64
	Err  error // what is wrong there
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("replica: %s is corrupt at byte %d: %v", e.Path, e.Pos, e.Err)
}

// Unwrap lets errors.Is match rpcerr.ErrJournalCorrupt and the underlying cause.
func (e *CorruptError) Unwrap() []error { return []error{rpcerr.ErrJournalCorrupt, e.Err} }

// Object is an object that Offload stores: the fragments [From, To) of a
// segment, concatenated, at Key.
type Object struct {
	Key      string
	From, To uint64
}

// Node is one replica as a writer or recoverer reaches it: a *Conn over
// gRPC, or a *Local in process. Its methods are safe for concurrent use and
// return the errors of this package.
type Node interface {
	// Stream opens an ordered, pipelined stream of adds to seg by epoch.
	// onDurable is called, in order, from one goroutine, with the segment's
	// durable fragment count each time it grows due to this stream's adds;
	// onErr is called at most once, when the stream fails (after which
	// nothing more is called). Cancelling ctx fails the stream.
	Stream(ctx context.Context, seg SegmentID, epoch uint64, onDurable func(count uint64), onErr func(error)) (Sender, error)
	// Fence refuses adds below epoch from now on and returns the durable
	// fragment count once no add below epoch can become durable any more.
	Fence(ctx context.Context, seg SegmentID, epoch uint64) (uint64, error)
	// List returns the sizes of the durable fragments 0..count-1.
	List(ctx context.Context, seg SegmentID) ([]int64, error)
	// Read reads durable fragment n from off into p, as io.ReaderAt does:
	// fewer than len(p) bytes only at the fragment's end, then with io.EOF.
	Read(ctx context.Context, seg SegmentID, n uint64, off int64, p []byte) (int, error)
	// Seal discards the fragments from count on and closes the segment to
	// adds.
	Seal(ctx context.Context, seg SegmentID, count uint64) error
	// Offload uploads the fragments of a sealed segment to the bucket as
	// objs, which cover them all in order.
	Offload(ctx context.Context, seg SegmentID, objs []Object) error
	// Drop deletes the segment; dropping an unknown segment is no error.
	Drop(ctx context.Context, seg SegmentID) error
}

// Sender sends fragments in order: n must be 0, 1, 2, ... continuing from
// the segment's count when the stream opened (or any n already stored, which
// is idempotent). sum is the fragment's frame checksum, FrameSum(n, data),
// computed once by the caller for all the replicas: they write it as it
// came, without computing it again. Send does not wait for durability; it
// may block for flow control. The caller must not modify data after
// passing it to Send: a *Local keeps it as the replica's in-memory copy.
// Send after the stream failed returns the error. Close ends the stream
// (without waiting for outstanding acks) and releases it; after Close,
// onErr is not called for the stream's end. A Sender is used by one
// goroutine at a time, except that Close may be called concurrently with
// Send.
type Sender interface {
	Send(n uint64, data []byte, sum uint32) error
	Close() error
}

// signal sends to c, a channel of capacity 1, unless it is full.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
