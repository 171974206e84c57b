// Package milvus is a Milvus 2.6 WAL backend named "tern": it implements the
// interfaces of github.com/milvus-io/milvus/pkg/v2/streaming/walimpls over
// Tern, a server's (through the client module) or an embedded tern.Client.
// It is a module of its own, so that Tern's main module does not depend on
// Milvus. docs/milvus.md says how to build Milvus with it.
//
// Importing the package registers, in init as Milvus requires, a builder
// named WALName whose Build reads its Config from the environment
// (ConfigFromEnv), and the unmarshaler of its message IDs. NewBuilder
// builds an opener from a Config given in code.
//
// # Channels, terms and messages
//
//   - A pchannel is a log named Config.Prefix (DefaultPrefix, "milvus/")
//     followed by the channel's name: "by-dev-rootcoord-dml_0" is
//     "milvus/by-dev-rootcoord-dml_0". Milvus's channel names (the cluster
//     prefix, "-rootcoord-dml_" and a number) are valid log names; a name
//     that is not (client.ValidateName) fails to open with ErrInvalidName.
//     The log is created at the first Open, in Config.Mode.
//   - The channel's term is the epoch of the log's writer session
//     (client.WithEpoch(term)). Milvus's terms start at 1 and grow at each
//     assignment of the channel, as Tern's epochs must: a writer of an
//     older term is fenced (its appends, and opening it, fail with
//     walimpls.ErrFenced), the same term reopens the session (a
//     streaming node may open its term again, as Milvus's acceptance test
//     of WALs does), a newer one fences the older.
//     Term 0, which Tern has no session for, fails to open read-write.
//   - A message is one entry: its payload is the entry's payload and its
//     properties are the entry's properties (values as bytes), both as is.
//     Tern keeps properties beside the payload, so no framing of our own
//     is needed, and tern read shows them.
//   - A message ID is its entry's offset (MessageID); Marshal writes it in
//     base 36, as Milvus's rocksmq IDs.
//   - Truncate(id) moves the log's start to id's offset: the messages
//     before it go, the one at id stays (the checkpoint Milvus recovers
//     from).
//   - Close of a read-write WAL detaches its writer (client.Writer.Detach)
//     rather than ending its session (Close): Milvus closes a WAL when the
//     channel moves to another node or the node stops, and the next owner
//     opens a newer term, which fences the session anyway; until then, a
//     session left open keeps shared producers (tern append) out of the
//     channel, and the same term can still reopen it.
//   - A read-only WAL opens no writer, fences nobody, and panics on Append
//     and Truncate, as walimpls requires.
package milvus
