package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ternwal/tern"
)

// Config.EtcdDir puts the embedded etcd's data outside the data directory,
// and a data directory that holds logs does not start with an etcd
// directory that holds no etcd data: a fresh etcd would hand the old
// logs' IDs, and so their segments, to new logs.
func TestEtcdDir(t *testing.T) {
	data, etcdDir := t.TempDir(), filepath.Join(t.TempDir(), "etcd")
	cfg := Config{Data: data, EtcdDir: etcdDir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", EtcdRoot: "/tern/"}
	s, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tern.Open(t.Context(), tern.Options{Server: DialAddr(s.Addr())})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLog(t.Context(), "x", tern.LogOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(etcdDir, "member")); err != nil {
		t.Fatalf("the embedded etcd's data is not in --etcd-dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "etcd")); err == nil {
		t.Fatal("the embedded etcd's data is in the data directory too")
	}

	for _, dir := range []string{"", filepath.Join(t.TempDir(), "empty")} {
		cfg.EtcdDir = dir
		_, err = Start(t.Context(), cfg)
		if err == nil || !strings.Contains(err.Error(), "holds no etcd data") || !strings.Contains(err.Error(), "--etcd-dir") {
			t.Fatalf("start with --etcd-dir %q, which holds no etcd data: %v; want a refusal naming --etcd-dir", dir, err)
		}
	}

	cfg.EtcdDir = etcdDir
	s, err = Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("restart with the etcd directory: %v", err)
	}
	defer s.Close()
	c, err = tern.Open(t.Context(), tern.Options{Server: DialAddr(s.Addr())})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.OpenLog(t.Context(), "x"); err != nil {
		t.Fatalf("the log after a restart: %v", err)
	}
}
