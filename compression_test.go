package tern_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/miniotest"
)

// jsonBatch is n entries of JSON-like text, which compresses well, with a
// property on some.
func jsonBatch(from, n int) []tern.Entry {
	es := make([]tern.Entry, n)
	for i := range es {
		k := from + i
		es[i].Payload = fmt.Appendf(nil, `{"id":%d,"user":"user-%d","op":"insert","vector":[0.25,0.5,0.75],"tags":["alpha","beta"]}`, k, k%13)
		if k%4 == 0 {
			es[i].Properties = map[string][]byte{"trace": fmt.Appendf(nil, "t-%d", k)}
		}
	}
	return es
}

// appendJSON appends 300 entries in 3 batches and returns them.
func appendJSON(t *testing.T, w *tern.Writer) []tern.Entry {
	t.Helper()
	var all []tern.Entry
	for b := range 3 {
		es := jsonBatch(b*100, 100)
		if _, err := w.AppendBatch(t.Context(), es); err != nil {
			t.Fatal(err)
		}
		all = append(all, es...)
	}
	return all
}

// checkEntries reads log l from its start and checks it holds want.
func checkEntries(t *testing.T, l *tern.Log, want []tern.Entry) {
	t.Helper()
	r := mustReader(t, l, tern.FromStart)
	for i, w := range want {
		e, err := r.Next(t.Context())
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if e.Offset != tern.Offset(i) || !bytes.Equal(e.Payload, w.Payload) || len(e.Properties) != len(w.Properties) ||
			!bytes.Equal(e.Properties["trace"], w.Properties["trace"]) {
			t.Fatalf("entry %d: %d %q %v, want %q %v", i, e.Offset, e.Payload, e.Properties, w.Payload, w.Properties)
		}
	}
}

var compressions = []tern.Compression{tern.CompressionNone, tern.CompressionZstd, tern.CompressionLZ4}

// checkSizes: a compressed log stores fewer bytes than it was given, and
// says both; one without compression stores what it was given.
func checkSizes(t *testing.T, info tern.LogInfo, c tern.Compression) {
	t.Helper()
	switch {
	case info.Bytes <= 0:
		t.Fatalf("%s log of %d bytes", c, info.Bytes)
	case c == tern.CompressionNone && info.LogicalBytes != info.Bytes:
		t.Fatalf("log without compression: %d logical bytes, %d stored", info.LogicalBytes, info.Bytes)
	case c != tern.CompressionNone && info.LogicalBytes < 2*info.Bytes:
		t.Fatalf("%s log: %d logical bytes, %d stored; JSON should compress at least 2:1", c, info.LogicalBytes, info.Bytes)
	}
	if info.Options.Compression != c && !(c == tern.CompressionNone && info.Options.Compression == "") {
		t.Fatalf("log created with compression %q describes itself with %q", c, info.Options.Compression)
	}
}

// writeCompressed creates the log "j" with lo in a client of opts, appends
// JSON-like entries, checks that they read back and the sizes describe
// gives, and closes the client; it returns the entries appended.
func writeCompressed(t *testing.T, opts tern.Options, lo tern.LogOptions) []tern.Entry {
	t.Helper()
	cl, err := tern.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	l, w := mustCreate(t, cl, "j", lo)
	defer w.Close()
	want := appendJSON(t, w)
	checkEntries(t, l, want)
	info, err := l.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	checkSizes(t, info, lo.Compression)
	return want
}

// TestCompressionLocal: each compression round-trips through a local log,
// read by the writing client and by a new one, and describe gives the
// bytes stored and the bytes appended, before and after the reopen.
func TestCompressionLocal(t *testing.T) {
	for _, c := range compressions {
		t.Run(string(c), func(t *testing.T) {
			dir := t.TempDir()
			want := writeCompressed(t, tern.Options{Dir: dir}, tern.LogOptions{Compression: c})
			cl, err := tern.Open(t.Context(), tern.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			infos, err := cl.ListLogs(t.Context(), "") // the log is closed: from its files
			if err != nil || len(infos) != 1 {
				t.Fatalf("ListLogs: %v, %v", infos, err)
			}
			checkSizes(t, infos[0], c)
			l, err := cl.OpenLog(t.Context(), "j")
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, l, want)
			info2, err := l.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			checkSizes(t, info2, c)
		})
	}
}

