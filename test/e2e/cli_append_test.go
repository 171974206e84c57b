package e2e

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIAppendWholeEntries: on a server, tern append --raw and --file
// append one entry each, with the properties of --prop and -H, which read
// --format json prints; a file over the log's largest entry is refused
// before anything is sent.
func TestCLIAppendWholeEntries(t *testing.T) {
	srv := startServer(t, t.TempDir())
	runCLI(t, srv.addr, "", 0, "log", "create", "blobs", "--max-entry-bytes", "4KiB")
	blob := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(blob, []byte{0, 1, 2, 3, 0xfe, 0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, 5000), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := runCLI(t, srv.addr, "", 0, "append", "blobs", "--file", blob, "-H", "type=image/png", "--prop", "id=7"); out != "0\n" {
		t.Errorf("append --file printed %q, want 0", out)
	}
	if out, _ := runCLI(t, srv.addr, "all\nof it", 0, "append", "blobs", "--raw"); out != "1\n" {
		t.Errorf("append --raw printed %q, want 1", out)
	}
	if _, stderr := runCLI(t, srv.addr, "", 1, "append", "blobs", "--file", big); !strings.Contains(stderr, "has 5000 bytes, over 4096") || !strings.Contains(stderr, "nothing was appended") {
		t.Errorf("append --file of 5000 bytes to a log of 4KiB entries:\n%s", stderr)
	}
	out, _ := runCLI(t, srv.addr, "", 0, "read", "blobs", "--format", "json")
	type entry struct {
		Offset     int
		Payload    string
		Encoding   string
		Properties map[string]string
	}
	var es []entry
	for line := range strings.Lines(out) {
		var e entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		es = append(es, e)
	}
	if len(es) != 2 {
		t.Fatalf("read printed %d entries, want 2:\n%s", len(es), out)
	}
	if p, _ := base64.StdEncoding.DecodeString(es[0].Payload); string(p) != "\x00\x01\x02\x03\xfe\xff" || es[0].Properties["type"] != "image/png" || es[0].Properties["id"] != "7" {
		t.Errorf("the --file entry: %+v", es[0])
	}
	if p, _ := base64.StdEncoding.DecodeString(es[1].Payload); string(p) != "all\nof it" || es[1].Properties != nil {
		t.Errorf("the --raw entry: %+v", es[1])
	}
}
