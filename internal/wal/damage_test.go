package wal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// crashedLog appends n entries to a log on a MemFS, one batch each, and
// returns the files a crash leaves (the segment open), the segment's path,
// and the file position of each batch.
func crashedLog(t *testing.T, n int) (*vfs.MemFS, string, []int64) {
	t.Helper()
	fs := vfs.NewMem()
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		appendWait(t, l, 1, fmt.Sprintf("entry %d %s", i, strings.Repeat("x", 50)))
	}
	crashed := fs.Crash(rand.New(rand.NewPCG(1, 2)))
	l.Close()
	path := "/log/" + segment.FileName(0)
	data := mustRead(t, crashed, path)
	var pos []int64
	for p := int64(segment.HeaderBytes); p < int64(len(data)); {
		h, err := record.ParseHeader(data[p:])
		if err != nil {
			t.Fatalf("batch at %d: %v", p, err)
		}
		pos = append(pos, p)
		p += int64(h.Length)
	}
	if len(pos) != n {
		t.Fatalf("%d batches, want %d", len(pos), n)
	}
	return crashed, path, pos
}

// readAll reads the log from 0 to its end and checks every entry.
func readAll(t *testing.T, l *Log, prefix func(i int) string) {
	t.Helper()
	end := l.Stats().End
	r, err := l.NewReader(0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, e := range readN(t, r, int(end), true) {
		if e.Offset != uint64(i) || string(e.Payload) != prefix(i) {
			t.Fatalf("offset %d holds %d %q, want %q", i, e.Offset, e.Payload, prefix(i))
		}
	}
}

// A byte flipped in the middle of the open segment, before whole batches,
// opens the log degraded: the batches before the damage are read, appends
// fail with ErrDamaged naming the file and byte, the damage is logged once
// at Error, and nothing is cut until Repair is told to accept the loss;
// then the cut is recorded and the log takes appends from there.
func TestDegradedOpenAndRepair(t *testing.T) {
	fs, path, pos := crashedLog(t, 20)
	payload := func(i int) string { return fmt.Sprintf("entry %d %s", i, strings.Repeat("x", 50)) }
	overwrite(t, fs, path, pos[10]+record.HeaderBytes+3, []byte{0xee})
	size := int64(len(mustRead(t, fs, path)))
	var logged bytes.Buffer
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("Open: %v, want the log opened degraded", err)
	}
	defer func() { l.Close() }()
	d := l.Damage()
	if d == nil || d.Path != path || d.Pos != pos[10] || d.Prefix.Next != 10 || d.Batches != 9 || d.Entries != 9 || d.CutBytes() != size-pos[10] {
		t.Fatalf("damage %+v, want at byte %d of %s after offset 10, 9 batches after it", d, pos[10], path)
	}
	if st := l.Stats(); st.End != 10 {
		t.Fatalf("the degraded log ends at %d, want 10", st.End)
	}
	readAll(t, l, payload)
	_, err = l.Append(1, []record.Entry{{Payload: []byte("refused")}}, engine.AppendOptions{})
	want := fmt.Sprintf("%s is corrupt at byte %d", path, pos[10])
	if !errors.Is(err, rpcerr.ErrDamaged) || !strings.Contains(err.Error(), want) {
		t.Fatalf("append: %v, want ErrDamaged saying %q", err, want)
	}
	if rpcerr.Status(err).Code().String() != "DataLoss" {
		t.Fatalf("append fails with status %v, want DATA_LOSS", rpcerr.Status(err).Code())
	}
	if n := strings.Count(logged.String(), "level=ERROR"); n != 1 || !strings.Contains(logged.String(), fmt.Sprintf("byte=%d", pos[10])) {
		t.Fatalf("logged %d errors, want one naming the byte: %s", n, logged.String())
	}

	// The dry run changes nothing.
	if dry, err := l.Repair(false); err != nil || dry != d {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	if got := int64(len(mustRead(t, fs, path))); got != size {
		t.Fatalf("the dry run changed the file from %d to %d bytes", size, got)
	}
	if _, err := l.Append(1, []record.Entry{{Payload: []byte("refused")}}, engine.AppendOptions{}); !errors.Is(err, rpcerr.ErrDamaged) {
		t.Fatalf("append after the dry run: %v, want ErrDamaged", err)
	}

	cut, err := l.Repair(true)
	if err != nil || cut == nil || cut.Pos != pos[10] {
		t.Fatalf("repair: %+v, %v", cut, err)
	}
	if got := int64(len(mustRead(t, fs, path))); got != pos[10] {
		t.Fatalf("the repaired segment is %d bytes, want %d", got, pos[10])
	}
	rec := string(mustRead(t, fs, "/log/"+RepairsName))
	if !strings.Contains(rec, fmt.Sprintf("cut %s at byte %d", path, pos[10])) || !strings.Contains(rec, "9 valid batches of 9 entries") {
		t.Fatalf("the repair record says %q", rec)
	}
	if l.Damage() != nil {
		t.Fatal("still degraded after the repair")
	}
	if off := appendWait(t, l, 1, payload(10)); off != 10 {
		t.Fatalf("the first append after the repair got offset %d, want 10", off)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1}); err != nil || l.Damage() != nil {
		t.Fatalf("reopen after the repair: %v, damage %+v", err, l.Damage())
	}
	readAll(t, l, payload)
	if st := l.Stats(); st.End != 11 {
		t.Fatalf("the log ends at %d after the repair and an append, want 11", st.End)
	}
}

