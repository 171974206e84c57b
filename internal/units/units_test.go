package units

import (
	"strings"
	"testing"
	"time"
)

func TestParseBytes(t *testing.T) {
	const bad = -1
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"4096", 4096}, {"64KiB", 64 << 10}, {"64MiB", 64 << 20}, {"1GiB", 1 << 30}, {"2TiB", 2 << 40},
		{"64mib", 64 << 20}, {"1 GiB", 1 << 30}, {"10B", 10}, {"5KB", 5000}, {"5MB", 5e6}, {"1GB", 1e9},
		{"9223372036854775807", 1<<63 - 1}, {"8388607TiB", 8388607 << 40},
		{"8388608TiB", bad}, {"", bad}, {"MiB", bad}, {"-1", bad}, {"1.5GiB", bad}, {"12XB", bad}, {"1G", bad},
	} {
		got, err := ParseBytes(tc.in)
		if (err != nil) != (tc.want == bad) || err == nil && got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 4096: "4KiB", 1536: "1.5KiB", 1025 << 10: "1.0MiB", 3 << 40: "3TiB", 5 << 50: "5120TiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"4096", "64MiB", "1 GB", "9223372036854775807", "-5", "kib"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
		if back, err := ParseBytes(FormatBytes(n)); err == nil && back != n {
			t.Fatalf("FormatBytes(%d) = %q parses to %d", n, FormatBytes(n), back)
		}
	})
}

// FuzzFormatDuration checks that every duration the CLI prints parses back
// to itself, as the flags and the config file parse it.
func FuzzFormatDuration(f *testing.F) {
	for _, d := range []time.Duration{0, 1, time.Hour, 90 * time.Minute, 20 * time.Millisecond, -time.Second, 1<<63 - 1, -1 << 63} {
		f.Add(int64(d))
	}
	f.Fuzz(func(t *testing.T, n int64) {
		s := FormatDuration(time.Duration(n))
		d, err := time.ParseDuration(s)
		if err != nil || d != time.Duration(n) {
			t.Fatalf("FormatDuration(%d) = %q, which parses to %d, %v", n, s, d, err)
		}
	})
}

func TestParseDuration(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"10s", 10 * time.Second, true}, {"1h30m", 90 * time.Minute, true},
		{"500ms", 500 * time.Millisecond, true}, {"1.5h", 90 * time.Minute, true}, {"-2s", -2 * time.Second, true},
		{"3d", 3 * day, true}, {"1w", 7 * day, true}, {"1.5d", 36 * time.Hour, true}, {"1d12h", 36 * time.Hour, true},
		{"2w3d4h5m", 17*day + 4*time.Hour + 5*time.Minute, true}, {"-1d", -day, true}, {"+1d", day, true},
		{"1h1d", 25 * time.Hour, true}, {"10µs", 10 * time.Microsecond, true}, {"1us", time.Microsecond, true},
		{"", 0, false}, {"d", 0, false}, {"3", 0, false}, {"3 d", 0, false}, {"3days", 0, false}, {"1y", 0, false},
		{"--1d", 0, false}, {"1d-1h", 0, false}, {"soon", 0, false}, {"1..5d", 0, false}, {"100000w", 0, false},
		{"15000w", 15000 * 7 * day, true}, {"2562047h", 2562047 * time.Hour, true}, {"106751d", 106751 * day, true}, {"106752d", 0, false},
	} {
		got, err := ParseDuration(tc.in)
		if (err == nil) != tc.ok || err == nil && got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "3d") && !strings.Contains(err.Error(), "too long") {
			t.Errorf("ParseDuration(%q): the error does not name the forms: %v", tc.in, err)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"3d", "1w2d3h", "1.5d", "-1h", "10s", "0", "106751d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		// What time.ParseDuration takes, ParseDuration takes the same way.
		if std, err := time.ParseDuration(s); err == nil && std != d {
			t.Fatalf("ParseDuration(%q) = %v, time.ParseDuration %v", s, d, std)
		}
		if back, err := ParseDuration(FormatDuration(d)); err != nil || back != d {
			t.Fatalf("FormatDuration(%v) = %q parses to %v, %v", d, FormatDuration(d), back, err)
		}
	})
}
