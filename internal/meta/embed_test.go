package meta_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/meta"
)

// eventually polls cond every 50ms until it holds, and fails the test with
// what if it does not within a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The embedded etcd compacts its history by itself: an old revision
// becomes unreadable once the retention has passed.
func TestEmbeddedEtcdCompacts(t *testing.T) {
	srv, err := meta.StartEtcdWith(t.Context(), t.TempDir(), meta.EmbedOptions{Retention: time.Second, MaintainInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli := rawClient(t, srv.Endpoints())
	ctx := t.Context()
	put := func() int64 {
		resp, err := cli.Put(ctx, "k", "v")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	old := put()
	for range 100 {
		put()
	}
	eventually(t, "revision "+fmt.Sprint(old)+" compacted", func() bool {
		put() // a compaction needs a newer revision to compact to
		_, err := cli.Get(ctx, "k", clientv3.WithRev(old))
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatal(err)
		}
		return err != nil
	})
	rev, oldest, err := meta.EtcdHistory(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if oldest <= old || oldest > rev {
		t.Errorf("EtcdHistory = revision %d, oldest %d; want the oldest after %d", rev, oldest, old)
	}
	if _, err := cli.Get(ctx, "k", clientv3.WithRev(oldest)); err != nil {
		// Only a compaction since may have taken it.
		_, now, herr := meta.EtcdHistory(ctx, cli)
		if !errors.Is(err, rpctypes.ErrCompacted) || herr != nil || now <= oldest {
			t.Errorf("Get at the oldest revision %d: %v (the oldest is now %d, %v)", oldest, err, now, herr)
		}
	}
	if _, err := cli.Get(ctx, "k", clientv3.WithRev(oldest-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("Get below the oldest revision %d: err = %v, want ErrCompacted", oldest, err)
	}
}

// EtcdHistory tells a history that was never compacted, which is what
// tern doctor and the server warn about on an external etcd.
func TestEtcdHistoryUncompacted(t *testing.T) {
	srv := startEtcd(t, t.TempDir())
	cli := rawClient(t, srv.Endpoints())
	ctx := t.Context()
	for range 20 {
		if _, err := cli.Put(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
	}
	rev, oldest, err := meta.EtcdHistory(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if oldest != 1 || rev < 20 {
		t.Errorf("EtcdHistory = revision %d, oldest %d; want oldest 1", rev, oldest)
	}
	if !meta.CompactionLooksOff(meta.UncompactedRevisions+1, oldest) || meta.CompactionLooksOff(rev, oldest) {
		t.Error("CompactionLooksOff: want it only past UncompactedRevisions")
	}
	if _, err := cli.Compact(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if _, oldest, err = meta.EtcdHistory(ctx, cli); err != nil || oldest != 10 {
		t.Errorf("EtcdHistory after Compact(10): oldest %d, %v; want 10", oldest, err)
	}
	if meta.CompactionLooksOff(meta.UncompactedRevisions+1, oldest) {
		t.Error("CompactionLooksOff after a compaction")
	}
}

// At its quota the embedded etcd raises NOSPACE: the store's writes fail
// with ErrNoSpace (RESOURCE_EXHAUSTED), reads go on, ReadEtcdHealth names
// the alarm; once the filler is deleted, compaction, defragmentation and
// the disarming of the alarm let writes in again without anyone's help.
func TestEmbeddedEtcdNoSpace(t *testing.T) {
	const quota = 8 << 20
	srv, err := meta.StartEtcdWith(t.Context(), t.TempDir(), meta.EmbedOptions{
		QuotaBytes: quota, Retention: time.Second, MaintainInterval: 100 * time.Millisecond, DefragFreeBytes: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := t.Context()
	s := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{})
	defer s.Close()
	if _, err := s.CreateLog(ctx, meta.Log{Name: "before"}); err != nil {
		t.Fatal(err)
	}
	cli := rawClient(t, srv.Endpoints())
	// Fill until a store write is refused: the maintenance loop may free
	// some room (defragmenting) and disarm the alarm while this fills, so
	// put more until the store sees the quota full.
	filler := strings.Repeat("x", 512<<10)
	n := 0
	var h meta.EtcdHealth
	for probe := 0; ; probe++ {
		_, err = s.CreateLog(ctx, meta.Log{Name: fmt.Sprintf("probe-%d", probe)})
		if errors.Is(err, rpcerr.ErrNoSpace) {
			var herr error
			if h, herr = meta.ReadEtcdHealth(ctx, cli); herr != nil {
				t.Fatal(herr)
			}
			if len(h.Alarms) > 0 {
				break
			}
			continue // disarmed meanwhile: fill more
		}
		if err != nil {
			t.Fatalf("CreateLog near the quota: %v", err)
		}
		for ; ; n++ {
			_, err := cli.Put(ctx, fmt.Sprintf("/fill/%d", n), filler)
			if errors.Is(err, rpctypes.ErrNoSpace) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if n > 16*quota/len(filler) {
				t.Fatalf("%d puts of %d bytes and no NOSPACE with a quota of %d", n, len(filler), quota)
			}
		}
	}
	if code := rpcerr.Status(err).Code().String(); code != "ResourceExhausted" {
		t.Errorf("CreateLog at the quota is sent as %s", code)
	}
	if _, err := s.Log(ctx, "before"); err != nil {
		t.Errorf("Log at the quota: %v", err)
	}
	if len(h.Alarms) != 1 || h.Alarms[0] != "NOSPACE" || !strings.Contains(h.Problem(), "NOSPACE") || h.QuotaBytes != quota {
		t.Errorf("ReadEtcdHealth = %+v (%q), want the NOSPACE alarm and quota %d", h, h.Problem(), quota)
	}

	if _, err := cli.Delete(ctx, "/fill/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	tries := 0
	eventually(t, "writes taken again after the filler's deletion", func() bool {
		tries++
		_, err := s.CreateLog(ctx, meta.Log{Name: fmt.Sprintf("after-%d", tries)})
		return err == nil
	})
	eventually(t, "the file defragmented once the filler is compacted away", func() bool {
		h, err = meta.ReadEtcdHealth(ctx, cli)
		return err == nil && len(h.Alarms) == 0 && h.DBBytes < quota/4
	})
}

// A database that is not one fails the start with ErrEtcdDamaged, naming
// the file and saying what to do; etcd does not panic.
func TestStartEtcdCorruptDB(t *testing.T) {
	dir := t.TempDir()
	srv := startEtcd(t, dir)
	cli := rawClient(t, srv.Endpoints())
	if _, err := cli.Put(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	db := filepath.Join(dir, "member", "snap", "db")
	f, err := os.OpenFile(db, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := []byte(strings.Repeat("tern", 4096)) // both meta pages
	if _, err := f.WriteAt(junk, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = meta.StartEtcd(t.Context(), dir, nil)
	if !errors.Is(err, meta.ErrEtcdDamaged) {
		t.Fatalf("StartEtcd on a corrupt database: err = %v, want ErrEtcdDamaged", err)
	}
	for _, want := range []string{db, "restore " + dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to name %q", err, want)
		}
	}
	// The directory is not left locked.
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "member")); err != nil {
		t.Fatal(err)
	}
	srv2 := startEtcd(t, dir)
	srv2.Close()
}

// A store whose etcd does not answer fails its calls with ErrUnavailable
// within its request timeout, not with the caller's deadline or never.
func TestEtcdUnavailable(t *testing.T) {
	srv := startEtcd(t, t.TempDir())
	s := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{RequestTimeout: 500 * time.Millisecond})
	defer s.Close()
	if _, err := s.CreateLog(t.Context(), meta.Log{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	for name, call := range map[string]func(context.Context) error{
		"CreateLog":    func(ctx context.Context) error { _, err := s.CreateLog(ctx, meta.Log{Name: "b"}); return err },
		"Log":          func(ctx context.Context) error { _, err := s.Log(ctx, "a"); return err },
		"ListLogs":     func(ctx context.Context) error { _, err := s.ListLogs(ctx, ""); return err },
		"ClaimWriter":  func(ctx context.Context) error { _, err := s.ClaimWriter(ctx, "a", meta.ClaimOptions{}); return err },
		"CommitCursor": func(ctx context.Context) error { _, err := s.CommitCursor(ctx, "a", "s", 1); return err },
		"Segments":     func(ctx context.Context) error { _, err := s.Segments(ctx, "a"); return err },
	} {
		err := call(t.Context())
		if !errors.Is(err, rpcerr.ErrUnavailable) {
			t.Errorf("%s on a stopped etcd: err = %v, want ErrUnavailable", name, err)
		}
	}
}

// A WAL with a torn tail is repaired, and the repair is logged; a WAL
// damaged in the middle fails the start with ErrEtcdDamaged, not with
// etcd's exit.
func TestStartEtcdDamagedWAL(t *testing.T) {
	for _, torn := range []bool{true, false} {
		dir := t.TempDir()
		srv := startEtcd(t, dir)
		cli := rawClient(t, srv.Endpoints())
		for i := range 50 {
			if _, err := cli.Put(t.Context(), fmt.Sprint("k", i), strings.Repeat("v", 40)); err != nil {
				t.Fatal(err)
			}
		}
		srv.Close()
		wals, err := filepath.Glob(filepath.Join(dir, "member", "wal", "*.wal"))
		if err != nil || len(wals) == 0 {
			t.Fatalf("no WAL in %s: %v", dir, err)
		}
		w := wals[len(wals)-1]
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		end := len(b) // of the records: the file is preallocated with zeros
		for end > 0 && b[end-1] == 0 {
			end--
		}
		if torn {
			err = os.Truncate(w, int64(end-10))
		} else {
			// A byte of a value, inside a record: its CRC fails.
			i := bytes.Index(b, []byte(strings.Repeat("v", 40)))
			if i < 0 {
				t.Fatal("no value found in the WAL")
			}
			b[i+20] ^= 0xff
			err = os.WriteFile(w, b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		srv, err = meta.StartEtcd(t.Context(), dir, slog.New(slog.NewTextHandler(&logs, nil)))
		if torn {
			if err != nil {
				t.Fatalf("StartEtcd on a torn WAL: %v", err)
			}
			srv.Close()
			if !strings.Contains(logs.String(), "msg=repairing") {
				t.Errorf("the repair of the WAL is not logged:\n%s", logs.String())
			}
			continue
		}
		if err == nil {
			srv.Close()
		}
		if !errors.Is(err, meta.ErrEtcdDamaged) || !strings.Contains(err.Error(), "restore "+dir) {
			t.Errorf("StartEtcd on a damaged WAL: err = %v, want ErrEtcdDamaged naming the directory", err)
		}
	}
}
