package replica

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("x"), frag(3, 5000)} {
		b := appendFrame([]byte("prefix"), 42, data)[len("prefix"):]
		if int64(len(b)) != frameBytes(len(data)) {
			t.Errorf("frame of %d bytes, frameBytes says %d", len(b), frameBytes(len(data)))
		}
		n, got, err := decodeFrame(append(b, "next"...))
		if err != nil || n != 42 || !bytes.Equal(got, data) {
			t.Errorf("decodeFrame = %d, %q, %v", n, got, err)
		}
		for cut := range len(b) {
			if _, _, err := decodeFrame(b[:cut]); err != io.ErrUnexpectedEOF {
				t.Fatalf("frame cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
			}
		}
		for i := range b {
			bad := bytes.Clone(b)
			bad[i] ^= 0x10
			if _, _, err := decodeFrame(bad); !errors.Is(err, errBadFrame) && err != io.ErrUnexpectedEOF {
				t.Fatalf("frame with byte %d flipped: %v", i, err)
			}
		}
	}
}

func TestHeaderAndStateRoundTrip(t *testing.T) {
	id := SegmentID{Log: 1 << 40, Seq: 7}
	got, epoch, err := decodeHeader(encodeHeader(id, 9))
	if err != nil || got != id || epoch != 9 {
		t.Errorf("decodeHeader = %v, %d, %v", got, epoch, err)
	}
	for _, st := range []state{{epoch: 3}, {epoch: 4, sealed: true, count: 12}} {
		got, back, err := decodeState(encodeState(id, st))
		if err != nil || got != id || back != st {
			t.Errorf("decodeState = %v, %+v, %v; want %+v", got, back, err, st)
		}
	}
	b := encodeHeader(id, 9)
	b[30] ^= 1
	if _, _, err := decodeHeader(b); err == nil {
		t.Error("decodeHeader accepted a damaged header")
	}
	b = encodeState(id, state{epoch: 1})
	b[25] ^= 1
	if _, _, err := decodeState(b); err == nil {
		t.Error("decodeState accepted a damaged state")
	}
}

func TestParseNumber(t *testing.T) {
	for name, want := range map[string]bool{
		"00000000000000000012.frags": true,
		"12.frags":                   false,
		"0000000000000000001x.frags": false,
		"00000000000000000012.state": false,
		"99999999999999999999.frags": false, // overflows
	} {
		if _, ok := parseNumber(name, journalSuffix); ok != want {
			t.Errorf("parseNumber(%q) ok = %v", name, ok)
		}
	}
}

// FuzzDecode checks that the decoders never panic, and that what decodes
// encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(appendFrame(nil, 3, []byte("data")))
	f.Add(encodeHeader(SegmentID{Log: 1, Seq: 2}, 3))
	f.Add(encodeState(SegmentID{Log: 1, Seq: 2}, state{epoch: 3, sealed: true, count: 4}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, data, err := decodeFrame(b); err == nil {
			if enc := appendFrame(nil, n, data); !bytes.Equal(enc, b[:len(enc)]) {
				t.Errorf("frame re-encodes as %x", enc)
			}
		}
		if id, epoch, err := decodeHeader(b); err == nil {
			if enc := encodeHeader(id, epoch); !bytes.Equal(enc, b[:headerBytes]) {
				t.Errorf("header re-encodes as %x", enc)
			}
		}
		if id, st, err := decodeState(b); err == nil {
			if enc := encodeState(id, st); !bytes.Equal(enc, b) {
				t.Errorf("state re-encodes as %x", enc)
			}
		}
	})
}
