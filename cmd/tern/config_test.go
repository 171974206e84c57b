package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// ternEnv runs a command line with the environment env instead of the
// process's.
func ternEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}
	code := a.run(t.Context(), args)
	return result{code, out.String(), errb.String()}
}

// printConfig runs serve --print-config and parses what it prints.
func printConfig(t *testing.T, env map[string]string, args ...string) serveConfig {
	t.Helper()
	r := ternEnv(t, env, append([]string{"serve", "--print-config"}, args...)...)
	if r.code != 0 {
		t.Fatalf("serve --print-config %q: exit %d, stderr:\n%s", args, r.code, r.stderr)
	}
	var cfg serveConfig
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &cfg); err != nil {
		t.Fatalf("serve --print-config printed what does not parse back: %v\n%s", err, r.stdout)
	}
	return cfg
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tern.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigDefaults(t *testing.T) {
	got := printConfig(t, nil)
	want := defaultServeConfig()
	want.Mode = "local" // a standalone server's
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default config %+v, want %+v", got, want)
	}
	// A node of a cluster makes quorum logs by default, and no local ones.
	store := "dir://" + t.TempDir()
	if got := printConfig(t, nil, "--node-id", "n1", "--storage", store); got.Mode != "quorum" {
		t.Errorf("a node's default mode is %q, want quorum", got.Mode)
	}
	r0 := ternEnv(t, nil, "serve", "--print-config", "--node-id", "n1", "--storage", store, "--mode", "local")
	if r0.code != 2 || !strings.Contains(r0.stderr, "mode local keeps a log on one node's disk") || !strings.Contains(r0.stderr, "--mode quorum") {
		t.Errorf("a node with --mode local: exit %d, stderr:\n%s", r0.code, r0.stderr)
	}
	r := ternEnv(t, nil, "serve", "--print-config")
	if !strings.Contains(r.stdout, "etcd: []\n") || !strings.Contains(r.stdout, "listen: 127.0.0.1:7070\n") {
		t.Errorf("serve --print-config printed:\n%s", r.stdout)
	}
}

// TestConfigPrecedence sets each field in the file, the environment and the
// flags, fewer in each, so that each layer wins somewhere.
func TestConfigPrecedence(t *testing.T) {
	path := writeConfig(t, `
data: /from/file
listen: 127.0.0.1:1000
http: 127.0.0.1:1001
etcd: [file:2379]
etcd_root: /file/
log_level: debug
memory_limit: 1GiB
`)
	env := map[string]string{
		"TERN_LISTEN":       "127.0.0.1:2000",
		"TERN_ETCD":         "env1:2379, env2:2379",
		"TERN_LOG_LEVEL":    "warn",
		"TERN_MEMORY_LIMIT": "2GiB",
		"TERN_ETCD_QUOTA":   "64MiB",
	}
	got := printConfig(t, env, "--config", path, "--listen", "127.0.0.1:3000")
	want := serveConfig{
		Data:        "/from/file",                       // file
		Listen:      "127.0.0.1:3000",                   // flag over env over file
		HTTP:        "127.0.0.1:1001",                   // file
		Etcd:        []string{"env1:2379", "env2:2379"}, // env over file
		EtcdRoot:    "/file/",                           // file
		EtcdQuota:   "64MiB",                            // env
		LogLevel:    "warn",                             // env over file
		LogFormat:   "text",                             // default
		Mode:        "local",                            // default
		NodeTTL:     "10s",                              // default
		MemoryLimit: "2GiB",                             // env over file
		DiskReserve: "auto",                             // default
		serveLimits: defaultLimits(),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config\n got %+v\nwant %+v", got, want)
	}

	env["TERN_DISK_RESERVE"] = "1GiB"
	got = printConfig(t, env, "--config", path, "--etcd", "flag:2379", "--log-level", "error", "--data", "/from/flag", "--etcd-root", "/flag/", "--http", ":9",
		"--disk-reserve", "64MiB", "--memory-limit", "768MiB")
	want = serveConfig{Data: "/from/flag", Listen: "127.0.0.1:2000", HTTP: ":9", Etcd: []string{"flag:2379"}, EtcdRoot: "/flag/", EtcdQuota: "64MiB", LogLevel: "error", LogFormat: "text", Mode: "local", NodeTTL: "10s",
		DiskReserve: "64MiB", MemoryLimit: "768MiB", serveLimits: defaultLimits()}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config\n got %+v\nwant %+v", got, want)
	}

	if got := printConfig(t, map[string]string{"TERN_ETCD_DIR": "/env/etcd"}); got.EtcdDir != "/env/etcd" {
		t.Errorf("etcd_dir from the environment: %q", got.EtcdDir)
	}
	if got := printConfig(t, map[string]string{"TERN_ETCD_DIR": "/env/etcd"}, "--etcd-dir", "/flag/etcd"); got.EtcdDir != "/flag/etcd" {
		t.Errorf("etcd_dir from the flag over the environment: %q", got.EtcdDir)
	}

	// What --print-config prints is a config file.
	r := ternEnv(t, nil, "serve", "--print-config", "--config", path)
	again := printConfig(t, nil, "--config", writeConfig(t, r.stdout))
	if first := printConfig(t, nil, "--config", path); !reflect.DeepEqual(again, first) {
		t.Errorf("printed config read back as %+v, want %+v", again, first)
	}
}

