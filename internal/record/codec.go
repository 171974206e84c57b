package record

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is how a batch's body is compressed. Its value is wire format: it
// is bits 0-2 of a batch's flags.
type Codec uint8

// The codecs. A batch written with a codec other than None is version 2
// (see doc.go).
const (
	None Codec = 0
	Zstd Codec = 1 // Zstandard, one frame (klauspost/compress, fastest level)
	LZ4  Codec = 2 // LZ4, one block (pierrec/lz4)
)

const codecMask = 0x07

// MaxBodyBytes bounds the body of a compressed batch, uncompressed: a
// reader allocates at most this much to decompress one batch, whatever its
// header declares. A writer stores a larger body uncompressed. It is wire
// format: lowering it makes valid batches unreadable.
const MaxBodyBytes = 64 << 20

// String is the codec's name, as ParseCodec takes it.
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Zstd:
		return "zstd"
	case LZ4:
		return "lz4"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec parses a codec's name; "" is None.
func ParseCodec(s string) (Codec, error) {
	switch s {
	case "", "none":
		return None, nil
	case "zstd":
		return Zstd, nil
	case "lz4":
		return LZ4, nil
	}
	return None, fmt.Errorf("record: compression %q: use none, zstd or lz4", s)
}

func (c Codec) valid() bool { return c <= LZ4 }

// The zstd encoder and decoder are shared: their EncodeAll and DecodeAll
// are safe for concurrent use, and each holds up to GOMAXPROCS states.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderCRC(false), // the batch's CRC covers the frame
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err) // only bad options fail
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(MaxBodyBytes),
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.IgnoreChecksum(true))
		if err != nil {
			panic(err)
		}
		return d
	})
	lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}
)

// compress appends body compressed with c to dst and returns it, and
// whether the compressed bytes are shorter than body; if they are not,
// the batch is better stored uncompressed.
func compress(c Codec, dst, body []byte) ([]byte, bool) {
	if len(body) < 2 {
		return dst, false // nothing to gain, and no room for an LZ4 block below len(body)
	}
	at := len(dst)
	switch c {
	case Zstd:
		dst = zstdEncoder().EncodeAll(body, dst)
	case LZ4:
		// A block that would not be shorter than body fails to fit, and
		// is stored uncompressed.
		dst = grow(dst, len(body)-1)
		cz := lz4Compressors.Get().(*lz4.Compressor)
		n, err := cz.CompressBlock(body, dst[at:at+len(body)-1])
		lz4Compressors.Put(cz)
		if err != nil || n == 0 {
			return dst[:at], false
		}
		dst = dst[:at+n]
	default:
		return dst, false
	}
	return dst, len(dst)-at < len(body)
}

// decompress returns the body of n bytes that c compressed into p, in a
// new buffer. n has been checked against MaxBodyBytes.
func decompress(c Codec, p []byte, n int) ([]byte, error) {
	body := make([]byte, 0, n)
	switch c {
	case Zstd:
		out, err := zstdDecoder().DecodeAll(p, body)
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		if len(out) != n {
			return nil, fmt.Errorf("%w: zstd body of %d bytes, header says %d", ErrCorrupt, len(out), n)
		}
		return out, nil
	case LZ4:
		body = body[:n]
		m, err := lz4.UncompressBlock(p, body)
		if err != nil {
			return nil, fmt.Errorf("%w: lz4: %v", ErrCorrupt, err)
		}
		if m != n {
			return nil, fmt.Errorf("%w: lz4 body of %d bytes, header says %d", ErrCorrupt, m, n)
		}
		return body, nil
	}
	return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, c)
}

// grow returns p with n more bytes of length.
func grow(p []byte, n int) []byte {
	if n <= 0 {
		return p
	}
	if cap(p)-len(p) < n {
		q := make([]byte, len(p), len(p)+n+len(p)/4)
		copy(q, p)
		p = q
	}
	return p[:len(p)+n]
}
