// Package units reads and writes sizes and durations as people type them
// on a command line and read them in a report: "64MiB", "1GB", "1h30m",
// "3d". What FormatBytes and FormatDuration print parses back with
// ParseBytes and ParseDuration (and FormatDuration's with
// time.ParseDuration too) to the same value.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// BytesForm says which sizes ParseBytes takes, for error messages.
const BytesForm = "a number of bytes, optionally with a unit: 4096, 64KiB, 64MiB, 1GiB (or KB, MB, GB for powers of 1000)"

// DurationForm says which durations ParseDuration takes, for error messages.
const DurationForm = "a number with a unit: ns, us, ms, s, m, h, d (24h) or w (7d), such as 500ms, 10s, 90m, 3d or 1d12h"

// sizeUnits are the suffixes a size may carry, matched without regard to
// case. "K", "M" and "G" alone are refused: they are 1000 to some and 1024
// to others.
var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
}

// ParseBytes parses a size such as "4096", "64MiB" or "1GB".
func ParseBytes(s string) (int64, error) {
	num := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(s[len(num):]))]
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if !ok || err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: use %s", s, BytesForm)
	}
	if n > math.MaxInt64/unit {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * unit, nil
}

// FormatBytes formats n in the largest binary unit it reaches: exactly if it
// is a whole number of that unit ("64MiB", which parses back to n), else to
// one decimal ("1.5GiB").
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for i < len(units)-1 && n >= 1<<(10*(i+1)) {
		i++
	}
	if n%(1<<(10*i)) == 0 {
		return strconv.FormatInt(n>>(10*i), 10) + units[i]
	}
	return strconv.FormatFloat(float64(n)/float64(int64(1)<<(10*i)), 'f', 1, 64) + units[i]
}

// FormatDuration is d.String() without its zero minutes and seconds: "1h"
// rather than "1h0m0s". It parses back with time.ParseDuration.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// longUnits are the units ParseDuration takes beyond time.ParseDuration's.
var longUnits = map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour}

// ParseDuration parses a duration as time.ParseDuration does ("1h30m",
// "500ms", "-2s"), and also with the units d (24 hours) and w (7 days), alone
// or combined with the others: "3d", "1w", "1.5d", "1d12h". A day is 24
// hours here, whatever the calendar says.
func ParseDuration(s string) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("duration %q: use %s", s, DurationForm)
	}
	rest := strings.TrimLeft(s, "+-")
	if len(s)-len(rest) > 1 {
		return bad()
	}
	switch {
	case rest == "":
		return bad()
	case rest == "0":
		return 0, nil
	}
	neg := strings.HasPrefix(s, "-")
	var (
		total time.Duration // of the d and w parts
		std   strings.Builder
	)
	for rest != "" {
		num := rest[:len(rest)-len(strings.TrimLeft(rest, "0123456789."))]
		rest = rest[len(num):]
		unit := rest[:len(rest)-len(strings.TrimLeft(rest, "abcdefghijklmnopqrstuvwxyzµμ"))]
		rest = rest[len(unit):]
		if num == "" || unit == "" {
			return bad()
		}
		long, ok := longUnits[unit]
		if !ok {
			std.WriteString(num + unit)
			continue
		}
		n, err := time.ParseDuration(num + "h")
		if err != nil {
			return bad()
		}
		per := long / time.Hour
		if n > math.MaxInt64/per || total > math.MaxInt64-n*per {
			return 0, fmt.Errorf("duration %q is too long: at most 106751d (about 292 years)", s)
		}
		total += n * per
	}
	d := time.Duration(0)
	if std.Len() > 0 {
		var err error
		if d, err = time.ParseDuration(std.String()); err != nil {
			return bad() // an unknown unit, or over 290 years
		}
	}
	if d > math.MaxInt64-total {
		return 0, fmt.Errorf("duration %q is too long: at most 106751d (about 292 years)", s)
	}
	if neg {
		return -(d + total), nil
	}
	return d + total, nil
}
