package meta_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/meta/metatest"
)

func TestBolt(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store {
		return openBolt(t, filepath.Join(t.TempDir(), "meta.db"))
	})
}

// openBolt opens the store at path; the caller closes it.
func openBolt(t *testing.T, path string) *meta.Bolt {
	t.Helper()
	s, err := meta.OpenBolt(path)
	if err != nil {
		t.Fatalf("OpenBolt: %v", err)
	}
	return s
}

func TestBoltPersists(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "meta.db")
	s := openBolt(t, path)
	var want []meta.Log
	for _, name := range []string{"a", "a/b", "b"} {
		l, err := s.CreateLog(ctx, meta.Log{Name: name, Options: []byte("opts " + name)})
		if err != nil {
			t.Fatalf("CreateLog: %v", err)
		}
		want = append(want, l)
	}
	if _, err := s.BumpEpoch(ctx, "a/b"); err != nil {
		t.Fatalf("BumpEpoch: %v", err)
	}
	if _, err := s.AdvanceStart(ctx, "a/b", 99); err != nil {
		t.Fatalf("AdvanceStart: %v", err)
	}
	want[1].Epoch, want[1].Start = 1, 99
	seg := meta.Segment{Seq: 1, Epoch: 1, Base: 99, Created: time.Unix(5, 6)}
	if err := s.CreateSegment(ctx, "a/b", seg); err != nil {
		t.Fatalf("CreateSegment: %v", err)
	}
	// Delete the newest log, so only the stored sequence keeps its ID from
	// being handed out again.
	if err := s.DeleteLog(ctx, "b"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	lastID := want[2].ID
	want = want[:2]
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openBolt(t, path)
	defer s.Close()
	got, err := s.ListLogs(ctx, "")
	if err != nil {
		t.Fatalf("ListLogs: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("after reopening, ListLogs = %+v, want %+v", got, want)
	}
	for i := range want {
		if !metatest.Equal(got[i], want[i]) {
			t.Errorf("after reopening, log %d = %+v, want %+v", i, got[i], want[i])
		}
		// The microsecond Created that CreateLog returned is exactly the
		// one stored, not just the same instant.
		if got[i].Created != want[i].Created {
			t.Errorf("after reopening, Created = %#v, want %#v", got[i].Created, want[i].Created)
		}
	}
	l, err := s.CreateLog(ctx, meta.Log{Name: "c"})
	if err != nil {
		t.Fatalf("CreateLog: %v", err)
	}
	if l.ID <= lastID {
		t.Errorf("after reopening, new ID = %d, want > %d", l.ID, lastID)
	}
	if segs, err := s.Segments(ctx, "a/b"); err != nil || len(segs) != 1 || !metatest.SegmentEqual(segs[0], seg) {
		t.Errorf("after reopening, Segments = %+v, %v, want [%+v]", segs, err, seg)
	}
	if e, err := s.BumpEpoch(ctx, "a/b"); err != nil || e != 2 {
		t.Errorf("after reopening, BumpEpoch = %d, %v, want 2", e, err)
	}
}

func TestOpenBoltLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s := openBolt(t, path)

	// bbolt locks with flock, which is per open file, so a second open in
	// the same process is refused like one in another process.
	s2, err := meta.OpenBolt(path)
	if err == nil {
		s2.Close()
		t.Fatal("second OpenBolt of a held store succeeded")
	}
	if !errors.Is(err, meta.ErrLocked) {
		t.Errorf("second OpenBolt: err = %v, want ErrLocked", err)
	}
	checkLockedMessage(t, err.Error(), path)

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = openBolt(t, path) // Close released the lock
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func checkLockedMessage(t *testing.T, msg, path string) {
	t.Helper()
	if want := "meta: open " + path + ": store is in use by another process"; msg != want {
		t.Errorf("error = %q, want %q", msg, want)
	}
}

// lockChildEnv, when set, makes TestOpenBoltLockedByOtherProcess the child:
// it opens the store at the path the variable holds and reports the result by
// its exit code.
const lockChildEnv = "TERN_META_LOCK_CHILD"

const (
	exitLocked   = 17 // OpenBolt failed with ErrLocked; the error is on stdout
	exitOpened   = 18
	exitOtherErr = 19
)

func TestOpenBoltLockedByOtherProcess(t *testing.T) {
	if path := os.Getenv(lockChildEnv); path != "" {
		lockChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "meta.db")
	s := openBolt(t, path)
	defer s.Close()

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestOpenBoltLockedByOtherProcess$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitLocked {
		t.Fatalf("child: %v, want exit code %d\nstdout: %s\nstderr: %s", err, exitLocked, out, stderr.String())
	}
	checkLockedMessage(t, string(out), path)
}

func lockChild(path string) {
	s, err := meta.OpenBolt(path)
	switch {
	case err == nil:
		s.Close()
		os.Exit(exitOpened)
	case errors.Is(err, meta.ErrLocked):
		os.Stdout.WriteString(err.Error())
		os.Exit(exitLocked)
	default:
		os.Stderr.WriteString(err.Error())
		os.Exit(exitOtherErr)
	}
}
