// Package units reads and writes sizes and durations as people type them
// on a command line and read them in a report: "64MiB", "1GB", "1h30m".
// What FormatBytes and FormatDuration print parses back with ParseBytes and
// time.ParseDuration to the same value.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

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
		return 0, fmt.Errorf("size %q: use a number of bytes, optionally with a unit: 4096, 64KiB, 64MiB, 1GiB (or KB, MB, GB for powers of 1000)", s)
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
