package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestAppendRead(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	var in, want strings.Builder
	for i := range 3000 { // beyond maxInFlight
		fmt.Fprintf(&in, "entry %d\n", i)
		fmt.Fprintf(&want, "%d\n", i)
	}
	if out := must(t, dir, in.String(), "append", "x"); out != want.String() {
		t.Fatalf("append printed %d lines, not the offsets 0 to 2999 in order", strings.Count(out, "\n"))
	}
	if out := must(t, dir, "", "read", "x"); out != in.String() {
		t.Fatalf("read printed %d bytes, not what was appended", len(out))
	}
	// No newline at the end, and an empty line, are entries too; a
	// carriage return before the newline is dropped.
	if out := must(t, dir, "crlf\r\n\nlast", "append", "x"); out != "3000\n3001\n3002\n" {
		t.Fatalf("append printed %q", out)
	}
	if out := must(t, dir, "", "read", "x", "--from", "3000"); out != "crlf\n\nlast\n" {
		t.Fatalf("read printed %q", out)
	}
	if out := must(t, dir, "", "append", "x"); out != "" {
		t.Fatalf("append of nothing printed %q", out)
	}
}

func TestAppendBatch(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "", "log", "create", "x")
	if out := must(t, dir, "a\nb\nc\nd\ne\n", "append", "x", "--batch", "2"); out != "0\n1\n2\n3\n4\n" {
		t.Fatalf("append --batch 2 printed %q", out)
	}
	if out := must(t, dir, "f\ng\n", "append", "x", "--batch", "100"); out != "5\n6\n" {
		t.Fatalf("append --batch 100 printed %q", out)
	}
	if out := must(t, dir, "", "read", "x"); out != "a\nb\nc\nd\ne\nf\ng\n" {
		t.Fatalf("read printed %q", out)
	}
}

func TestAppendOversizedLine(t *testing.T) {
	for _, batch := range []string{"1", "3"} {
		t.Run("batch="+batch, func(t *testing.T) {
			dir := t.TempDir()
			must(t, dir, "", "log", "create", "x", "--max-entry-bytes", "10")
			// A line of exactly 10 bytes fits, even before "\r\n".
			in := "0123456789\n0123456789\r\nshort\n" + "01234567890\n" + "after\n"
			r := ternIn(t, dir, in, "append", "x", "--batch", batch)
			if r.code != 1 || r.stdout != "0\n1\n2\n" {
				t.Fatalf("exit %d, printed %q, want exit 1 and the offsets 0 to 2", r.code, r.stdout)
			}
			for _, want := range []string{"tern: line 4 is longer than 10 bytes", "line 4 and the lines after it were not"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			// Far over the limit, the scanner gives up on its own.
			r = ternIn(t, dir, "ok\n"+strings.Repeat("z", 100_000)+"\n", "append", "x", "--batch", batch)
			if r.code != 1 || r.stdout != "3\n" || !strings.Contains(r.stderr, "line 2 is longer than 10 bytes") {
				t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if out := must(t, dir, "", "read", "x"); out != "0123456789\n0123456789\nshort\nok\n" {
				t.Fatalf("read printed %q", out)
			}
		})
	}
}
