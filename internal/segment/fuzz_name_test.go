package segment_test

import (
	"path/filepath"
	"testing"

	"github.com/ternwal/tern/internal/segment"
)

// FuzzParseFileName parses arbitrary names found in a log's directory. A
// name it takes must be the one FileName gives for the base offset it
// returns, so that no two names are taken for the same segment.
func FuzzParseFileName(f *testing.F) {
	for _, name := range []string{segment.FileName(0), segment.FileName(1 << 63), "/data/logs/7/" + segment.FileName(12),
		"00000000000000000012.seg.tmp", "+0000000000000000012.seg", "99999999999999999999.seg", "12.seg"} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		base, ok := segment.ParseFileName(name)
		if ok && segment.FileName(base) != filepath.Base(name) {
			t.Fatalf("ParseFileName(%q) = %d, whose file is %q", name, base, segment.FileName(base))
		}
	})
}
