//go:build test

package milvus

import (
	stderrors "errors"
	"math"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/milvus-io/milvus/pkg/v2/streaming/util/message"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls/registry"
)

// TestMessageIDRoundTrip: Milvus unmarshals what Marshal wrote, through the
// unmarshaler this package registered, to the same offset.
func TestMessageIDRoundTrip(t *testing.T) {
	for _, off := range []uint64{0, 1, 35, 36, 1 << 20, 1<<63 + 5, math.MaxUint64 - 2} {
		id := MessageID(off)
		got, err := message.UnmarshalMessageID(WALName, id.Marshal())
		if err != nil {
			t.Fatalf("unmarshal %q (offset %d): %v", id.Marshal(), off, err)
		}
		if !got.EQ(id) || got.(MessageID).Offset() != id.Offset() || got.WALName() != WALName {
			t.Errorf("offset %d: marshaled as %q, read back as %v (%s)", off, id.Marshal(), got, got.WALName())
		}
	}
}

// TestMessageIDOrder: IDs compare as their offsets.
func TestMessageIDOrder(t *testing.T) {
	ids := []MessageID{0, 1, 2, 36, 1000, math.MaxUint64 - 2}
	for i, a := range ids {
		for j, b := range ids {
			if a.LT(b) != (i < j) || a.LTE(b) != (i <= j) || a.EQ(b) != (i == j) {
				t.Errorf("%v against %v: LT %v LTE %v EQ %v", a, b, a.LT(b), a.LTE(b), a.EQ(b))
			}
		}
	}
}

// TestMessageIDCorrupt: what Marshal cannot have written fails with an
// error that matches message.ErrInvalidMessageID, whichever errors package
// the caller uses.
func TestMessageIDCorrupt(t *testing.T) {
	for _, s := range []string{"", "-1", "!!", "1.5", "zzzzzzzzzzzzzzzz", " 1"} {
		_, err := message.UnmarshalMessageID(WALName, s)
		if err == nil {
			t.Errorf("%q: no error", s)
			continue
		}
		if !stderrors.Is(err, message.ErrInvalidMessageID) || !errors.Is(err, message.ErrInvalidMessageID) {
			t.Errorf("%q: %v does not match message.ErrInvalidMessageID", s, err)
		}
	}
}

// TestRegistry: Milvus finds the backend under its name.
func TestRegistry(t *testing.T) {
	b := registry.MustGetBuilder(WALName)
	if b.Name() != WALName || NewBuilder(Config{}).Name() != WALName {
		t.Fatalf("registered builder named %q", b.Name())
	}
}

// FuzzUnmarshalMessageID: any string either fails as ErrInvalidMessageID or
// reads as an ID whose Marshal reads back to the same ID; nothing panics.
func FuzzUnmarshalMessageID(f *testing.F) {
	for _, s := range []string{"0", "a", "zz", "3w5e11264sgsf", "", "-1", "!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := UnmarshalMessageID(s)
		if err != nil {
			if !errors.Is(err, message.ErrInvalidMessageID) {
				t.Fatalf("%q: %v does not match ErrInvalidMessageID", s, err)
			}
			return
		}
		back, err := UnmarshalMessageID(id.Marshal())
		if err != nil || !back.EQ(id) {
			t.Fatalf("%q read as %v, marshaled as %q, read back as %v, %v", s, id, id.Marshal(), back, err)
		}
	})
}
