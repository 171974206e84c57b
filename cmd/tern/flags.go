package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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
func (fsyncFlag) form() string {
	return "always, interval:DURATION with a positive DURATION such as interval:10ms (unsafe), or never (unsafe)"
}

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
func (modeFlag) form() string { return "local, object or quorum" }

type compressionFlag struct{ c *tern.Compression }

func (f compressionFlag) String() string {
	if f.c == nil {
		return ""
	}
	return string(*f.c)
}

func (f compressionFlag) Set(s string) error {
	v, err := tern.ParseCompression(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "tern: "))
	}
	*f.c = v
	return nil
}

func (compressionFlag) Type() string { return "none|zstd|lz4" }
func (compressionFlag) form() string { return "none, zstd or lz4" }

// flagMessage is an error of a flag's Value that says all there is to say
// after the flag's name.
type flagMessage string

func (m flagMessage) Error() string { return string(m) }

// formed is a flag value that says which values it takes, for flagError.
type formed interface{ form() string }

func (sizeFlag) form() string { return units.BytesForm }

// durationFlag is a pflag.Value of a duration, parsed by
// units.ParseDuration, so that "3d" is a duration wherever one is.
type durationFlag struct{ d *time.Duration }

// durationVar defines a duration flag of fs, as fs.DurationVar does.
func durationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationFlag{p}, name, usage)
}

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "0" // so that pflag prints no default
	}
	return units.FormatDuration(*f.d)
}

func (f durationFlag) Set(s string) error {
	d, err := units.ParseDuration(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "units: "))
	}
	*f.d = d
	return nil
}

func (durationFlag) Type() string { return "duration" }
func (durationFlag) form() string { return units.DurationForm }

// number is what a numberFlag holds.
type number interface{ int | int64 | uint64 }

// numberFlag is a pflag.Value of a whole number of at least min.
type numberFlag[T number] struct {
	p   *T
	min T
}

// errTooSmall is a numberFlag's value below its min: flagError says which
// values the flag takes.
var errTooSmall = errors.New("too small")

// numberVar defines a flag of fs holding a whole number of at least min.
func numberVar[T number](fs *pflag.FlagSet, p *T, name string, value, min T, usage string) {
	*p = value
	fs.Var(numberFlag[T]{p, min}, name, usage)
}

func (f numberFlag[T]) String() string {
	if f.p == nil {
		return "0"
	}
	return fmt.Sprint(*f.p)
}

func (f numberFlag[T]) Set(s string) error {
	var v T
	switch any(v).(type) {
	case uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		v = T(n)
	default:
		n, err := strconv.ParseInt(s, 10, strconv.IntSize)
		if _, ok := any(v).(int64); ok {
			n, err = strconv.ParseInt(s, 10, 64)
		}
		if err != nil {
			return err
		}
		v = T(n)
	}
	if v < f.min {
		return errTooSmall
	}
	*f.p = v
	return nil
}

func (numberFlag[T]) Type() string { return "int" }
func (f numberFlag[T]) form() string {
	return fmt.Sprintf("a whole number, %d or more", f.min)
}

// orAnnotation names, on a flag, what a user may give instead of a value:
// flagError adds it to the values the flag takes.
const orAnnotation = "tern_or"

// flagError rewrites the errors of parsing flags to say what is wrong and
// what the flag takes: a bad value names the flag and the accepted form,
// and a negative number where a positional number is expected says so
// instead of "unknown shorthand flag".
func flagError(cmd *cobra.Command, err error) error {
	if e, ok := errors.AsType[*pflag.InvalidValueError](err); ok {
		return invalidValue(e.GetFlag(), e.GetValue(), e.Unwrap())
	}
	if e, ok := errors.AsType[*pflag.ValueRequiredError](err); ok {
		if form := valueForm(e.GetFlag()); form != "" {
			return fmt.Errorf("--%s needs a value: give %s", e.GetFlag().Name, form)
		}
		return fmt.Errorf("--%s needs a value", e.GetFlag().Name)
	}
	if e, ok := errors.AsType[*pflag.NotExistError](err); ok && e.GetSpecifiedShortnames() != "" {
		arg := "-" + e.GetSpecifiedShortnames()
		if _, perr := strconv.ParseFloat(arg, 64); perr == nil {
			if strings.Contains(cmd.Use, "OFFSET") {
				return fmt.Errorf("OFFSET %s is not an offset: give a whole number, 0 or more", arg)
			}
			return fmt.Errorf("%s is neither a flag nor an argument %s takes: its numbers are 0 or more", arg, cmd.CommandPath())
		}
	}
	return err
}

// invalidValue is the error of flag f given value, which its Value refused
// with cause.
func invalidValue(f *pflag.Flag, value string, cause error) error {
	form := valueForm(f)
	if _, ok := errors.AsType[flagMessage](cause); form == "" || ok { // the Value's error says it all
		return fmt.Errorf("--%s: %v", f.Name, cause)
	}
	shown := value
	if value == "" || strings.ContainsAny(value, " \t\"'") {
		shown = strconv.Quote(value)
	}
	switch {
	case errors.Is(cause, errTooSmall):
		return fmt.Errorf("--%s: %s is too small: give %s", f.Name, shown, form)
	case errors.Is(cause, strconv.ErrRange):
		return fmt.Errorf("--%s: %s is out of range: give %s", f.Name, shown, form)
	}
	return fmt.Errorf("--%s: %s is not %s: give %s", f.Name, shown, valueNoun(f), form)
}

// valueForm says which values flag f takes, or "" if its Value's errors
// say so themselves.
func valueForm(f *pflag.Flag) string {
	form := ""
	if v, ok := f.Value.(formed); ok {
		form = v.form()
	} else {
		switch f.Value.Type() {
		case "int", "int8", "int16", "int32", "int64":
			form = "a whole number"
		case "uint", "uint8", "uint16", "uint32", "uint64":
			form = "a whole number, 0 or more"
		case "float32", "float64":
			form = "a number, such as 100 or 2.5"
		case "bool":
			form = "true or false"
		}
	}
	if or := f.Annotations[orAnnotation]; form != "" && len(or) > 0 {
		form += ", or " + strings.Join(or, ", or ")
	}
	return form
}

// valueNoun is what flag f takes, with its article: "an offset", "a size".
func valueNoun(f *pflag.Flag) string {
	name, _ := pflag.UnquoteUsage(f)
	switch name {
	case "", "N", "int", "uint", "float", "int32", "uint32":
		return "a number"
	}
	if strings.ContainsAny(name, "|= ") {
		return "valid"
	}
	if strings.ContainsRune("aeiou", rune(name[0])) {
		return "an " + name
	}
	return "a " + name
}
