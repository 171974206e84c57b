package wal

import (
	"bytes"
	"errors"
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

// closedLog appends n entries to a log on a MemFS, one round each, closes
// it cleanly and returns the file system and the path of its one segment.
func closedLog(t *testing.T, n int) (*vfs.MemFS, string) {
	t.Helper()
	fs := vfs.NewMem()
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		appendWait(t, l, 1, strings.Repeat("x", 100+i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := fs.List("/log")
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, name := range names {
		if _, ok := segment.ParseFileName(name); ok {
			segs = append(segs, "/log/"+name)
		}
	}
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	return fs, segs[0]
}

// overwrite replaces the bytes of path from off on with b.
func overwrite(t *testing.T, fs vfs.FS, path string, off int64, b []byte) {
	t.Helper()
	data := mustRead(t, fs, path)
	copy(data[off:], b)
	if err := vfs.WriteFile(fs, path, data); err != nil {
		t.Fatal(err)
	}
}

// A log closed cleanly records where it ends, so damage that wipes the
// footer and the last batches of its last segment, which a scan would take
// for a torn tail left by a crash, opens the log degraded and the file is
// left as it was; damage to the footer alone loses nothing, and the log
// opens.
func TestClosedRecordDetectsDamagedTail(t *testing.T) {
	fs, path := closedLog(t, 10)
	info, err := segment.ReadSealed(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	last := info.Index[len(info.Index)-1].Pos // the footer's index holds the first batch only
	for _, tc := range []struct {
		name    string
		from    int64 // zeroed from here to the end of the file
		corrupt bool
	}{
		{"footer", info.End, false},
		{"last batches and footer", info.End - 300, true},
		{"every batch and footer", last, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			damaged := fs.Crash(rand.New(rand.NewPCG(1, 2)))
			overwrite(t, damaged, path, tc.from, make([]byte, info.Size-tc.from))
			l, err := Open(t.Context(), Options{FS: damaged, Dir: "/log", Epoch: 1})
			if !tc.corrupt {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer l.Close()
				if st := l.Stats(); st.End != info.Next {
					t.Fatalf("the log ends at %d, want %d", st.End, info.Next)
				}
				return
			}
			// The log opens degraded: what the record says was
			// acknowledged is not taken for a torn write.
			if err != nil {
				t.Fatalf("Open: %v, want the log opened degraded", err)
			}
			d := l.Damage()
			if d == nil || d.Acked != info.Next || d.Prefix.Next >= info.Next {
				l.Close()
				t.Fatalf("damage %+v, want the log degraded below offset %d, which the closed record names", d, info.Next)
			}
			if _, err := l.Append(1, []record.Entry{{Payload: []byte("x")}}, engine.AppendOptions{}); !errors.Is(err, rpcerr.ErrDamaged) {
				t.Fatalf("append to a degraded log: %v, want ErrDamaged", err)
			}
			l.Close()
			if fi, err := damaged.Stat(path); err != nil || fi.Size() != info.Size {
				t.Fatalf("the damaged segment was changed: %v, %v", fi, err)
			}
			// Removing the record, as the error says, accepts the loss.
			if err := errors.Join(damaged.Remove("/log/"+closedName), damaged.SyncDir("/log")); err != nil {
				t.Fatal(err)
			}
			if l, err = Open(t.Context(), Options{FS: damaged, Dir: "/log", Epoch: 1}); err != nil {
				t.Fatalf("Open without the record: %v", err)
			}
			l.Close()
		})
	}
}

// A log whose last segment is gone after a clean close does not open as a
// shorter log.
func TestClosedRecordDetectsMissingSegment(t *testing.T) {
	fs, path := closedLog(t, 3)
	if err := errors.Join(fs.Remove(path), fs.SyncDir("/log")); err != nil {
		t.Fatal(err)
	}
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1})
	if _, ok := errors.AsType[*rpcerr.CorruptError](err); !ok || !strings.Contains(err.Error(), "closed at offset 3") ||
		!strings.Contains(err.Error(), "remove /log/closed") {
		if err == nil {
			l.Close()
		}
		t.Fatalf("Open: %v, want a *rpcerr.CorruptError saying the log was closed at offset 3", err)
	}
}

// The record only ever grows with the log: after a reopen, more appends and
// a crash, the log opens with everything the record names and what the
// crash left, a clean close records the new end, and a damaged record is
// logged and ignored.
func TestClosedRecordAcrossCrash(t *testing.T) {
	fs, _ := closedLog(t, 3)
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	appendWait(t, l, 2, "after the reopen")
	if _, err := l.Append(2, []record.Entry{{Payload: []byte("perhaps torn")}}, engine.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	after := fs.Crash(rand.New(rand.NewPCG(3, 4)))
	l.Close()
	l, err = Open(t.Context(), Options{FS: after, Dir: "/log", Epoch: 2})
	if err != nil {
		t.Fatalf("Open after a crash: %v", err)
	}
	end := l.Stats().End
	if end != 4 && end != 5 {
		t.Fatalf("the log ends at %d after a crash, want 4 or 5", end)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	overwrite(t, after, "/log/"+closedName, 5, []byte{0xff})
	var logged bytes.Buffer
	l, err = Open(t.Context(), Options{FS: after, Dir: "/log", Epoch: 2, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("Open with a damaged closed record: %v", err)
	}
	l.Close()
	if !strings.Contains(logged.String(), "ignoring a damaged record") {
		t.Fatalf("nothing logged about the damaged record: %s", logged.String())
	}
	if got, err := decodeClosed(mustRead(t, after, "/log/"+closedName)); err != nil || got != end {
		t.Fatalf("the record after a clean close says %d, %v; want %d", got, err, end)
	}
}

func mustRead(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzClosed checks that the closed record's decoder accepts exactly what
// the encoder writes.
func FuzzClosed(f *testing.F) {
	f.Add(encodeClosed(0))
	f.Add(encodeClosed(1 << 40))
	f.Add([]byte("TRNC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		end, err := decodeClosed(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeClosed(end), b) {
			t.Fatalf("%x decodes to %d, which encodes to %x", b, end, encodeClosed(end))
		}
	})
}

// Unclean tells a log whose process stopped while it was open (its newest
// segment open) from one closed cleanly, and from one with no segment.
func TestUnclean(t *testing.T) {
	fs := vfs.NewMem()
	if err := vfs.MkdirAllSync(fs, "/empty"); err != nil {
		t.Fatal(err)
	}
	if unclean, err := Unclean(fs, "/empty"); err != nil || unclean {
		t.Fatalf("a directory with no segment: unclean %v, %v", unclean, err)
	}
	l, err := Open(t.Context(), Options{FS: fs, Dir: "/log", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	appendWait(t, l, 1, "a")
	if unclean, err := Unclean(fs, "/log"); err != nil || !unclean {
		t.Fatalf("a log being written: unclean %v, %v; want true", unclean, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if unclean, err := Unclean(fs, "/log"); err != nil || unclean {
		t.Fatalf("a log closed cleanly: unclean %v, %v; want false", unclean, err)
	}
	if _, err := Unclean(fs, "/missing"); err == nil {
		t.Fatal("Unclean of a missing directory: no error")
	}
}
