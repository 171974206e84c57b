package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ternwal/tern/internal/vfs"
)

// The journal and state formats. Every constant here is on disk: see doc.go.
const (
	journalMagic = "TRRJ"
	frameMagic   = "TRRF"
	stateMagic   = "TRRS"

	journalVersion = 2
	stateVersion   = 1

	headerBytes      = 48 // journal header
	frameHeaderBytes = 28
	stateBytes       = 48

	stateSealed = 1 // state flag: the segment is sealed

	journalSuffix = ".frags"
	stateSuffix   = ".state"
	tmpSuffix     = vfs.TempSuffix // of a state file vfs.ReplaceFile is writing

	freeDir = "free" // under the store's directory: dropped journals to write over
)

// MaxFragmentBytes bounds one fragment.
const MaxFragmentBytes = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadFrame is wrapped by decodeFrame's error for bytes that are not a
// frame, as opposed to a frame cut short (io.ErrUnexpectedEOF).
var errBadFrame = errors.New("not a valid frame")

// logDir is the directory of a log's segments under the store's directory.
func logDir(dir string, log uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d", log))
}

func journalPath(dir string, id SegmentID) string {
	return filepath.Join(logDir(dir, id.Log), fmt.Sprintf("%020d%s", id.Seq, journalSuffix))
}

func statePath(dir string, id SegmentID) string {
	return filepath.Join(logDir(dir, id.Log), fmt.Sprintf("%020d%s", id.Seq, stateSuffix))
}

// parseNumber parses the name of a log directory (suffix "") or of a
// segment's file: 20 decimal digits, then the suffix.
func parseNumber(name, suffix string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, suffix)
	if !ok || len(s) != 20 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// anyNonce, given where a journal's nonce is asked for, accepts frames of
// any journal; a journal's own nonce is never zero.
const anyNonce = 0

// newNonce returns a journal's nonce: random, so that no frame left in a
// file by a journal written there before passes for one of the new one's.
func newNonce() uint64 {
	for {
		if n := rand.Uint64(); n != anyNonce {
			return n
		}
	}
}

// header is what a journal header holds.
type header struct {
	id    SegmentID
	epoch uint64 // the segment's fenced epoch when it was created
	nonce uint64 // in every frame of the journal
}

func encodeHeader(h header) []byte {
	b := make([]byte, headerBytes)
	copy(b, journalMagic)
	b[4] = journalVersion
	binary.LittleEndian.PutUint64(b[8:], h.id.Log)
	binary.LittleEndian.PutUint64(b[16:], h.id.Seq)
	binary.LittleEndian.PutUint64(b[24:], h.epoch)
	binary.LittleEndian.PutUint64(b[32:], h.nonce)
	binary.LittleEndian.PutUint32(b[40:], crc32.Checksum(b[:40], castagnoli))
	return b
}

// errVersion is wrapped by decodeHeader's error for the header of a
// journal of another format version.
var errVersion = errors.New("journal of another format version")

func decodeHeader(b []byte) (header, error) {
	switch {
	case len(b) > 4 && string(b[:4]) == journalMagic && b[4] != journalVersion:
		// Before the size and the checksum, which version 1 had shorter.
		return header{}, fmt.Errorf("%w: version %d, and this build reads version %d only; drain the node with the build that wrote it", errVersion, b[4], journalVersion)
	case len(b) < headerBytes:
		return header{}, io.ErrUnexpectedEOF
	case string(b[:4]) != journalMagic:
		return header{}, errors.New("bad magic")
	case crc32.Checksum(b[:40], castagnoli) != binary.LittleEndian.Uint32(b[40:]):
		return header{}, errors.New("header checksum mismatch")
	case !zero(b[5:8]) || !zero(b[44:48]):
		return header{}, errors.New("reserved header bytes are not zero")
	case binary.LittleEndian.Uint64(b[32:]) == anyNonce:
		return header{}, errors.New("zero nonce")
	}
	return header{
		id:    SegmentID{Log: binary.LittleEndian.Uint64(b[8:]), Seq: binary.LittleEndian.Uint64(b[16:])},
		epoch: binary.LittleEndian.Uint64(b[24:]),
		nonce: binary.LittleEndian.Uint64(b[32:]),
	}, nil
}

// frameBytes is the size of fragment data framed in a journal.
func frameBytes(data int) int64 { return frameHeaderBytes + int64(data) }

// FrameSum is the checksum of fragment n's frame in a journal: CRC-32C over
// the frame's length and number fields and the data. The writer computes it
// once, where it cuts the fragment, and every replica writes it as it
// came: a fragment damaged on its way to a replica's disk fails the check
// wherever the frame is read.
func FrameSum(n uint64, data []byte) uint32 {
	var b [12]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(len(data)))
	binary.LittleEndian.PutUint64(b[4:], n)
	return crc32.Update(crc32.Checksum(b[:], castagnoli), castagnoli, data)
}