func TestConfigErrors(t *testing.T) {
	unknown := writeConfig(t, "data: /x\ncolour: blue\n")
	bad := writeConfig(t, "data: [unclosed\n")
	wrongType := writeConfig(t, "listen: [1, 2]\n")
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	for _, tc := range []struct {
		env   map[string]string
		args  []string
		wants []string
	}{
		{nil, []string{"--config", unknown}, []string{`unknown key "colour"`, unknown, "data, listen, http, etcd, etcd_root, etcd_quota, log_level"}},
		{nil, []string{"--config", bad}, []string{"is not valid YAML", bad}},
		{nil, []string{"--config", wrongType}, []string{wrongType, "--print-config"}},
		{nil, []string{"--config", missing}, []string{"config file " + missing + " does not exist", "--config"}},
		{nil, []string{"--log-level", "loud"}, []string{`log level "loud"`, "use debug, info, warn or error", "--log-level"}},
		{map[string]string{"TERN_LOG_LEVEL": "verbose"}, nil, []string{`log level "verbose"`, "$TERN_LOG_LEVEL"}},
		{nil, []string{"--listen", "7070"}, []string{`listen address "7070"`, "host:port", "--listen"}},
		{nil, []string{"--listen", "localhost:http"}, []string{`listen address "localhost:http"`, `port "http"`}},
		{nil, []string{"--http", "nohost"}, []string{`http address "nohost"`, "--http"}},
		{nil, []string{"--etcd", "a:1,b"}, []string{`etcd endpoint "b"`, "--etcd"}},
		{nil, []string{"--etcd", "unix://etcd.sock"}, []string{`etcd endpoint "unix://etcd.sock"`, "absolute path", "--etcd"}},
		{nil, []string{"--etcd-root", "tern"}, []string{`etcd root "tern"`, "'/'"}},
		{nil, []string{"--etcd-quota", "1MiB"}, []string{`etcd quota "1MiB"`, "at least 16MiB", "--etcd-quota"}},
		{map[string]string{"TERN_ETCD_QUOTA": "lots"}, nil, []string{`etcd quota "lots"`, "$TERN_ETCD_QUOTA"}},
		{nil, []string{"--data", ""}, []string{"data directory is empty"}},
	} {
		// With --print-config too: the configuration is checked before
		// anything starts.
		for _, args := range [][]string{append([]string{"serve", "--print-config"}, tc.args...), append([]string{"serve"}, tc.args...)} {
			r := ternEnv(t, tc.env, args...)
			if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, "tern: ") {
				t.Errorf("tern %q: exit %d, stdout %q, stderr:\n%s", args, r.code, r.stdout, r.stderr)
			}
			for _, w := range tc.wants {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("tern %q: stderr lacks %q:\n%s", args, w, r.stderr)
				}
			}
		}
	}
}

