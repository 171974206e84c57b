package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("x"), frag(3, 5000)} {
		b := appendFrame([]byte("prefix"), testNonce, 42, data)[len("prefix"):]
		if int64(len(b)) != frameBytes(len(data)) {
			t.Errorf("frame of %d bytes, frameBytes says %d", len(b), frameBytes(len(data)))
		}
		for _, nonce := range []uint64{testNonce, anyNonce} {
			n, got, err := decodeFrame(append(b, "next"...), nonce)
			if err != nil || n != 42 || !bytes.Equal(got, data) {
				t.Errorf("decodeFrame(nonce %#x) = %d, %q, %v", nonce, n, got, err)
			}
		}
		for cut := range len(b) {
			if _, _, err := decodeFrame(b[:cut], testNonce); err != io.ErrUnexpectedEOF {
				t.Fatalf("frame cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
			}
		}
		for i := range b {
			bad := bytes.Clone(b)
			bad[i] ^= 0x10
			if _, _, err := decodeFrame(bad, testNonce); !errors.Is(err, errBadFrame) && err != io.ErrUnexpectedEOF {
				t.Fatalf("frame with byte %d flipped: %v", i, err)
			}
		}
		// A whole, valid frame left by the journal that was written in
		// the same file before is no frame of this one.
		if _, _, err := decodeFrame(b, testNonce+1); !errors.Is(err, errBadFrame) {
			t.Errorf("decodeFrame of another journal's frame: %v, want errBadFrame", err)
		}
		zero := appendFrame(nil, anyNonce, 42, data)
		if _, _, err := decodeFrame(zero, anyNonce); !errors.Is(err, errBadFrame) {
			t.Errorf("decodeFrame of a frame of nonce zero: %v, want errBadFrame", err)
		}
	}
}

func TestHeaderAndStateRoundTrip(t *testing.T) {
	id := SegmentID{Log: 1 << 40, Seq: 7}
	h := header{id: id, epoch: 9, nonce: newNonce()}
	if got, err := decodeHeader(encodeHeader(h)); err != nil || got != h {
		t.Errorf("decodeHeader = %+v, %v; want %+v", got, err, h)
	}
	for _, st := range []state{{epoch: 3}, {epoch: 4, sealed: true, count: 12}} {
		got, back, err := decodeState(encodeState(id, st))
		if err != nil || got != id || back != st {
			t.Errorf("decodeState = %v, %+v, %v; want %+v", got, back, err, st)
		}
	}
	for _, i := range []int{0, 5, 30, 35, 41, 47} {
		b := encodeHeader(h)
		b[i] ^= 1
		if _, err := decodeHeader(b); err == nil {
			t.Errorf("decodeHeader accepted a header with byte %d flipped", i)
		}
	}
	if _, err := decodeHeader(encodeHeader(header{id: id, epoch: 9})); err == nil {
		t.Error("decodeHeader accepted a header of nonce zero")
	}
	// Version 1's header: 40 bytes, its checksum at 32.
	v1 := encodeHeader(h)[:40]
	v1[4] = 1
	if _, err := decodeHeader(v1); !errors.Is(err, errVersion) || !strings.Contains(err.Error(), "drain the node") {
		t.Errorf("decodeHeader of version 1: %v, want errVersion saying what to do", err)
	}
	b := encodeState(id, state{epoch: 1})
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
	f.Add(appendFrame(nil, testNonce, 3, []byte("data")))
	f.Add(encodeHeader(header{id: SegmentID{Log: 1, Seq: 2}, epoch: 3, nonce: testNonce}))
	f.Add(encodeState(SegmentID{Log: 1, Seq: 2}, state{epoch: 3, sealed: true, count: 4}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, data, err := decodeFrame(b, anyNonce); err == nil {
			nonce := binary.LittleEndian.Uint64(b[20:])
			if enc := appendFrame(nil, nonce, n, data); !bytes.Equal(enc, b[:len(enc)]) {
				t.Errorf("frame re-encodes as %x", enc)
			}
			if _, _, err := decodeFrame(b, nonce+1); !errors.Is(err, errBadFrame) {
				t.Errorf("frame of nonce %#x decodes as one of %#x: %v", nonce, nonce+1, err)
			}
		}
		if h, err := decodeHeader(b); err == nil {
			if enc := encodeHeader(h); !bytes.Equal(enc, b[:headerBytes]) {
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
