package meta

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

func TestRecordFormat(t *testing.T) {
	l := Log{
		Name:    "not stored",
		ID:      7,
		Created: time.UnixMicro(1700000000000001).UTC(),
		Options: []byte{0, 1, 2},
		Epoch:   3,
		Start:   10,
	}
	const want = `{"v":1,"id":7,"created_us":1700000000000001,"options":"AAEC","epoch":3,"start":10}`
	got, err := encodeLog(l)
	if err != nil {
		t.Fatalf("encodeLog: %v", err)
	}
	if string(got) != want {
		t.Fatalf("encodeLog = %s, want %s", got, want)
	}
	back, err := decodeLog(got)
	if err != nil {
		t.Fatalf("decodeLog: %v", err)
	}
	l.Name = ""
	if back.ID != l.ID || back.Created != l.Created || !bytes.Equal(back.Options, l.Options) ||
		back.Epoch != l.Epoch || back.Start != l.Start || back.Name != "" {
		t.Fatalf("decodeLog(encodeLog(l)) = %#v, want %#v", back, l)
	}

	// A record with a session: the fields that records from before
	// sessions lack.
	l.Session, l.Shared, l.Ended = 9, true, true
	const withSession = `{"v":1,"id":7,"created_us":1700000000000001,"options":"AAEC","epoch":3,"start":10,"session":9,"shared":true,"ended":true}`
	if got, err := encodeLog(l); err != nil || string(got) != withSession {
		t.Fatalf("encodeLog with a session = %s, %v, want %s", got, err, withSession)
	}
	if back, err := decodeLog([]byte(withSession)); err != nil || back.Session != 9 || !back.Shared || !back.Ended {
		t.Fatalf("decodeLog with a session = %+v, %v", back, err)
	}

	for _, bad := range []string{
		``,
		`{}`,
		`{"v":2,"id":7}`,
		`{"v":1,"id":-1}`,
		`{"v":1,"options":"!"}`,
		`{"v":1} x`,
		`[]`,
	} {
		if _, err := decodeLog([]byte(bad)); err == nil {
			t.Errorf("decodeLog(%s) succeeded, want an error", bad)
		}
	}
}

