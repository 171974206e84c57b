package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readJSON reads log x of dir with --format json.
func readJSON(t *testing.T, dir string, args ...string) []jsonEntry {
	t.Helper()
	var es []jsonEntry
	for line := range strings.Lines(must(t, dir, "", append([]string{"read", "x", "--format", "json"}, args...)...)) {
		var e jsonEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		es = append(es, e)
	}
	return es
}

// TestAppendWhole: --raw appends all of stdin as one entry and --file a
// file's bytes, both refused, with nothing sent, when over the log's
// largest entry; --prop (-H) sets properties on every entry, which read
// --format json prints.
func TestAppendWhole(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x", "--max-entry-bytes", "1KiB")
	if out := must(t, dir, "two\nlines\n", "append", "x", "--raw"); out != "0\n" {
		t.Fatalf("append --raw printed %q, want 0", out)
	}
	bin := append([]byte{0, 1, 2, 0xff, '\n'}, bytes.Repeat([]byte{7}, 995)...) // 1000 bytes
	file := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(file, bin, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := must(t, dir, "", "append", "x", "--file", file, "--prop", "kind=blob", "-H", "v=1"); out != "1\n" {
		t.Fatalf("append --file printed %q, want 1", out)
	}
	if out := must(t, dir, "a\nb\n", "append", "x", "-H", "source=web", "--prop", "empty=", "--batch", "2"); out != "2\n3\n" {
		t.Fatalf("append --prop printed %q", out)
	}
	must(t, dir, "c\n", "append", "x", "-H", "bin=\x01")
	es := readJSON(t, dir)
	if len(es) != 5 {
		t.Fatalf("read %d entries, want 5", len(es))
	}
	if p, _ := base64.StdEncoding.DecodeString(es[0].Payload); string(p) != "two\nlines\n" || es[0].Encoding != "base64" {
		t.Errorf("--raw entry: %+v, want the two lines and their newlines", es[0])
	}
	if p, _ := base64.StdEncoding.DecodeString(es[1].Payload); !bytes.Equal(p, bin) || es[1].Encoding != "base64" || es[1].Properties["kind"] != "blob" || es[1].Properties["v"] != "1" {
		t.Errorf("--file entry: %+v", es[1])
	}
	for _, e := range es[2:4] {
		if len(e.Properties) != 2 || e.Properties["source"] != "web" || e.Properties["empty"] != "" || e.PropertiesEncoding != "" {
			t.Errorf("--prop entry: %+v", e)
		}
	}
	if e := es[4]; e.PropertiesEncoding != "base64" || e.Properties["bin"] != "AQ==" {
		t.Errorf("entry with a binary property: %+v", e)
	}
	if out := must(t, dir, "", "read", "x", "--from", "2", "--limit", "1"); out != "a\n" {
		t.Errorf("read --format text of an entry with properties printed %q", out)
	}

	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, 1025), 0o600); err != nil {
		t.Fatal(err)
	}
	fails(t, 1, dir, "", []string{"append", "x", "--file", big}, "file "+big+" has 1025 bytes, over 1024", "--max-entry-bytes", "nothing was appended")
	fails(t, 1, dir, "", []string{"append", "x", "--file", file, "-H", "k=" + strings.Repeat("v", 30)}, "has 1000 bytes, over 993", "less the 31 bytes of the properties")
	fails(t, 1, dir, string(make([]byte, 1025)), []string{"append", "x", "--raw"}, "stdin has over 1024 bytes", "nothing was appended")
	fails(t, 1, dir, strings.Repeat("y", 1023)+"\n", []string{"append", "x", "-H", "k=v"}, "line 1 is longer than 1022 bytes", "less the 2 bytes of the properties")
	fails(t, 1, dir, "", []string{"append", "x", "--file", filepath.Join(dir, "nope")}, "--file: open", "no such file")
	fails(t, 1, dir, "", []string{"append", "x", "--file", dir}, "is not a regular file", "--raw")
	if n := len(readJSON(t, dir)); n != 5 {
		t.Errorf("after the refused appends the log has %d entries, want 5", n)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--prop", "novalue"}, "--prop: novalue is not valid: give KEY=VALUE"},
		{[]string{"-H", "=v"}, "--prop: =v is not valid: give KEY=VALUE"},
		{[]string{"-H", "k=1", "-H", "k=2"}, `--prop: property "k" given twice`},
		{[]string{"--raw", "--file", file}, "give one"},
		{[]string{"--raw", "--batch", "2"}, "leave --batch out"},
	} {
		fails(t, 2, dir, "", append([]string{"append", "x"}, tc.args...), tc.want)
	}
}
