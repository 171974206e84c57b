package client

import (
	"fmt"
	"strings"
)

// MaxNameBytes is the longest log name.
const MaxNameBytes = 255

// ValidateName reports whether name can name a log: 1 to 255 bytes of ASCII
// letters, digits, '.', '_', '-' and '/', where '/' separates non-empty
// namespace parts ("tenant/db/channel"), none of which is "." or "..":
// a name that reads as a path must not mean another one.
func ValidateName(name string) error {
	bad := len(name) == 0 || len(name) > MaxNameBytes ||
		strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//")
	for i := 0; i < len(name) && !bad; i++ {
		c := name[i]
		bad = !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-/", c) >= 0)
	}
	for part := range strings.SplitSeq(name, "/") {
		bad = bad || part == "." || part == ".."
	}
	if bad {
		return fmt.Errorf("%w: log %q: use 1 to %d bytes of letters, digits, '.', '_', '-', and '/' between non-empty parts other than \".\" and \"..\"", ErrInvalidName, name, MaxNameBytes)
	}
	return nil
}

// ValidateSubName reports whether name can name a subscription: 1 to 255
// bytes of ASCII letters, digits, '.', '_' and '-', other than "." and "..".
func ValidateSubName(name string) error {
	bad := len(name) == 0 || len(name) > MaxNameBytes || name == "." || name == ".."
	for i := 0; i < len(name) && !bad; i++ {
		c := name[i]
		bad = !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-", c) >= 0)
	}
	if bad {
		return fmt.Errorf("%w: subscription %q: use 1 to %d bytes of letters, digits, '.', '_' and '-', other than \".\" and \"..\"", ErrInvalidName, name, MaxNameBytes)
	}
	return nil
}
