package meta

import (
	"bytes"
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
