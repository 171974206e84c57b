package tern

import (
	"io/fs"
	"path/filepath"
	"testing"
)

// embeddedOf is the embedded implementation behind c, for the tests that
// look inside it.
func embeddedOf(c *Client) *embeddedClient { return c.impl.(*embeddedClient) }

// logOf is the embedded log behind l.
func logOf(l *Log) *embeddedLog { return l.impl.(*embeddedLog) }

// A data directory is its owner's alone: the logs, the metadata and the
// lock are open to no one else.
func TestDataDirectoryIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := openClient(t, dir)
	_, w := createLog(t, c, "private", LogOptions{})
	if _, err := w.Append(t.Context(), Entry{Payload: []byte("secret")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %v: want no access for group and others", path, perm)
		}
		return nil
	})
	if err != nil || n < 5 {
		t.Fatalf("walked %d paths: %v", n, err)
	}
}

// applyRetention applies l's retention now, opening it if it is idle.
func applyRetention(t testing.TB, l *embeddedLog) error {
	t.Helper()
	eng, release, err := l.acquire(t.Context())
	if err != nil {
		return err
	}
	defer release()
	return l.applyRetention(eng)
}

// A listing opens no log, yet describes a local log closed cleanly by its
// files and one never opened as empty; one a crash left open has an
// unknown extent until it is opened.
func TestListLogsFromFiles(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	_, w := createLog(t, c, "written", LogOptions{})
	appendN(t, w, 0, 5)
	if _, err := c.CreateLog(t.Context(), "empty", LogOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openClient(t, dir)
	infos, err := c.ListLogs(t.Context(), "")
	if err != nil || len(infos) != 2 {
		t.Fatalf("ListLogs: %v, %v", infos, err)
	}
	if e := infos[0]; e.Name != "empty" || e.ExtentUnknown || e.End != 0 || e.Bytes != 0 {
		t.Errorf("the log never written: %+v", e)
	}
	if w := infos[1]; w.Name != "written" || w.ExtentUnknown || w.End != 5 || w.Segments != 1 || w.Bytes == 0 {
		t.Errorf("the log closed cleanly: %+v", w)
	}
	if open := embeddedOf(c).openLogs(); len(open) != 0 {
		t.Errorf("the listing opened %d logs", len(open))
	}
	info, err := mustOpen(t, c, "written").Info(t.Context())
	if err != nil || info.End != infos[1].End || info.Bytes != infos[1].Bytes || info.Segments != infos[1].Segments {
		t.Errorf("described once open: %+v, %v; listed as %+v", info, err, infos[1])
	}
}
