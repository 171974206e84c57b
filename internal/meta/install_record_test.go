package meta

import (
	"testing"
	"time"
)

// A log record with an installation carries it; one without, as every
// record written before installations had IDs, decodes to none and is
// written back the same.
func TestRecordInstallation(t *testing.T) {
	l := Log{ID: 7, Created: time.UnixMicro(1700000000000001).UTC(), Epoch: 3, Start: 10, Installation: "MB3HYQ6N2T5WJQKUXA7VCZ4L2E"}
	const want = `{"v":1,"id":7,"created_us":1700000000000001,"options":null,"epoch":3,"start":10,"installation":"MB3HYQ6N2T5WJQKUXA7VCZ4L2E"}`
	got, err := encodeLog(l)
	if err != nil || string(got) != want {
		t.Fatalf("encodeLog = %s, %v, want %s", got, err, want)
	}
	back, err := decodeLog(got)
	if err != nil || back.Installation != l.Installation {
		t.Fatalf("decodeLog(%s) = %+v, %v, want Installation %q", got, back, err, l.Installation)
	}
	const old = `{"v":1,"id":7,"created_us":1700000000000001,"options":null,"epoch":3,"start":10}`
	back, err = decodeLog([]byte(old))
	if err != nil || back.Installation != "" {
		t.Fatalf("decodeLog(%s) = %+v, %v, want no Installation", old, back, err)
	}
	if again, _ := encodeLog(back); string(again) != old {
		t.Fatalf("encodeLog(decodeLog(%s)) = %s", old, again)
	}
}

func TestInstallRecordFormat(t *testing.T) {
	in := Installation{ID: "MB3HYQ6N2T5WJQKUXA7VCZ4L2E", Created: time.UnixMicro(1700000000000001).UTC()}
	const want = `{"v":1,"id":"MB3HYQ6N2T5WJQKUXA7VCZ4L2E","created_us":1700000000000001}`
	if got := encodeInstallation(in); string(got) != want {
		t.Fatalf("encodeInstallation = %s, want %s", got, want)
	}
	back, err := decodeInstallation([]byte(want))
	if err != nil || back != in {
		t.Fatalf("decodeInstallation = %+v, %v, want %+v", back, err, in)
	}
	for _, bad := range []string{``, `{}`, `{"v":2,"id":"A"}`, `{"v":1}`, `{"v":1,"id":""}`, `[]`} {
		if _, err := decodeInstallation([]byte(bad)); err == nil {
			t.Errorf("decodeInstallation(%s) succeeded, want an error", bad)
		}
	}
}
