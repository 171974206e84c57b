package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ternwal/tern"
)

// A writer of one synchronous 1 KiB append at a time has its segment file
// written with zeros ahead of its appends; after a kill -9 the zeros are
// there, tern check notes them without calling anything damaged, and the
// restarted server has every acknowledged entry and appends after them.
// With --zero-ahead 0 the file ends at its last batch.
func TestZerosAheadAfterKill9(t *testing.T) {
	t.Run("default", func(t *testing.T) { zerosAfterKill9(t, true) })
	t.Run("zero-ahead 0", func(t *testing.T) { zerosAfterKill9(t, false, "--zero-ahead", "0") })
}

func zerosAfterKill9(t *testing.T, ahead bool, args ...string) {
	data := t.TempDir()
	srv := startServer(t, data, args...)
	c := openClient(t, srv.addr)
	ctx := deadline(t)
	l, err := c.CreateLog(ctx, "z", tern.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 400 // 400 KiB, past the first measure of the rounds
	payload := func(i int) []byte { return fmt.Appendf(nil, "%04d-%s", i, strings.Repeat("z", 1019)) }
	for i := range n {
		if off, err := w.Append(ctx, tern.Entry{Payload: payload(i)}); err != nil || off != tern.Offset(i) {
			t.Fatalf("append %d: %d, %v", i, off, err)
		}
	}
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.kill9()

	segs, err := filepath.Glob(filepath.Join(data, "logs", strconv.FormatUint(info.ID, 10), "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments: %v, %v", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	end := len(bytes.TrimRight(b, "\x00"))
	if zeros := len(b) - end; ahead && zeros < 256<<10 || !ahead && zeros != 0 {
		t.Fatalf("the open segment ends with %d zero bytes after %d bytes of batches (%v)", zeros, end, args)
	}
	out, err := ternCmd("check", data)
	if err != nil || ahead != strings.Contains(out, "bytes of zeros after offset 400") || !strings.Contains(out, "no damage") {
		t.Fatalf("tern check after the kill (%v): %v\n%s", args, err, out)
	}

	srv.restart()
	c = openClient(t, srv.addr)
	if l, err = c.OpenLog(ctx, "z"); err != nil {
		t.Fatal(err)
	}
	for i, e := range readAll(t, l, 0, n) {
		if !bytes.Equal(e.Payload, payload(i)) {
			t.Fatalf("offset %d after the restart holds %.20q", i, e.Payload)
		}
	}
	if w, err = l.OpenWriter(ctx); err != nil {
		t.Fatal(err)
	}
	if off, err := w.Append(ctx, tern.Entry{Payload: payload(n)}); err != nil || off != n {
		t.Fatalf("append after the restart: %d, %v; want offset %d", off, err, n)
	}
}
