//go:build test

package milvus

import (
	"bytes"
	"context"
	stderrors "errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/milvus-io/milvus/pkg/v2/streaming/util/message"
	"github.com/milvus-io/milvus/pkg/v2/streaming/util/options"
	"github.com/milvus-io/milvus/pkg/v2/streaming/util/types"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"

	"github.com/ternwal/tern/client"
)

// eachBackend runs f on an opener of an embedded Tern and on one of a tern
// serve, each fresh.
func eachBackend(t *testing.T, f func(t *testing.T, o walimpls.OpenerImpls)) {
	for _, c := range []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"embedded", func(t *testing.T) Config { return Config{Embedded: openEmbedded(t)} }},
		{"serve", func(t *testing.T) Config { return Config{Nodes: []string{serve(t)}} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := NewBuilder(c.cfg(t)).Build()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(o.Close)
			f(t, o)
		})
	}
}

func testMessage(t *testing.T, props map[string]string) message.MutableMessage {
	t.Helper()
	return message.CreateTestEmptyInsertMesage(1, props)
}

func open(t *testing.T, o walimpls.OpenerImpls, channel string, term int64, mode types.AccessMode) walimpls.WALImpls {
	t.Helper()
	w, err := o.Open(t.Context(), &walimpls.OpenOption{Channel: types.PChannelInfo{Name: channel, Term: term, AccessMode: mode}})
	if err != nil {
		t.Fatalf("open %s at term %d: %v", channel, term, err)
	}
	t.Cleanup(w.Close)
	return w
}

