package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestLogCompression: log create --compression makes a log whose entries
// read back as appended, and describe (plain and --json) gives its
// compression, the bytes it stores and the larger bytes appended.
func TestLogCompression(t *testing.T) {
	dir := t.TempDir()
	var in strings.Builder
	for i := range 200 {
		fmt.Fprintf(&in, `{"id":%d,"user":"user-%d","op":"insert","tags":["alpha","beta","gamma"]}`+"\n", i, i%7)
	}
	for _, c := range []string{"zstd", "lz4", "none"} {
		must(t, dir, "", "log", "create", c, "--compression", c)
		must(t, dir, in.String(), "append", c, "--batch", "50")
		if got := must(t, dir, "", "read", c); got != in.String() {
			t.Fatalf("%s: read gives back %d bytes, want the %d appended", c, len(got), in.Len())
		}
		var j logJSON
		if err := json.Unmarshal([]byte(must(t, dir, "", "log", "describe", c, "--json")), &j); err != nil {
			t.Fatal(err)
		}
		if j.Options.Compression != c || j.Bytes <= 0 ||
			(c == "none" && j.LogicalBytes != j.Bytes) || (c != "none" && j.LogicalBytes < 2*j.Bytes) {
			t.Fatalf("describe --json of a %s log: compression %q, bytes %d, logical_bytes %d", c, j.Options.Compression, j.Bytes, j.LogicalBytes)
		}
		out := must(t, dir, "", "log", "describe", c)
		if !strings.Contains(out, "Compression:        "+c) || !strings.Contains(out, fmt.Sprintf("Logical bytes:      %d ", j.LogicalBytes)) {
			t.Fatalf("describe of a %s log:\n%s", c, out)
		}
	}
	fails(t, 2, dir, "", []string{"log", "create", "g", "--compression", "gzip"}, "gzip is not valid: give none, zstd or lz4")
}
