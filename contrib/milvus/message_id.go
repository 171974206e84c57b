package milvus

import (
	"fmt"
	"strconv"

	"github.com/milvus-io/milvus/pkg/v2/streaming/util/message"

	"github.com/ternwal/tern/client"
)

// MessageID is a Milvus message ID of the tern WAL: the offset of the
// message's entry in the channel's log. IDs of one channel are ordered as
// their offsets, with no gaps: the next message of a channel has the ID
// one above.
type MessageID client.Offset

var _ message.MessageID = MessageID(0)

// NewMessageID returns the ID of the message at offset off of its log.
func NewMessageID(off client.Offset) message.MessageID { return MessageID(off) }

// Offset is the offset of the message's entry in its log.
func (id MessageID) Offset() client.Offset { return client.Offset(id) }

// WALName is WALName, the name Milvus keeps with a message ID to know which
// unmarshaler reads it.
func (id MessageID) WALName() string { return WALName }

// LT, LTE and EQ compare offsets. Milvus compares only IDs of one WAL: other
// must be a MessageID, or they panic.
func (id MessageID) LT(other message.MessageID) bool  { return id < other.(MessageID) }
func (id MessageID) LTE(other message.MessageID) bool { return id <= other.(MessageID) }
func (id MessageID) EQ(other message.MessageID) bool  { return id == other.(MessageID) }

// Marshal encodes the offset as the base-36 digits of Milvus's
// message.EncodeUint64 (as the rocksmq WAL does its IDs): a short string
// that Milvus keeps in its checkpoints and that UnmarshalMessageID reads
// back.
func (id MessageID) Marshal() string { return message.EncodeUint64(uint64(id)) }

// String is the offset in decimal, as tern read and tern log describe show
// offsets.
func (id MessageID) String() string { return strconv.FormatUint(uint64(id), 10) }

// UnmarshalMessageID reads what MessageID.Marshal wrote. Anything else fails
// with an error that matches message.ErrInvalidMessageID. It is registered
// with Milvus as the unmarshaler of WALName's IDs.
func UnmarshalMessageID(s string) (message.MessageID, error) {
	id, err := unmarshalMessageID(s)
	if err != nil {
		return nil, err
	}
	return id, nil
}

func unmarshalMessageID(s string) (MessageID, error) {
	v, err := message.DecodeUint64(s)
	if err != nil {
		return 0, fmt.Errorf("%w: tern message id %q is not an offset in base 36 (%v): it was not written by this WAL, or it is corrupt", message.ErrInvalidMessageID, s, err)
	}
	return MessageID(v), nil
}