// TestConfigStoragePrecedence sets the object store keys in the file, the
// environment and the flags.
func TestConfigStoragePrecedence(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "ssec")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, `
storage: s3://file/wal?endpoint=file:9000
mode: object
storage_access_key: file-access
storage_secret_key: file-secret
storage_ssec_key_file: /from/file
`)
	env := map[string]string{
		"TERN_STORAGE":               "s3://env/wal?endpoint=env:9000",
		"TERN_STORAGE_ACCESS_KEY":    "env-access",
		"TERN_STORAGE_SECRET_KEY":    "env-secret",
		"TERN_STORAGE_SSEC_KEY_FILE": keyFile,
	}
	got := printConfig(t, env, "--config", path)
	want := defaultServeConfig()
	want.Storage = "s3://env/wal?endpoint=env:9000" // env over file
	want.Mode = "object"                            // file
	want.StorageAccessKey = "env-access"            // env over file
	want.StorageSSECKeyFile = keyFile               // env over file
	// The secret key is not printed.
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config\n got %+v\nwant %+v", got, want)
	}

	env["TERN_MODE"] = "object"
	got = printConfig(t, env, "--config", path, "--storage", "dir:///from/flag", "--mode", "local", "--storage-ssec-key-file", keyFile)
	want.Storage, want.Mode = "dir:///from/flag", "local" // flags over env over file
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config\n got %+v\nwant %+v", got, want)
	}

	// resolve keeps what it does not print.
	var f serveFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--config", path, "--storage-ssec-key-file", keyFile}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.resolve(fs, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StorageSecretKey != "env-secret" || string(cfg.ssecKey) != strings.Repeat("k", 32) {
		t.Errorf("resolved secret key %q, SSE-C key %q", cfg.StorageSecretKey, cfg.ssecKey)
	}
}

