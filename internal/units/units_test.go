package units

import (
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
