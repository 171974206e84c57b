package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// entryShape is what tern append puts around each payload: the
// properties, and the largest payload that fits beside them.
type entryShape struct {
	maxPayload int
	props      map[string][]byte
	propBytes  int
}

// propsFlag is tern append's --prop KEY=VALUE, given once per property.
// Its zero value has no properties; m stays nil until one is given.
type propsFlag struct{ m map[string][]byte }

func (p propsFlag) String() string {
	keys := make([]string, 0, len(p.m))
	for k := range p.m {
		keys = append(keys, k+"="+string(p.m[k]))
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (p *propsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("not KEY=VALUE")
	}
	if _, dup := p.m[k]; dup {
		return flagMessage(fmt.Sprintf("property %q given twice: an entry has one value per key", k))
	}
	if p.m == nil {
		p.m = map[string][]byte{}
	}
	p.m[k] = []byte(v)
	return nil
}

func (*propsFlag) Type() string { return "KEY=VALUE" }
func (*propsFlag) form() string {
	return "KEY=VALUE with a KEY that is not empty, such as --prop source=web, once per property"
}

// bytes is what the properties count for in an entry's size.
func (p propsFlag) bytes() int {
	n := 0
	for k, v := range p.m {
		n += len(k) + len(v)
	}
	return n
}

// readEntryFile reads file as one payload of at most limit bytes, refusing
// a larger one before reading it.
func readEntryFile(file string, limit, propBytes int) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("--file %s is not a regular file: to append what a pipe or device gives, use --raw with it as stdin", file)
	}
	if fi.Size() > int64(limit) {
		return nil, tooLargeErr(fmt.Sprintf("file %s has %d bytes", file, fi.Size()), limit, propBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	if len(b) > limit { // it grew since Stat
		return nil, tooLargeErr(fmt.Sprintf("file %s has over %d bytes", file, limit), limit, propBytes)
	}
	return b, nil
}

// readEntryStdin reads all of in as one payload of at most limit bytes.
func readEntryStdin(ctx context.Context, in io.Reader, limit, propBytes int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(interruptible(ctx, in), int64(limit)+1))
	switch {
	case errors.Is(err, context.Canceled):
		return nil, errors.New("interrupted while reading stdin: nothing was appended")
	case err != nil:
		return nil, fmt.Errorf("read stdin: %w", err)
	case len(b) > limit:
		return nil, tooLargeErr(fmt.Sprintf("stdin has over %d bytes", limit), limit, propBytes)
	}
	return b, nil
}

func tooLargeErr(what string, limit, propBytes int) error {
	largest := "the largest entry this log takes (its --max-entry-bytes)"
	if propBytes > 0 {
		largest = fmt.Sprintf("the largest entry this log takes (its --max-entry-bytes) less the %d bytes of the properties", propBytes)
	}
	return fmt.Errorf("%s, over %d, %s: nothing was appended", what, limit, largest)
}