// putFrameHeader writes to h the header of fragment n's frame in the
// journal of nonce, of length bytes of data with checksum sum.
func putFrameHeader(h *[frameHeaderBytes]byte, nonce, n uint64, length int, sum uint32) {
	copy(h[:], frameMagic)
	binary.LittleEndian.PutUint32(h[4:], uint32(length))
	binary.LittleEndian.PutUint64(h[8:], n)
	binary.LittleEndian.PutUint32(h[16:], sum)
	binary.LittleEndian.PutUint64(h[20:], nonce)
}

// frameLength checks the fixed part of a frame in h (frameHeaderBytes long)
// as one of the journal of nonce (or of any, anyNonce), and returns the
// length of its data.
func frameLength(h []byte, nonce uint64) (int, error) {
	if string(h[:4]) != frameMagic {
		return 0, fmt.Errorf("%w: bad magic", errBadFrame)
	}
	if got := binary.LittleEndian.Uint64(h[20:]); got == anyNonce || (nonce != anyNonce && got != nonce) {
		return 0, fmt.Errorf("%w: a frame of another journal (nonce %#x)", errBadFrame, got)
	}
	length := binary.LittleEndian.Uint32(h[4:])
	if length > MaxFragmentBytes {
		return 0, fmt.Errorf("%w: length %d over the limit", errBadFrame, length)
	}
	return int(length), nil
}

// decodeFrame decodes the frame at the start of b, of the journal of nonce
// (or of any, anyNonce), and returns its fragment number and data, which
// aliases b. A frame that b cuts short gives io.ErrUnexpectedEOF; bytes that
// are not such a frame, an error wrapping errBadFrame.
func decodeFrame(b []byte, nonce uint64) (n uint64, data []byte, err error) {
	if len(b) < frameHeaderBytes {
		return 0, nil, io.ErrUnexpectedEOF
	}
	length, err := frameLength(b, nonce)
	if err != nil {
		return 0, nil, err
	}
	if len(b)-frameHeaderBytes < length {
		return 0, nil, io.ErrUnexpectedEOF
	}
	n = binary.LittleEndian.Uint64(b[8:])
	data = b[frameHeaderBytes : frameHeaderBytes+length]
	if FrameSum(n, data) != binary.LittleEndian.Uint32(b[16:]) {
		return 0, nil, fmt.Errorf("%w: checksum mismatch", errBadFrame)
	}
	return n, data, nil
}

// state is what a segment's state file holds.
type state struct {
	epoch  uint64 // fenced epoch
	sealed bool
	count  uint64 // fragments of a sealed segment
}

func encodeState(id SegmentID, st state) []byte {
	b := make([]byte, stateBytes)
	copy(b, stateMagic)
	b[4] = stateVersion
	if st.sealed {
		b[5] = stateSealed
	}
	binary.LittleEndian.PutUint64(b[8:], id.Log)
	binary.LittleEndian.PutUint64(b[16:], id.Seq)
	binary.LittleEndian.PutUint64(b[24:], st.epoch)
	binary.LittleEndian.PutUint64(b[32:], st.count)
	binary.LittleEndian.PutUint32(b[40:], crc32.Checksum(b[:40], castagnoli))
	return b
}

func decodeState(b []byte) (SegmentID, state, error) {
	switch {
	case len(b) != stateBytes:
		return SegmentID{}, state{}, fmt.Errorf("%d bytes, want %d", len(b), stateBytes)
	case string(b[:4]) != stateMagic:
		return SegmentID{}, state{}, errors.New("bad magic")
	case crc32.Checksum(b[:40], castagnoli) != binary.LittleEndian.Uint32(b[40:]):
		return SegmentID{}, state{}, errors.New("state checksum mismatch")
	case b[4] != stateVersion:
		return SegmentID{}, state{}, fmt.Errorf("unknown format version %d", b[4])
	case b[5]&^stateSealed != 0:
		return SegmentID{}, state{}, fmt.Errorf("unknown flags %#x", b[5])
	case !zero(b[6:8]) || !zero(b[44:48]):
		return SegmentID{}, state{}, errors.New("reserved state bytes are not zero")
	}
	id := SegmentID{Log: binary.LittleEndian.Uint64(b[8:]), Seq: binary.LittleEndian.Uint64(b[16:])}
	st := state{
		epoch:  binary.LittleEndian.Uint64(b[24:]),
		sealed: b[5]&stateSealed != 0,
		count:  binary.LittleEndian.Uint64(b[32:]),
	}
	return id, st, nil
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
