package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ternwal/tern"
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

// parseBytes parses a size such as "4096", "64MiB" or "1GB".
func parseBytes(s string) (int64, error) {
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

// formatBytes formats n in the largest binary unit it reaches: exactly if it
// is a whole number of that unit ("64MiB", which parses back to n), else to
// one decimal ("1.5GiB").
func formatBytes(n int64) string {
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

// formatDuration is d.String() without its zero minutes and seconds: "1h"
// rather than "1h0m0s". It parses back with time.ParseDuration.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// sizeFlag is a pflag.Value of bytes, parsed by parseBytes.
type sizeFlag struct{ n *int64 }

func (f sizeFlag) String() string {
	if f.n == nil || *f.n == 0 {
		return "0" // so that pflag prints no default
	}
	return formatBytes(*f.n)
}

func (f sizeFlag) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

func (sizeFlag) Type() string { return "size" }

// fsyncFlag is a pflag.Value parsed by tern.ParseFsync.
type fsyncFlag struct{ f *tern.Fsync }

func (f fsyncFlag) String() string {
	if f.f == nil {
		return ""
	}
	return f.f.String()
}

func (f fsyncFlag) Set(s string) error {
	v, err := tern.ParseFsync(s)
	if err != nil {
		// pflag puts its own words first; the library's prefix would repeat ours.
		return errors.New(strings.TrimPrefix(err.Error(), "tern: "))
	}
	*f.f = v
	return nil
}

func (fsyncFlag) Type() string { return "mode" }

// modeFlag is a pflag.Value parsed by tern.ParseMode.
type modeFlag struct{ m *tern.Mode }

func (f modeFlag) String() string {
	if f.m == nil {
		return ""
	}
	return string(*f.m)
}

func (f modeFlag) Set(s string) error {
	v, err := tern.ParseMode(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "tern: "))
	}
	*f.m = v
	return nil
}

func (modeFlag) Type() string { return "local|object|quorum" }