func FuzzDecodeLog(f *testing.F) {
	f.Add([]byte(`{"v":1,"id":7,"created_us":1700000000000001,"options":"AAEC","epoch":3,"start":10}`))
	f.Add([]byte(`{"v":1,"id":1,"created_us":-5,"options":null,"epoch":0,"start":0}`))
	f.Add([]byte(`{"v":1,"options":""}`))
	f.Add([]byte(`{"v":2}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		l, err := decodeLog(v)
		if err != nil {
			return
		}
		enc, err := encodeLog(l)
		if err != nil {
			t.Fatalf("encodeLog(%#v): %v", l, err)
		}
		back, err := decodeLog(enc)
		if err != nil {
			t.Fatalf("decodeLog(%s): %v", enc, err)
		}
		if back.ID != l.ID || back.Created != l.Created || !bytes.Equal(back.Options, l.Options) ||
			back.Epoch != l.Epoch || back.Start != l.Start {
			t.Fatalf("round trip of %s: %#v, want %#v", v, back, l)
		}
	})
}

func TestSubRecordFormat(t *testing.T) {
	s := Sub{
		Name:    "not stored",
		Created: time.UnixMicro(1700000000000001).UTC(),
		Cursor:  42,
		Pin:     true,
	}
	const want = `{"v":1,"created_us":1700000000000001,"cursor":42,"pin":true}`
	got, err := encodeSub(s)
	if err != nil {
		t.Fatalf("encodeSub: %v", err)
	}
	if string(got) != want {
		t.Fatalf("encodeSub = %s, want %s", got, want)
	}
	back, err := decodeSub(got)
	if err != nil {
		t.Fatalf("decodeSub: %v", err)
	}
	s.Name = ""
	if back != s {
		t.Fatalf("decodeSub(encodeSub(s)) = %#v, want %#v", back, s)
	}

	for _, bad := range []string{
		``,
		`{}`,
		`{"v":2,"cursor":1}`,
		`{"v":1,"cursor":-1}`,
		`{"v":1,"pin":1}`,
		`{"v":1} x`,
		`[]`,
	} {
		if _, err := decodeSub([]byte(bad)); err == nil {
			t.Errorf("decodeSub(%s) succeeded, want an error", bad)
		}
	}
}

func FuzzDecodeSub(f *testing.F) {
	f.Add([]byte(`{"v":1,"created_us":1700000000000001,"cursor":42,"pin":true}`))
	f.Add([]byte(`{"v":1,"created_us":-5,"cursor":18446744073709551615,"pin":false}`))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":2}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		s, err := decodeSub(v)
		if err != nil {
			return
		}
		enc, err := encodeSub(s)
		if err != nil {
			t.Fatalf("encodeSub(%#v): %v", s, err)
		}
		back, err := decodeSub(enc)
		if err != nil {
			t.Fatalf("decodeSub(%s): %v", enc, err)
		}
		if back != s {
			t.Fatalf("round trip of %s: %#v, want %#v", v, back, s)
		}
	})
}

func TestSegmentRecordFormat(t *testing.T) {
	s := Segment{
		Seq:     9, // the key, not stored
		Epoch:   3,
		Base:    100,
		Created: time.Unix(0, 1700000000000000001).UTC(),
		Sealed:  true,
		End:     250,
		Bytes:   4096,
		MaxTime: 1700000000500000000,
		Objects: []SegmentObject{{Key: "0", Base: 100, Bytes: 3000}, {Key: "1", Base: 180, Bytes: 1096}},
		// Bytes: no compressed batch, and the record leaves it out, as
		// records written before it existed did.
		LogicalBytes: 4096,
	}
	const want = `{"v":1,"epoch":3,"base":100,"created_ns":1700000000000000001,` +
		`"sealed":true,"end":250,"bytes":4096,"max_time_ns":1700000000500000000,` +
		`"objects":[{"key":"0","base":100,"bytes":3000},{"key":"1","base":180,"bytes":1096}]}`
	got, err := encodeSegment(s)
	if err != nil {
		t.Fatalf("encodeSegment: %v", err)
	}
	if string(got) != want {
		t.Fatalf("encodeSegment =\n%s\nwant\n%s", got, want)
	}
	back, err := decodeSegment(got)
	if err != nil {
		t.Fatalf("decodeSegment: %v", err)
	}
	s.Seq = 0
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("decodeSegment(encodeSegment(s)) = %#v, want %#v", back, s)
	}

	// Compressed batches: logical_bytes is the bytes appended. Without it
	// (a record written before it existed, or a caller that does not
	// know), it is Bytes.
	s.LogicalBytes = 10000
	const wantLogical = `{"v":1,"epoch":3,"base":100,"created_ns":1700000000000000001,` +
		`"sealed":true,"end":250,"bytes":4096,"max_time_ns":1700000000500000000,` +
		`"objects":[{"key":"0","base":100,"bytes":3000},{"key":"1","base":180,"bytes":1096}],"logical_bytes":10000}`
	if got, err := encodeSegment(s); err != nil || string(got) != wantLogical {
		t.Fatalf("encodeSegment with LogicalBytes = %s, %v, want %s", got, err, wantLogical)
	}
	if back, err := decodeSegment([]byte(wantLogical)); err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("decodeSegment(%s) = %#v, %v, want %#v", wantLogical, back, err, s)
	}
	for _, lb := range []int64{0, 100} {
		s.LogicalBytes = lb
		if got, err := encodeSegment(s); err != nil || string(got) != want {
			t.Fatalf("encodeSegment with LogicalBytes %d = %s, %v, want %s", lb, got, err, want)
		}
	}

	// The zero time and nil objects are null; empty objects stay empty.
	open := Segment{Epoch: 1, Base: 5, Objects: []SegmentObject{}}
	const wantOpen = `{"v":1,"epoch":1,"base":5,"created_ns":null,"sealed":false,"end":0,"bytes":0,"max_time_ns":0,"objects":[]}`
	if got, err := encodeSegment(open); err != nil || string(got) != wantOpen {
		t.Fatalf("encodeSegment(%#v) = %s, %v, want %s", open, got, err, wantOpen)
	}
	for _, s := range []Segment{open, {Epoch: 1}} {
		enc, _ := encodeSegment(s)
		if back, err := decodeSegment(enc); err != nil || !reflect.DeepEqual(back, s) {
			t.Errorf("round trip of %#v: %#v, %v", s, back, err)
		}
	}

	for _, bad := range []Segment{
		{Created: time.Date(1677, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Created: time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Objects: []SegmentObject{{Key: "ok"}, {Key: "\xff"}}},
	} {
		if got, err := encodeSegment(bad); err == nil {
			t.Errorf("encodeSegment(%#v) = %s, want an error", bad, got)
		}
	}
	if _, err := encodeNewSegment(Segment{Sealed: true}); err == nil {
		t.Error("encodeNewSegment of a sealed segment succeeded, want an error")
	}

	// Pending is written only when set, after sealed.
	pending := Segment{Epoch: 1, Pending: true}
	const wantPending = `{"v":1,"epoch":1,"base":0,"created_ns":null,"sealed":false,"pending":true,"end":0,"bytes":0,"max_time_ns":0,"objects":null}`
	if got, err := encodeNewSegment(pending); err != nil || string(got) != wantPending {
		t.Fatalf("encodeNewSegment(%#v) = %s, %v, want %s", pending, got, err, wantPending)
	}
	if back, err := decodeSegment([]byte(wantPending)); err != nil || !reflect.DeepEqual(back, pending) {
		t.Fatalf("decodeSegment(%s) = %#v, %v, want %#v", wantPending, back, err, pending)
	}
	if _, err := encodeNewSegment(Segment{Pending: true, Base: 1}); err == nil {
		t.Error("encodeNewSegment of a pending segment with a base succeeded, want an error")
	}

	for _, bad := range []string{
		``,
		`{}`,
		`{"v":2,"epoch":1}`,
		`{"v":1,"epoch":-1}`,
		`{"v":1,"created_ns":"now"}`,
		`{"v":1,"created_ns":1e30}`,
		`{"v":1,"sealed":1}`,
		`{"v":1,"objects":{}}`,
		`{"v":1,"objects":[{"key":1}]}`,
		`{"v":1} x`,
		`[]`,
	} {
		if _, err := decodeSegment([]byte(bad)); err == nil {
			t.Errorf("decodeSegment(%s) succeeded, want an error", bad)
		}
	}
}

func FuzzDecodeSegment(f *testing.F) {
	f.Add([]byte(`{"v":1,"epoch":3,"base":100,"created_ns":1700000000000000001,"sealed":true,"end":250,"bytes":4096,"max_time_ns":1,"objects":[{"key":"0","base":100,"bytes":3000}]}`))
	f.Add([]byte(`{"v":1,"epoch":1,"base":5,"created_ns":null,"sealed":false,"end":0,"bytes":0,"max_time_ns":0,"objects":[]}`))
	f.Add([]byte(`{"v":1,"created_ns":-9223372036854775808,"objects":[{"key":"\ud800"}]}`))
	f.Add([]byte(`{"v":1,"sealed":true,"end":9,"bytes":40,"objects":[{"key":"0","bytes":40}],"logical_bytes":100}`))
	f.Add([]byte(`{"v":2}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		s, err := decodeSegment(v)
		if err != nil {
			return
		}
		enc, err := encodeSegment(s)
		if err != nil {
			t.Fatalf("encodeSegment(%#v): %v", s, err)
		}
		back, err := decodeSegment(enc)
		if err != nil {
			t.Fatalf("decodeSegment(%s): %v", enc, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip of %s: %#v, want %#v", v, back, s)
		}
	})
}
