package main

import (
	"errors"
	"strings"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/units"
)

// sizeFlag is a pflag.Value of bytes, parsed by parseBytes.
type sizeFlag struct{ n *int64 }

func (f sizeFlag) String() string {
	if f.n == nil || *f.n == 0 {
		return "0" // so that pflag prints no default
	}
	return units.FormatBytes(*f.n)
}

func (f sizeFlag) Set(s string) error {
	n, err := units.ParseBytes(s)
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