// TestCompressionObject: each compression round-trips through an object
// log on MinIO, read back by a new client, which describes the bytes stored
// and the bytes appended as the writing client did.
func TestCompressionObject(t *testing.T) {
	m := miniotest.Start(t)
	for _, c := range compressions {
		t.Run(string(c), func(t *testing.T) {
			st := tern.StorageOptions{
				URL:       "s3://" + m.Bucket + "/" + string(c) + "?endpoint=" + m.Endpoint + "&tls=false",
				AccessKey: m.AccessKey, SecretKey: m.SecretKey,
			}
			dir := t.TempDir()
			want := writeCompressed(t, tern.Options{Dir: dir, Storage: st}, tern.LogOptions{Mode: tern.ModeObject, Compression: c})
			cl, err := tern.Open(t.Context(), tern.Options{Dir: dir, Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			l, err := cl.OpenLog(t.Context(), "j")
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, l, want)
			// The sizes of the segments sealed by the first client, from
			// metadata.
			info, err := l.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			checkSizes(t, info, c)
		})
	}
}

// TestCompressionInvalid: an unknown compression is refused with
// ErrInvalid, naming the choices.
func TestCompressionInvalid(t *testing.T) {
	cl, err := tern.Open(t.Context(), tern.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.CreateLog(t.Context(), "x", tern.LogOptions{Compression: "gzip"})
	if !errors.Is(err, tern.ErrInvalid) {
		t.Fatalf("CreateLog with gzip: %v, want ErrInvalid", err)
	}
}

// TestCompressionCorrupt: a compressed batch whose CRC is right but whose
// compressed bytes do not decompress is reported as a *CorruptError, not a
// panic, and no entry of it is returned.
func TestCompressionCorrupt(t *testing.T) {
	for _, c := range []tern.Compression{tern.CompressionZstd, tern.CompressionLZ4} {
		t.Run(string(c), func(t *testing.T) {
			dir := t.TempDir()
			cl, err := tern.Open(t.Context(), tern.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			_, w := mustCreate(t, cl, "j", tern.LogOptions{Compression: c})
			appendJSON(t, w)
			w.Close()
			cl.Close()

			// The first batch of the first segment: garble its compressed
			// bytes, then give it the CRC of the garbled bytes.
			segs, _ := filepath.Glob(filepath.Join(dir, "logs", "*", "*.seg"))
			if len(segs) == 0 {
				t.Fatal("no segment file")
			}
			p, err := os.ReadFile(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			const segHeader = 40
			b := p[segHeader:]
			if b[4] != 2 {
				t.Fatalf("first batch is version %d, want 2 (compressed)", b[4])
			}
			n := binary.LittleEndian.Uint32(b[8:])
			for i := 60; i < int(n); i += 5 {
				b[i] ^= 0xa5
			}
			binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[16:n], crc32.MakeTable(crc32.Castagnoli)))
			if err := os.WriteFile(segs[0], p, 0o644); err != nil {
				t.Fatal(err)
			}

			cl, err = tern.Open(t.Context(), tern.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			l, err := cl.OpenLog(t.Context(), "j")
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.OpenReader(t.Context(), tern.FromStart)
			if err == nil {
				defer r.Close()
				var e tern.Entry
				for err == nil {
					if e, err = r.Next(t.Context()); err == nil && e.Offset < 100 {
						t.Fatalf("entry %d of the damaged batch was returned", e.Offset)
					}
				}
			}
			var ce *tern.CorruptError
			if !errors.As(err, &ce) || errors.Is(err, io.EOF) {
				t.Fatalf("reading a damaged compressed batch: %v, want a *CorruptError", err)
			}
		})
	}
}

// TestCompressionEveryClient: a compressed log is created, appended to,
// read and described the same through the embedded and the remote client,
// local and object logs alike.
func TestCompressionEveryClient(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "z", tern.LogOptions{Compression: tern.CompressionZstd})
		want := appendJSON(t, w)
		checkEntries(t, l, want)
		info, err := l.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		checkSizes(t, info, tern.CompressionZstd)
		if got := l.Options().Compression; got != tern.CompressionZstd {
			t.Fatalf("Options().Compression = %q", got)
		}
	})
}