// A segment whose header is damaged, in a file longer than a sector, opens
// the log degraded with nothing of that segment readable; the repair
// removes the file and the log goes on at its base offset.
func TestDegradedBadHeader(t *testing.T) {
	fs, path, _ := crashedLog(t, 20)
	overwrite(t, fs, path, 2, []byte{0xff})
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { l.Close() }()
	if d := l.Damage(); d == nil || d.Pos != 0 || d.Batches != 20 {
		t.Fatalf("damage %+v, want at byte 0 with 20 batches after it", d)
	}
	if _, err := l.Repair(true); err != nil {
		t.Fatal(err)
	}
	if off := appendWait(t, l, 1, "again"); off != 0 {
		t.Fatalf("append after the repair got offset %d, want 0", off)
	}
}

// Check finds nothing wrong with a whole log, notes a torn tail without
// calling it damage, and reports a flipped byte in the open segment and
// in a sealed one as damage naming the file and byte.
func TestCheck(t *testing.T) {
	fs, path, pos := crashedLog(t, 20)
	if r, err := Check(fs, "/log"); err != nil || len(r.Findings) != 0 || r.End != 20 || r.Segments != 1 {
		t.Fatalf("check of a whole log: %+v, %v", r, err)
	}

	torn := fs.Crash(rand.New(rand.NewPCG(5, 6)))
	data := mustRead(t, torn, path)
	if err := vfs.WriteFile(torn, path, data[:len(data)-5]); err != nil {
		t.Fatal(err)
	}
	r, err := Check(torn, "/log")
	if err != nil || r.Damaged() || len(r.Findings) != 1 || !strings.Contains(r.Findings[0].What, "torn tail") || r.End != 19 {
		t.Fatalf("check of a torn tail: %+v, %v; want a note, no damage", r, err)
	}

	overwrite(t, fs, path, pos[5]+record.HeaderBytes+1, []byte{0xee})
	r, err = Check(fs, "/log")
	if err != nil || !r.Damaged() || r.Findings[0].Path != path || r.Findings[0].Pos != pos[5] {
		t.Fatalf("check of a damaged open segment: %+v, %v; want damage at byte %d", r, err, pos[5])
	}

	// A sealed segment: a log closed cleanly, then a byte of a batch flipped.
	sealedFS, sealed := closedLog(t, 10)
	overwrite(t, sealedFS, sealed, segment.HeaderBytes+record.HeaderBytes+2, []byte{0xee})
	r, err = Check(sealedFS, "/log")
	if err != nil || !r.Damaged() || r.Findings[0].Path != sealed || r.Findings[0].Pos != segment.HeaderBytes {
		t.Fatalf("check of a damaged sealed segment: %+v, %v", r, err)
	}
}

// A whole, valid batch with an offset out of order (a batch written twice)
// is damage too, and is counted among the batches the repair would cut.
func TestDegradedOffsetOutOfOrder(t *testing.T) {
	fs, path, pos := crashedLog(t, 20)
	data := mustRead(t, fs, path)
	copy(data[pos[5]:pos[6]], data[pos[2]:pos[3]]) // entries 0 to 9 are of one size
	if err := vfs.WriteFile(fs, path, data); err != nil {
		t.Fatal(err)
	}
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	d := l.Damage()
	if d == nil || d.Pos != pos[5] || d.Prefix.Next != 5 || d.Batches != 15 || !strings.Contains(fmt.Sprint(d.Err), "offset 2, expected 5") {
		t.Fatalf("damage %+v, want at byte %d, the batch of offset 2 and 14 more after it", d, pos[5])
	}
}
