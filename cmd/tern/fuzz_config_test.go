package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// FuzzConfig loads an arbitrary config file and overlays an arbitrary
// environment (lines of NAME=VALUE) as tern serve does, then checks the
// result. Nothing may panic, every error must be a *configError (exit 2,
// no usage), and the configuration must print (--print-config) as a file
// that loads back to the same configuration, less the secret key, which
// is never printed, or refuse to print a value that a file cannot hold
// (not UTF-8, or a control character).
func FuzzConfig(f *testing.F) {
	f.Add("", "")
	f.Add("data: /var/lib/tern\nlisten: 0.0.0.0:7070\netcd: [10.0.0.1:2379, 10.0.0.2:2379]\nlog_level: debug\n", "")
	f.Add("storage: s3://tern/wal?endpoint=127.0.0.1:9000\nmode: object\nstorage_access_key: ak\nstorage_secret_key: sk\n", "TERN_MODE=local")
	f.Add("node_id: n1\nadvertise: 10.0.0.1:7070\nnode_ttl: 5s\nstorage: dir:///x\n", "TERN_ETCD= a:1 ,,b:2\nTERN_NODE_TTL=1m")
	f.Add("etcd: null\nhttp: ':7071'\n", "TERN_DATA=/d\nTERN_LOG_LEVEL=WARN")
	f.Add("unknown: 1\n", "")
	f.Add("data: [1]\n", "")
	f.Add("data: \"a\\tb\\u00e9\"\netcd_root: /x/\n", "TERN_ETCD_ROOT=tern")
	f.Add("data: \"a\\Nb\"\n", "") // a next line, which the printer would turn into a space
	if b, err := defaultServeConfig().marshal(); err == nil {
		f.Add(string(b), "")
	}
	path := filepath.Join(f.TempDir(), "tern.yaml")
	f.Fuzz(func(t *testing.T, file, env string) {
		if len(file) > 4096 || len(env) > 4096 {
			return // longer inputs reach nothing new
		}
		writeFresh(t, path, []byte(file))
		cfg := defaultServeConfig()
		if err := loadConfigFile(&cfg, path); err != nil {
			wantConfigError(t, "loadConfigFile", err)
			return
		}
		vars := map[string]string{}
		for line := range strings.Lines(env) {
			if name, value, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "="); ok {
				vars[name] = value
			}
		}
		applyEnv(&cfg, func(name string) string { return vars[name] })
		if cfg.Etcd == nil {
			cfg.Etcd = []string{}
		}
		if cfg.Mode == "" {
			cfg.Mode = string(tern.ModeLocal)
			if cfg.NodeID != "" {
				cfg.Mode = string(tern.ModeQuorum)
			}
		}
		if err := cfg.check(); err != nil {
			wantConfigError(t, "check", err)
		} else if cfg.NodeID != "" {
			if ttl, err := time.ParseDuration(cfg.NodeTTL); err != nil || ttl < time.Second {
				t.Fatalf("check accepted node TTL %q", cfg.NodeTTL)
			}
		}

		printed, err := cfg.marshal()
		if err != nil {
			// Only a value no config file can hold may keep it from
			// printing.
			if _, ok := errors.AsType[*configError](err); !ok || !strings.Contains(err.Error(), "which a config file cannot hold") {
				t.Fatalf("marshal %+v: %v", cfg, err)
			}
			return
		}
		writeFresh(t, path, printed)
		back := defaultServeConfig()
		if err := loadConfigFile(&back, path); err != nil {
			t.Fatalf("the printed configuration does not load: %v\n%s", err, printed)
		}
		want := cfg
		want.StorageSecretKey = ""
		if !reflect.DeepEqual(back, want) {
			t.Fatalf("the printed configuration loads as\n%+v\nwant\n%+v\nprinted:\n%s", back, want, printed)
		}
	})
}

// writeFresh writes a new file at path: ext4 flushes a file truncated and
// written again when it is closed, which would make each input cost a
// write to disk.
func writeFresh(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantConfigError(t *testing.T, what string, err error) {
	t.Helper()
	if _, ok := errors.AsType[*configError](err); !ok {
		t.Fatalf("%s: %v (%T), want a *configError", what, err, err)
	}
}
