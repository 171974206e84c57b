package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ternwal/tern/internal/vfs"
)

// FuzzOpen opens a store holding one journal of arbitrary bytes and,
// with hasState, a state file of arbitrary bytes. The segment's ID comes
// from the journal's header bytes, so that mutations get past the ID check;
// with fix, the header's and the state file's checksums are made to match
// (and the state file names the same segment), so that mutations of their
// fields are tried too.
//
// Open must not panic. When it fails, it fails with a *CorruptError and the
// files are as they were. When it succeeds, the journal has been removed
// (its creation did not finish: the header is torn, no valid frame is in
// it, and there is no state file), or the store holds the segment with the
// fenced epoch of the header and state file, sealed as the state file says,
// with fragments that Read returns as the journal now holds them: the
// header and exactly their frames, a prefix of what was there. An unsealed
// segment may lose only a torn tail, in which no valid frame starts; a
// sealed one has exactly the count of its state file. Opening again finds
// the same.
func FuzzOpen(f *testing.F) {
	id := SegmentID{Log: 12, Seq: 3}
	var journal []byte
	journal = append(journal, encodeHeader(header{id: id, epoch: 2, nonce: testNonce})...)
	for n, d := range [][]byte{[]byte("zero"), nil, frag(2, 100)} {
		journal = appendFrame(journal, testNonce, uint64(n), d)
	}
	f.Add(journal, []byte(nil), false, false)
	f.Add(journal[:len(journal)-7], []byte(nil), false, false)
	f.Add(append(slices.Clone(journal), 0, 0, 0), []byte(nil), false, true)
	f.Add(journal, encodeState(id, state{epoch: 5}), true, false)
	f.Add(journal, encodeState(id, state{epoch: 5, sealed: true, count: 2}), true, false)
	f.Add(journal, encodeState(id, state{epoch: 1, sealed: true, count: 3}), true, true)
	f.Add(journal, encodeState(id, state{epoch: 1, sealed: true, count: 4}), true, true)
	f.Add(encodeHeader(header{id: id, nonce: testNonce})[:20], []byte(nil), false, false)
	f.Add(append(make([]byte, headerBytes), appendFrame(nil, testNonce, 0, []byte("x"))...), []byte(nil), false, false)
	// Frames of the journal written in the file before, after this one's.
	f.Add(appendFrame(slices.Clone(journal), testNonce+1, 3, []byte("stale")), []byte(nil), false, false)
	f.Fuzz(func(t *testing.T, journal, st []byte, hasState, fix bool) {
		if len(journal) > 4096 || len(st) > 64 {
			return // longer inputs reach nothing new
		}
		journal, st = slices.Clone(journal), slices.Clone(st)
		var id SegmentID
		if len(journal) >= 24 {
			id = SegmentID{Log: binary.LittleEndian.Uint64(journal[8:]), Seq: binary.LittleEndian.Uint64(journal[16:])}
		}
		if fix && len(journal) >= headerBytes {
			binary.LittleEndian.PutUint32(journal[40:], crc32.Checksum(journal[:40], castagnoli))
		}
		if fix && len(st) == stateBytes {
			binary.LittleEndian.PutUint64(st[8:], id.Log)
			binary.LittleEndian.PutUint64(st[16:], id.Seq)
			binary.LittleEndian.PutUint32(st[40:], crc32.Checksum(st[:40], castagnoli))
		}
		fs := vfs.NewMem()
		jpath, spath := journalPath(testDir, id), statePath(testDir, id)
		writeMemFile(t, fs, jpath, journal)
		if hasState {
			writeMemFile(t, fs, spath, st)
		}

		s, err := openErr(fs)
		if err != nil {
			if _, ok := errors.AsType[*CorruptError](err); !ok {
				t.Fatalf("Open: %v, want a *CorruptError", err)
			}
			if got := readMemFile(t, fs, jpath); !bytes.Equal(got, journal) {
				t.Fatal("a failed Open changed the journal")
			}
			if hasState && !bytes.Equal(readMemFile(t, fs, spath), st) {
				t.Fatal("a failed Open changed the state file")
			}
			return
		}
		defer s.Close()
		segs := s.Segments()
		if len(segs) == 0 {
			if _, err := decodeHeader(journal); err == nil || hasState {
				t.Fatalf("Open dropped segment %v, with header error %v and state file %v", id, err, hasState)
			}
			if _, err := fs.Stat(jpath); !isNotExist(err) {
				t.Fatalf("Open dropped segment %v and kept its journal: %v", id, err)
			}
			return
		}
		if len(segs) != 1 || segs[0].ID != id {
			t.Fatalf("Open of %v found %+v", id, segs)
		}
		seg := segs[0]
		h, herr := decodeHeader(journal)
		if herr != nil {
			t.Fatalf("Open accepted a journal whose header fails: %v", herr)
		}
		epoch := h.epoch
		var want state
		if hasState {
			_, want, err = decodeState(st)
			if err != nil {
				t.Fatalf("Open accepted a state file that fails: %v", err)
			}
		}
		if seg.Epoch != max(epoch, want.epoch) || seg.Sealed != want.sealed || seg.Queued != seg.Count ||
			(want.sealed && seg.Count != want.count) {
			t.Fatalf("segment %+v from header epoch %d and state %+v", seg, epoch, want)
		}

		after := readMemFile(t, fs, jpath)
		rebuilt := slices.Clone(journal[:headerBytes])
		for n := range seg.Count {
			data, err := readFragment(s, id, n)
			if err != nil {
				t.Fatalf("read fragment %d of %d: %v", n, seg.Count, err)
			}
			rebuilt = appendFrame(rebuilt, h.nonce, n, data)
		}
		if !bytes.Equal(after, rebuilt) {
			t.Fatalf("after Open the journal has %d bytes, not the header and the %d frames read (%d bytes)", len(after), seg.Count, len(rebuilt))
		}
		if !bytes.HasPrefix(journal, after) {
			t.Fatal("after Open the journal is not a prefix of what it was")
		}
		if !want.sealed {
			for k := len(after); k < len(journal); k++ {
				if _, _, err := decodeFrame(journal[k:], h.nonce); err == nil {
					t.Fatalf("Open cut the journal at %d, and a valid frame starts at %d", len(after), k)
				}
			}
		}

		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2, err := openErr(fs)
		if err != nil {
			t.Fatalf("Open after a successful Open: %v", err)
		}
		defer s2.Close()
		if again := s2.Segments(); len(again) != 1 || again[0] != seg {
			t.Fatalf("Open again found %+v, the first %+v", again, seg)
		}
		if !bytes.Equal(readMemFile(t, fs, jpath), after) {
			t.Fatal("Open again changed the journal")
		}
	})
}

func writeMemFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	if err := fs.MkdirAll(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readMemFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

// FuzzParseNumber parses arbitrary names found in the store's directory. A
// name it takes must be the one the store writes for the number it
// returns, so that no two names are taken for the same log or segment.
func FuzzParseNumber(f *testing.F) {
	f.Add(filepath.Base(journalPath(testDir, SegmentID{Log: 1, Seq: 12})), journalSuffix)
	f.Add(filepath.Base(statePath(testDir, SegmentID{Log: 1, Seq: 1 << 63})), stateSuffix)
	f.Add(filepath.Base(logDir(testDir, 7)), "")
	f.Add("+0000000000000000012.frags", journalSuffix)
	f.Add("00000000000000000012.state.tmp", stateSuffix)
	f.Fuzz(func(t *testing.T, name, suffix string) {
		v, ok := parseNumber(name, suffix)
		if ok && fmt.Sprintf("%020d%s", v, suffix) != name {
			t.Fatalf("parseNumber(%q, %q) = %d, which the store names %020d%s", name, suffix, v, v, suffix)
		}
	})
}
