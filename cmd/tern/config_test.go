package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
	if want := defaultServeConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("default config %+v, want %+v", got, want)
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
`)
	env := map[string]string{
		"TERN_LISTEN":    "127.0.0.1:2000",
		"TERN_ETCD":      "env1:2379, env2:2379",
		"TERN_LOG_LEVEL": "warn",
	}
	got := printConfig(t, env, "--config", path, "--listen", "127.0.0.1:3000")
	want := serveConfig{
		Data:     "/from/file",                       // file
		Listen:   "127.0.0.1:3000",                   // flag over env over file
		HTTP:     "127.0.0.1:1001",                   // file
		Etcd:     []string{"env1:2379", "env2:2379"}, // env over file
		EtcdRoot: "/file/",                           // file
		LogLevel: "warn",                             // env over file
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config\n got %+v\nwant %+v", got, want)
	}

	got = printConfig(t, env, "--config", path, "--etcd", "flag:2379", "--log-level", "error", "--data", "/from/flag", "--etcd-root", "/flag/", "--http", ":9")
	want = serveConfig{Data: "/from/flag", Listen: "127.0.0.1:2000", HTTP: ":9", Etcd: []string{"flag:2379"}, EtcdRoot: "/flag/", LogLevel: "error"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config\n got %+v\nwant %+v", got, want)
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
		{nil, []string{"--config", unknown}, []string{`unknown key "colour"`, unknown, "data, listen, http, etcd, etcd_root, log_level"}},
		{nil, []string{"--config", bad}, []string{"is not valid YAML", bad}},
		{nil, []string{"--config", wrongType}, []string{wrongType, "--print-config"}},
		{nil, []string{"--config", missing}, []string{"config file " + missing + " does not exist", "--config"}},
		{nil, []string{"--log-level", "loud"}, []string{`log level "loud"`, "use debug, info, warn or error", "--log-level"}},
		{map[string]string{"TERN_LOG_LEVEL": "verbose"}, nil, []string{`log level "verbose"`, "$TERN_LOG_LEVEL"}},
		{nil, []string{"--listen", "7070"}, []string{`listen address "7070"`, "host:port", "--listen"}},
		{nil, []string{"--listen", "localhost:http"}, []string{`listen address "localhost:http"`, `port "http"`}},
		{nil, []string{"--http", "nohost"}, []string{`http address "nohost"`, "--http"}},
		{nil, []string{"--etcd", "a:1,b"}, []string{`etcd endpoint "b"`, "--etcd"}},
		{nil, []string{"--etcd-root", "tern"}, []string{`etcd root "tern"`, "'/'"}},
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
