package replica

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
)

// The add stream is not a gRPC call: the owner of a log sends every
// fragment of its open segments to each remote replica, and over gRPC each
// byte was copied into HTTP/2 frames of 16 KiB by a writer goroutine, then
// out of them on the replica, and gathered into one buffer. On its own TCP
// connection a fragment goes from the writer's buffer to the socket in one
// writev, and from the socket into the buffer the replica keeps. The
// connection reaches the node's gRPC port; the node's listener (Server.Listen)
// tells the two apart by the first bytes a client sends.
//
// The protocol (all integers little-endian):
//
//	client, once:   preface "TERNADD" and version byte 2, then
//	                log u64, seq u64, epoch u64: the segment and the epoch
//	client, frames: kind u8, n u64, length u32, sum u32, then length bytes
//	                of data
//	                kind 1, a fragment: n its number, sum its frame's
//	                checksum (FrameSum), data its bytes
//	                kind 2, a ping: n, length and sum zero
//	server, frames: kind u8, then
//	                kind 1, the durable count: count u64, sent when it grows
//	                kind 2, a ping: count u64 zero
//	                kind 3, an error, after which the server closes the
//	                connection: reason length u8, reason, message length
//	                u16, message (the reasons of wireErrors)
//
// Each side pings when it has sent nothing for 5s, and gives the
// connection up when it has read nothing for 8s while it is waiting to
// read (defaultKeepalive): a stopped or partitioned peer is found within
// seconds, as the keepalive of the gRPC connections does for the other
// calls.

// AddProtocol is the TLS application protocol (ALPN) of an add connection
// to a node that serves TLS: the node's listener tells add connections
// from gRPC's ("h2") by it, since it cannot peek under TLS. The preface
// follows inside the TLS connection as it does in plaintext.
const AddProtocol = "tern-replica-add"

// addPreface opens an add connection: a gRPC (HTTP/2) client starts with
// "PRI * HTTP/2.0" and a TLS client with a handshake record, neither of
// which starts with this.
var addPreface = [8]byte{'T', 'E', 'R', 'N', 'A', 'D', 'D', 2}

const (
	openBytes        = 24 // log, seq, epoch
	clientFrameBytes = 17 // kind, n, length, sum
	serverFrameBytes = 9  // kind, count

	kindFragment = 1
	kindCount    = 1
	kindPing     = 2
	kindError    = 3

	// prefaceTimeout bounds how long a new connection to the node's port
	// may take to send the bytes that say what it is.
	prefaceTimeout = 10 * time.Second
	// maxErrorMessage bounds the message of an error frame.
	maxErrorMessage = 4 << 10
)

// addKeepalive is an add connection's keepalive: each side pings when it
// has sent nothing for every, and gives the connection up when nothing
// arrived for after. Servers and Conns take it when they are made, so that
// a test can shorten its own without touching another's.
type addKeepalive struct{ every, after time.Duration }

var defaultKeepalive = addKeepalive{every: 5 * time.Second, after: 5*time.Second + keepaliveTimeout}

// errConnDead is a connection on which nothing arrived for addKeepalive.after.
var errConnDead = errors.New("replica: nothing heard on the add connection for too long: the peer is stopped, partitioned or overloaded")

func appendOpen(b []byte, seg SegmentID, epoch uint64) []byte {
	b = append(b, addPreface[:]...)
	b = binary.LittleEndian.AppendUint64(b, seg.Log)
	b = binary.LittleEndian.AppendUint64(b, seg.Seq)
	return binary.LittleEndian.AppendUint64(b, epoch)
}

// readOpen reads what follows the preface.
func readOpen(r io.Reader) (SegmentID, uint64, error) {
	var b [openBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return SegmentID{}, 0, err
	}
	le := binary.LittleEndian
	return SegmentID{Log: le.Uint64(b[0:]), Seq: le.Uint64(b[8:])}, le.Uint64(b[16:]), nil
}

func putClientFrame(b *[clientFrameBytes]byte, kind byte, n uint64, length int, sum uint32) {
	b[0] = kind
	binary.LittleEndian.PutUint64(b[1:], n)
	binary.LittleEndian.PutUint32(b[9:], uint32(length))
	binary.LittleEndian.PutUint32(b[13:], sum)
}

