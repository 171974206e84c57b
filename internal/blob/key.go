package blob

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// checkKey returns an error wrapping ErrInvalidKey if key breaks the rules
// in the package comment.
func checkKey(key string) error {
	if why := keyProblem(key); why != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why)
	}
	return nil
}

// checkPrefix returns an error wrapping ErrInvalidKey if prefix cannot start
// a valid key: the part up to its last slash must be a valid key, and the
// rest may be the beginning of any segment.
func checkPrefix(prefix string) error {
	why := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		why = keyProblem(prefix[:i])
	}
	switch {
	case why != "":
	case strings.IndexByte(prefix, 0) >= 0:
		why = "has a NUL byte"
	case !utf8.ValidString(prefix):
		why = "is not UTF-8"
	}
	if why != "" {
		return fmt.Errorf("%w: prefix %q: %s", ErrInvalidKey, prefix, why)
	}
	return nil
}

// keyProblem says what is wrong with key, or returns "".
func keyProblem(key string) string {
	switch {
	case key == "":
		return "empty"
	case strings.HasPrefix(key, "/"):
		return "starts with a slash"
	case strings.HasSuffix(key, "/"):
		return "ends with a slash"
	case strings.IndexByte(key, 0) >= 0:
		return "has a NUL byte"
	case !utf8.ValidString(key):
		return "is not UTF-8"
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return "has an empty segment"
		case ".", "..":
			return fmt.Sprintf("has a %q segment", seg)
		}
	}
	return ""
}
