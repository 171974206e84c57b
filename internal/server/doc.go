// Package server is the gRPC service of tern serve: the Tern API of
// api/ternpb, implemented on an embedded tern.Client; and the assembly of a
// whole server around it (run.go): Start opens etcd (embedded or external),
// the data directory and its object store, joins a cluster, and serves
// gRPC and HTTP (metrics, health, pprof) until Close. tern serve is a
// Config and a call to Start; a test can start a server the same way.
//
// To serve the API alone, the caller builds and runs the grpc.Server with grpcopts.Server(), and
// calls Register. A gRPC server receives messages of at most 4 MiB by
// default, less than one entry may be (tern.DefaultMaxEntryBytes, 8 MiB);
// grpcopts.Server and grpcopts.Dial raise the limit to
// grpcopts.MaxMessageBytes, and set the flow-control windows and buffer pool the
// append streams need. A log whose MaxEntryBytes is over the message limit
// can hold entries that cannot be sent.
//
// # Errors
//
// Every error is a gRPC status built by rpcerr.Status: a code and an
// ErrorInfo whose reason names Tern's error (see api/ternpb/tern.proto), so
// that rpcerr.Error on the client gives back an error that matches the same
// sentinel (errors.Is(err, tern.ErrFenced)). A failed batch in AppendStream
// is an AppendResult whose error is rpcerr.Proto of the error, and the
// stream goes on.
//
// # Writers
//
// OpenWriter opens a tern.Writer session, a new epoch or the one asked
// for, and keeps it, keyed by log and epoch, until a newer session is opened
// on the log (the older ones are then let go), CloseWriter ends it, the log
// is deleted, or the Server closes (the sessions stay open: Detach). Appends
// name the epoch, or ask for the log's shared producer, which the Server
// keeps under epoch 0. An epoch the Server does not hold is reopened (with
// tern.OnlyReopen) if it is still the log's newest, one reopening per log
// at a time: after a restart, or on the node a log moved to. Otherwise the
// append fails with FAILED_PRECONDITION (FENCED). A held writer that fails
// with ErrFenced though no newer session opened here lost its claim to
// another node's reopening: the Server lets it go and answers UNAVAILABLE,
// and the client sends the append again, to where the log is now.
//
// # Streams
//
// AppendStream takes requests of one or more batches and answers each
// request, in order, with one result per batch once the batch is durable or
// has failed; a failed batch fails alone. The batches are handed to the
// library as they arrive, without waiting, so the group commit takes every
// batch of every connection queued while the previous round was syncing.
// Each request's bytes are taken from the Server's append budget
// (Options.AppendBytes, shared with unary Append) until the library is done
// with them; a request that does not fit waits, one larger than the budget
// fails with RESOURCE_EXHAUSTED (LIMIT). A stream is read while its
// unanswered bytes are under Options.StreamAppendBytes and it has fewer than
// 1024 requests in flight; beyond that the server stops receiving
// (back-pressure, not an error) until answers go out.
//
// Read and Subscribe send the response headers as soon as the reader or
// subscriber is open (and, for Subscribe, has taken the subscription over),
// before any entry: a client that waits for them knows that every tick sent
// from then on reaches it.
//
// Read sends entries in offset order, at most max_batch (default 1024, at
// most 65536) and about 1 MiB of payload per response (a larger entry
// alone); a time tick comes alone in its own response, in its place. Read
// and Subscribe take their entries from the library in batches of that
// size too (tern.WithMaxBatchBytes), so that a stream holds about one
// response besides the one gRPC is sending, however slowly its client
// reads. Without follow the stream ends at
// the log's end as of the request; with follow it waits at the tail, costing
// nothing while idle, until the client cancels.
//
// Subscribe starts with a Start message; the client's later messages are
// Acks. When the client closes its side of the stream (CloseSend), the server
// applies the acks received, commits the subscription's cursor and ends the
// stream with OK: a client that waits for the end of the stream after
// CloseSend knows its acks are committed. An Ack the subscriber cannot take
// (an offset not delivered) ends the stream with the error.
//
// Server.Close ends every open stream with UNAVAILABLE (CLOSED).
package server