// TestConfigSecretNotPrinted checks that --print-config leaves the secret
// key out, says it is set, and still prints a config file.
func TestConfigSecretNotPrinted(t *testing.T) {
	const secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
	for _, tc := range []struct {
		env  map[string]string
		file string
	}{
		{map[string]string{"TERN_STORAGE": "dir:///x", "TERN_STORAGE_ACCESS_KEY": "AKIA", "TERN_STORAGE_SECRET_KEY": secret}, ""},
		{nil, writeConfig(t, "storage: dir:///x\nstorage_access_key: AKIA\nstorage_secret_key: "+secret+"\n")},
	} {
		args := []string{"serve", "--print-config"}
		if tc.file != "" {
			args = append(args, "--config", tc.file)
		}
		r := ternEnv(t, tc.env, args...)
		if r.code != 0 || strings.Contains(r.stdout, secret) || !strings.Contains(r.stdout, "\n# storage_secret_key is set, and not printed\n") {
			t.Errorf("tern %q: exit %d, printed:\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		var cfg serveConfig
		if err := yaml.UnmarshalStrict([]byte(r.stdout), &cfg); err != nil || cfg.StorageAccessKey != "AKIA" || cfg.StorageSecretKey != "" {
			t.Errorf("tern %q printed %+v (%v)", args, cfg, err)
		}
	}
	if r := ternEnv(t, nil, "serve", "--print-config"); strings.Contains(r.stdout, "storage_secret_key") {
		t.Errorf("serve --print-config with no secret key printed:\n%s", r.stdout)
	}
}

func TestSSECKeyFile(t *testing.T) {
	dir := t.TempDir()
	key := bytes.Repeat([]byte{0xa5}, 32)
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, path := range []string{
		write("raw", key),
		write("hex", []byte(strings.Repeat("a5", 32)+"\n")),
		write("HEX", []byte(strings.Repeat("A5", 32))),
	} {
		got, err := readSSECKey(path, "--storage-ssec-key-file")
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("readSSECKey(%s) = %x, %v", path, got, err)
		}
	}
	if got, err := readSSECKey("", "--storage-ssec-key-file"); got != nil || err != nil {
		t.Errorf("readSSECKey of no file = %x, %v", got, err)
	}
}

func TestConfigStorageErrors(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	notHex := filepath.Join(dir, "nothex")
	for path, body := range map[string]string{short: "0123456789abcdef\n", notHex: strings.Repeat("zz", 32) + "\n"} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "nope")
	store := []string{"--storage", "dir://" + dir}
	for _, tc := range []struct {
		env   map[string]string
		args  []string
		wants []string
	}{
		{nil, []string{"--mode", "remote"}, []string{`mode "remote"`, "use local, object or quorum", "--mode"}},
		{map[string]string{"TERN_MODE": "s3"}, nil, []string{`mode "s3"`, "$TERN_MODE"}},
		{nil, []string{"--mode", "object"}, []string{"mode object", "none is set", "--storage", "$TERN_STORAGE", "--mode local"}},
		{map[string]string{"TERN_MODE": "object"}, nil, []string{"mode object", "--storage"}},
		{nil, []string{"--storage-ssec-key-file", short}, []string{"no object store", "--storage"}},
		{map[string]string{"TERN_STORAGE_ACCESS_KEY": "a", "TERN_STORAGE_SECRET_KEY": "s"}, nil, []string{"credentials are set", "no object store", "--storage"}},
		{map[string]string{"TERN_STORAGE_ACCESS_KEY": "a"}, store, []string{"storage_access_key and storage_secret_key go together", "$TERN_STORAGE_SECRET_KEY", "$AWS_ACCESS_KEY_ID"}},
		{map[string]string{"TERN_STORAGE_SECRET_KEY": "s"}, store, []string{"go together"}},
		{nil, append(store, "--storage-ssec-key-file", missing), []string{"SSE-C key file " + missing + " does not exist", "--storage-ssec-key-file", "$TERN_STORAGE_SSEC_KEY_FILE"}},
		{map[string]string{"TERN_STORAGE_SSEC_KEY_FILE": short}, store, []string{"SSE-C key file " + short + " holds 17 bytes", "32-byte key", "64 hex digits", "openssl rand -hex 32"}},
		{nil, append(store, "--storage-ssec-key-file", notHex), []string{"SSE-C key file " + notHex + " holds 65 bytes", "32-byte key"}},
		{nil, []string{"--mode", "quorum"}, []string{"mode quorum", "not one", "--node-id", "$TERN_NODE_ID"}},
		{nil, append(store, "--advertise", "127.0.0.1:1"), []string{"--advertise", "set --node-id too"}},
		{nil, []string{"--node-id", "n1"}, []string{"cluster's object store", "--storage"}},
		{map[string]string{"TERN_NODE_ID": "a/b"}, store, []string{`node ID "a/b"`, "--node-id"}},
		{nil, append(store, "--node-id", "n1", "--node-ttl", "10ms"), []string{`node TTL "10ms"`, "at least 1s", "--node-ttl"}},
		{nil, append(store, "--node-id", "n1", "--advertise", "nohost"), []string{`advertise address "nohost"`, "--advertise"}},
		{map[string]string{"TERN_DISK_RESERVE": "lots"}, nil, []string{`size "lots"`, "auto", "--disk-reserve", "$TERN_DISK_RESERVE"}},
		{map[string]string{"TERN_ETCD_DIR": "/x"}, []string{"--etcd", "a:1"}, []string{"--etcd-dir", "--etcd names an external one"}},
		{nil, []string{"--memory-limit", "1MiB"}, []string{`memory limit "1MiB"`, "at least 64MiB", "--memory-limit", "$TERN_MEMORY_LIMIT"}},
		{map[string]string{"TERN_MEMORY_LIMIT": "lots"}, nil, []string{`memory limit "lots"`, "--memory-limit"}},
	} {
		for _, args := range [][]string{append([]string{"serve", "--print-config"}, tc.args...), append([]string{"serve"}, tc.args...)} {
			r := ternEnv(t, tc.env, args...)
			if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, "tern: ") || strings.Contains(r.stderr, "Usage:") {
				t.Errorf("tern %q: exit %d, stdout %q, stderr:\n%s", args, r.code, r.stdout, r.stderr)
			}
			for _, w := range tc.wants {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("tern %q: stderr lacks %q:\n%s", args, w, r.stderr)
				}
			}
		}
	}
}
