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