// appendN appends n messages with property "i" = 0..n-1 and returns their IDs.
func appendN(t *testing.T, w walimpls.WALImpls, n int) []message.MessageID {
	t.Helper()
	ids := make([]message.MessageID, n)
	for i := range ids {
		id, err := w.Append(t.Context(), testMessage(t, map[string]string{"i": fmt.Sprint(i)}))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

func scan(t *testing.T, w walimpls.ROWALImpls, p options.DeliverPolicy) walimpls.ScannerImpls {
	t.Helper()
	s, err := w.Read(t.Context(), walimpls.ReadOption{Name: t.Name(), DeliverPolicy: p, ReadAheadBufferSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// next is the scanner's next message, failing the test if none comes
// within 10 seconds.
func next(t *testing.T, s walimpls.ScannerImpls) message.ImmutableMessage {
	t.Helper()
	select {
	case m, ok := <-s.Chan():
		if !ok {
			t.Fatalf("scanner ended: %v", s.Error())
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return nil
}

// expect requires the scanner's next messages to be ids, in order.
func expect(t *testing.T, s walimpls.ScannerImpls, ids ...message.MessageID) {
	t.Helper()
	for _, id := range ids {
		if m := next(t, s); !m.MessageID().EQ(id) {
			t.Fatalf("got message %v, want %v", m.MessageID(), id)
		}
	}
}

// TestFencing: once a newer term opens, the older term's appends fail with
// walimpls.ErrFenced (and Tern's ErrFenced), and so does opening the older
// term again; the newer term appends, and reopening it goes on after its
// last message.
func TestFencing(t *testing.T) {
	eachBackend(t, func(t *testing.T, o walimpls.OpenerImpls) {
		ctx := t.Context()
		old := open(t, o, "fence", 1, types.AccessModeRW)
		first := appendN(t, old, 1)[0]
		cur := open(t, o, "fence", 2, types.AccessModeRW)
		_, err := old.Append(ctx, testMessage(t, nil))
		for _, target := range []error{walimpls.ErrFenced, client.ErrFenced} {
			if !stderrors.Is(err, target) || !errors.Is(err, target) {
				t.Errorf("append of term 1 after term 2 opened: %v, want an error matching %v", err, target)
			}
		}
		_, err = o.Open(ctx, &walimpls.OpenOption{Channel: types.PChannelInfo{Name: "fence", Term: 1, AccessMode: types.AccessModeRW}})
		if !errors.Is(err, walimpls.ErrFenced) {
			t.Errorf("open of term 1 after term 2: %v, want ErrFenced", err)
		}
		second := appendN(t, cur, 1)[0]
		if !first.LT(second) {
			t.Errorf("term 2's message %v is not after term 1's %v", second, first)
		}
		cur.Close()
		again := open(t, o, "fence", 2, types.AccessModeRW) // Milvus reopens a term after a crash
		third := appendN(t, again, 1)[0]
		expect(t, scan(t, again, options.DeliverPolicyAll()), first, second, third)
	})
}

// TestReadOnly: a read-only WAL opens no writer, so it fences nobody, and
// its Append and Truncate panic.
func TestReadOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, o walimpls.OpenerImpls) {
		rw := open(t, o, "ro", 3, types.AccessModeRW)
		ids := appendN(t, rw, 1)
		ro := open(t, o, "ro", 4, types.AccessModeRO)
		ids = append(ids, appendN(t, rw, 1)...) // not fenced by the read-only term 4
		expect(t, scan(t, ro, options.DeliverPolicyAll()), ids...)
		for name, f := range map[string]func(){
			"Append":   func() { ro.Append(t.Context(), testMessage(t, nil)) },
			"Truncate": func() { ro.Truncate(t.Context(), ids[0]) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s on a read-only WAL did not panic", name)
					}
				}()
				f()
			}()
		}
	})
}

// TestProperties: a message's payload and properties come back as they
// were appended, empty and non-ASCII values included.
func TestProperties(t *testing.T) {
	eachBackend(t, func(t *testing.T, o walimpls.OpenerImpls) {
		w := open(t, o, "props", 1, types.AccessModeRW)
		props := map[string]string{"empty": "", "utf8": "tërn ✓", "bytes": "\x00\xff\x01", "const": "t"}
		msg := testMessage(t, props)
		id, err := w.Append(t.Context(), msg)
		if err != nil {
			t.Fatal(err)
		}
		got := next(t, scan(t, w, options.DeliverPolicyAll()))
		if !got.MessageID().EQ(id) || got.WALName() != WALName {
			t.Errorf("read %v of %s, want %v of %s", got.MessageID(), got.WALName(), id, WALName)
		}
		if !bytes.Equal(got.Payload(), msg.Payload()) {
			t.Errorf("payload %x, want %x", got.Payload(), msg.Payload())
		}
		if want := msg.Properties().ToRawMap(); !maps.Equal(got.Properties().ToRawMap(), want) {
			t.Errorf("properties %q, want %q", got.Properties().ToRawMap(), want)
		}
		if got.MessageType() != message.MessageTypeInsert || got.VChannel() != "v1" {
			t.Errorf("read a %v message of vchannel %q", got.MessageType(), got.VChannel())
		}
	})
}

// TestDeliverPolicies: all starts at the log's start, latest at its end,
// start-from at the message, start-after after it.
func TestDeliverPolicies(t *testing.T) {
	eachBackend(t, func(t *testing.T, o walimpls.OpenerImpls) {
		w := open(t, o, "policies", 1, types.AccessModeRW)
		ids := appendN(t, w, 10)
		all := scan(t, w, options.DeliverPolicyAll())
		from := scan(t, w, options.DeliverPolicyStartFrom(ids[5]))
		after := scan(t, w, options.DeliverPolicyStartAfter(ids[5]))
		afterLast := scan(t, w, options.DeliverPolicyStartAfter(ids[9]))
		latest := scan(t, w, options.DeliverPolicyLatest())
		ids = append(ids, appendN(t, w, 1)...)
		expect(t, all, ids...)
		expect(t, from, ids[5:]...)
		expect(t, after, ids[6:]...)
		expect(t, afterLast, ids[10])
		expect(t, latest, ids[10])
	})
}

// TestTruncateThenRead: Truncate(id) keeps the message at id and drops the
// ones before: all starts at id, start-from id works, and a reader from
// before id fails with Tern's *TruncatedError.
func TestTruncateThenRead(t *testing.T) {
	eachBackend(t, func(t *testing.T, o walimpls.OpenerImpls) {
		w := open(t, o, "trunc", 1, types.AccessModeRW)
		ids := appendN(t, w, 10)
		if err := w.Truncate(t.Context(), ids[4]); err != nil {
			t.Fatal(err)
		}
		expect(t, scan(t, w, options.DeliverPolicyAll()), ids[4:]...)
		expect(t, scan(t, w, options.DeliverPolicyStartFrom(ids[4])), ids[4:]...)
		s, err := w.Read(t.Context(), walimpls.ReadOption{Name: "below", DeliverPolicy: options.DeliverPolicyStartFrom(ids[2])})
		if err == nil {
			<-s.Done()
			err = s.Error()
		}
		var te *client.TruncatedError
		if !errors.As(err, &te) {
			t.Errorf("read from below the start: %v, want a *TruncatedError", err)
		}
	})
}

// TestScannerEnds: Close ends a scanner cleanly (its channel closes, Done
// too, Error is nil); a scanner whose log is deleted ends with the error.
func TestScannerEnds(t *testing.T) {
	c := openEmbedded(t)
	o, err := NewBuilder(Config{Embedded: c}).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	w := open(t, o, "ends", 1, types.AccessModeRW)
	ids := appendN(t, w, 3)
	s := scan(t, w, options.DeliverPolicyAll())
	expect(t, s, ids[0])
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	<-s.Done()
	for range s.Chan() { // drains what was read ahead, then ends
	}
	if s.Error() != nil {
		t.Errorf("Error after Close: %v", s.Error())
	}

	s = scan(t, w, options.DeliverPolicyLatest())
	if err := c.DeleteLog(context.Background(), LogName("", "ends")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the scanner of a deleted log did not end")
	}
	if _, ok := <-s.Chan(); ok || !errors.Is(s.Error(), client.ErrNotFound) {
		t.Errorf("scanner of a deleted log: Error %v, want ErrNotFound", s.Error())
	}
}

// TestChannelNames: a channel's log is the prefix and its name; a name
// that cannot name a log fails to open, saying why.
func TestChannelNames(t *testing.T) {
	c := openEmbedded(t)
	o, err := NewBuilder(Config{Embedded: c, Prefix: "by-dev/"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	open(t, o, "by-dev-rootcoord-dml_0", 1, types.AccessModeRW)
	if _, err := c.OpenLog(t.Context(), "by-dev/by-dev-rootcoord-dml_0"); err != nil {
		t.Errorf("the channel's log: %v", err)
	}
	_, err = o.Open(t.Context(), &walimpls.OpenOption{Channel: types.PChannelInfo{Name: "a b", Term: 1, AccessMode: types.AccessModeRW}})
	if !errors.Is(err, client.ErrInvalidName) {
		t.Errorf("open of channel \"a b\": %v, want ErrInvalidName", err)
	}
	_, err = o.Open(t.Context(), &walimpls.OpenOption{Channel: types.PChannelInfo{Name: "zero", Term: 0, AccessMode: types.AccessModeRW}})
	if !errors.Is(err, client.ErrInvalid) {
		t.Errorf("open at term 0: %v, want ErrInvalid", err)
	}
}