// readClientFrame reads a frame's header from r, and a fragment's data into
// a buffer from alloc. A fragment over MaxFragmentBytes, or an unknown kind, is
// rpcerr.ErrInvalid. It returns io.EOF only when r ends between frames.
func readClientFrame(r io.Reader, alloc func(int) []byte) (kind byte, n uint64, data []byte, sum uint32, err error) {
	var h [clientFrameBytes]byte
	if k, err := io.ReadFull(r, h[:]); err != nil {
		if k > 0 && err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%w: the connection ended in a frame's header", rpcerr.ErrInvalid)
		}
		return 0, 0, nil, 0, err
	}
	kind, n = h[0], binary.LittleEndian.Uint64(h[1:])
	length, sum := int(binary.LittleEndian.Uint32(h[9:])), binary.LittleEndian.Uint32(h[13:])
	switch {
	case kind == kindPing && n == 0 && length == 0 && sum == 0:
		return kind, 0, nil, 0, nil
	case kind != kindFragment:
		return 0, 0, nil, 0, fmt.Errorf("%w: add frame of kind %d, n %d, length %d", rpcerr.ErrInvalid, kind, n, length)
	case length > MaxFragmentBytes:
		return 0, 0, nil, 0, fmt.Errorf("%w: fragment %d has %d bytes, over %d", rpcerr.ErrInvalid, n, length, MaxFragmentBytes)
	}
	data = alloc(length)
	if _, err := io.ReadFull(r, data); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = fmt.Errorf("%w: the connection ended in fragment %d", rpcerr.ErrInvalid, n)
		}
		return 0, 0, nil, 0, err
	}
	return kind, n, data, sum, nil
}

func appendCount(b []byte, kind byte, count uint64) []byte {
	b = append(b, kind)
	return binary.LittleEndian.AppendUint64(b, count)
}

// appendError encodes err as it would cross gRPC (rpcerr.Status): the
// reason of the first sentinel it matches, or none, and its message.
func appendError(b []byte, err error) []byte {
	reason, _ := rpcerr.Reason(err) // no reason for an error it does not list
	msg := err.Error()
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage]
	}
	b = append(b, kindError, byte(len(reason)))
	b = append(b, reason...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

// readServerFrame reads one frame of the server: a count or ping (kind and
// count), or an error frame, returned as the error the server sent (with
// kind kindError).
func readServerFrame(r *bufio.Reader) (kind byte, count uint64, err error) {
	var h [serverFrameBytes]byte
	if _, err := io.ReadFull(r, h[:1]); err != nil {
		return 0, 0, err
	}
	switch h[0] {
	case kindCount, kindPing:
		if _, err := io.ReadFull(r, h[1:]); err != nil {
			return 0, 0, noEOF(err)
		}
		return h[0], binary.LittleEndian.Uint64(h[1:]), nil
	case kindError:
		return kindError, 0, readErrorFrame(r)
	}
	return 0, 0, fmt.Errorf("replica: the add connection's server sent a frame of unknown kind %d", h[0])
}

// readErrorFrame reads an error frame after its kind, and returns the
// server's error: one that matches the sentinel of its reason and reads as
// its message.
func readErrorFrame(r *bufio.Reader) error {
	n, err := r.ReadByte()
	if err != nil {
		return noEOF(err)
	}
	reason := make([]byte, n)
	if _, err := io.ReadFull(r, reason); err != nil {
		return noEOF(err)
	}
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return noEOF(err)
	}
	msg := make([]byte, binary.LittleEndian.Uint16(l[:]))
	if _, err := io.ReadFull(r, msg); err != nil {
		return noEOF(err)
	}
	if err, ok := rpcerr.FromReason(string(reason), string(msg)); ok {
		return err
	}
	return errors.New(string(msg))
}

// noEOF is io.ErrUnexpectedEOF for an io.EOF in the middle of a frame.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// dead maps a read that timed out to errConnDead.
func dead(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errConnDead
	}
	return err
}

// addDialer connects add streams. Their pings find a silent peer; on
// Linux, TCP_USER_TIMEOUT also fails a connection whose data in flight
// goes unacknowledged for keepaliveTimeout, as gRPC sets it for its own
// connections (see userTimeout).
var addDialer = net.Dialer{Control: userTimeout}
