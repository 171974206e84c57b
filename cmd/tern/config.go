package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// serveConfig is the configuration of tern serve. Each field is set, from
// weakest to strongest, by the defaults, the YAML file of --config (keys as
// the json tags), the environment (TERN_ and the key in upper case) and the
// flags (the key with '-' for '_'). --print-config prints the result in the
// file's format, so that it can be saved and edited.
type serveConfig struct {
	// Data is the data directory: the logs, and the embedded etcd's data
	// in Data/etcd when Etcd is empty.
	Data string `json:"data"`
	// Listen is the gRPC address, host:port.
	Listen string `json:"listen"`
	// HTTP is the address of /metrics, /healthz, /readyz and /debug/pprof/.
	HTTP string `json:"http"`
	// Etcd lists the client endpoints (host:port) of an external etcd
	// cluster for the metadata. Empty starts an embedded etcd.
	Etcd []string `json:"etcd"`
	// EtcdRoot is the key prefix of Tern's metadata in etcd.
	EtcdRoot string `json:"etcd_root"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `json:"log_level"`
}

// configKeys are the keys a config file may have, as serveConfig's json tags
// name them.
var configKeys = []string{"data", "listen", "http", "etcd", "etcd_root", "log_level"}

func defaultServeConfig() serveConfig {
	return serveConfig{
		Data:     "./tern-data",
		Listen:   "127.0.0.1:7070",
		HTTP:     "127.0.0.1:7071",
		Etcd:     []string{},
		EtcdRoot: "/tern/",
		LogLevel: "info",
	}
}

// configError is a bad configuration value: the command exits 2, like a
// usage error, but its usage is not printed, since the value may come from
// a file or the environment.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

func configErrorf(format string, args ...any) error {
	return &configError{fmt.Errorf(format, args...)}
}

// loadConfigFile overlays the YAML file at path on cfg: the keys the file
// has replace cfg's values, the others stay.
func loadConfigFile(cfg *serveConfig, path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return configErrorf("config file %s does not exist: check --config, or print a starting point with \"tern serve --print-config > %s\"", path, path)
	}
	if err != nil {
		return configErrorf("read config file: %w", err)
	}
	// Find unknown keys first, to name them plainly; UnmarshalStrict below
	// would report them in JSON decoder terms.
	var keys map[string]any
	if err := yaml.Unmarshal(b, &keys); err != nil {
		return configErrorf("config file %s is not valid YAML: %v", path, err)
	}
	for k := range keys {
		if !slices.Contains(configKeys, k) {
			return configErrorf("config file %s: unknown key %q: the keys are %s", path, k, strings.Join(configKeys, ", "))
		}
	}
	if err := yaml.UnmarshalStrict(b, cfg); err != nil {
		return configErrorf("config file %s: %v: see the expected form with \"tern serve --print-config\"", path, err)
	}
	return nil
}

// applyEnv overlays the non-empty environment variables on cfg.
func applyEnv(cfg *serveConfig, getenv func(string) string) {
	set := func(dst *string, name string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	set(&cfg.Data, "TERN_DATA")
	set(&cfg.Listen, "TERN_LISTEN")
	set(&cfg.HTTP, "TERN_HTTP")
	set(&cfg.EtcdRoot, "TERN_ETCD_ROOT")
	set(&cfg.LogLevel, "TERN_LOG_LEVEL")
	if v := getenv("TERN_ETCD"); v != "" {
		cfg.Etcd = splitEndpoints(v)
	}
}

// splitEndpoints splits a comma-separated list of endpoints, dropping blanks.
func splitEndpoints(s string) []string {
	eps := []string{}
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	return eps
}

// serveFlags are tern serve's flags that override the configuration. They
// are applied only when set on the command line.
type serveFlags struct {
	serveConfig
	etcd        string // comma-separated
	config      string
	printConfig bool
}

func (f *serveFlags) register(fs *pflag.FlagSet) {
	d := defaultServeConfig()
	fs.StringVar(&f.Data, "data", d.Data, "the data `directory`; $TERN_DATA")
	fs.StringVar(&f.Listen, "listen", d.Listen, "the gRPC `address` (host:port); $TERN_LISTEN")
	fs.StringVar(&f.HTTP, "http", d.HTTP, "the `address` of /metrics, /healthz, /readyz and /debug/pprof/; $TERN_HTTP")
	fs.StringVar(&f.etcd, "etcd", "", "the `endpoints` (host:port,...) of an etcd cluster for the metadata; $TERN_ETCD (default: an etcd embedded in this process, with its data in <data>/etcd)")
	fs.StringVar(&f.EtcdRoot, "etcd-root", d.EtcdRoot, "the key `prefix` of the metadata in etcd; $TERN_ETCD_ROOT")
	fs.StringVar(&f.config, "config", "", "a YAML configuration `file`, overridden by $TERN_* and flags")
	fs.StringVar(&f.LogLevel, "log-level", d.LogLevel, "the lowest `level` logged: debug, info, warn or error; $TERN_LOG_LEVEL")
	fs.BoolVar(&f.printConfig, "print-config", false, "print the configuration in effect, as YAML, and exit")
}

// resolve is the configuration in effect: defaults < config file < env <
// the flags set in fs.
func (f *serveFlags) resolve(fs *pflag.FlagSet, getenv func(string) string) (serveConfig, error) {
	cfg := defaultServeConfig()
	if f.config != "" {
		if err := loadConfigFile(&cfg, f.config); err != nil {
			return cfg, err
		}
	}
	applyEnv(&cfg, getenv)
	set := func(dst *string, name, v string) {
		if fs.Changed(name) {
			*dst = v
		}
	}
	set(&cfg.Data, "data", f.Data)
	set(&cfg.Listen, "listen", f.Listen)
	set(&cfg.HTTP, "http", f.HTTP)
	set(&cfg.EtcdRoot, "etcd-root", f.EtcdRoot)
	set(&cfg.LogLevel, "log-level", f.LogLevel)
	if fs.Changed("etcd") {
		cfg.Etcd = splitEndpoints(f.etcd)
	}
	if cfg.Etcd == nil {
		cfg.Etcd = []string{} // printed as [], not null
	}
	return cfg, cfg.check()
}

// check validates cfg, saying what to do about a bad value.
func (c serveConfig) check() error {
	if c.Data == "" {
		return configErrorf("the data directory is empty: set --data (or $TERN_DATA, or data: in the config file)")
	}
	if err := checkAddr(c.Listen); err != nil {
		return configErrorf("listen address %q: %v: use host:port, such as 127.0.0.1:7070 or :7070, with --listen (or $TERN_LISTEN, or listen: in the config file)", c.Listen, err)
	}
	if err := checkAddr(c.HTTP); err != nil {
		return configErrorf("http address %q: %v: use host:port, such as 127.0.0.1:7071 or :7071, with --http (or $TERN_HTTP, or http: in the config file)", c.HTTP, err)
	}
	for _, e := range c.Etcd {
		if err := checkAddr(e); err != nil {
			return configErrorf("etcd endpoint %q: %v: use host:port,... such as 10.0.0.1:2379,10.0.0.2:2379 with --etcd (or $TERN_ETCD, or etcd: in the config file)", e, err)
		}
	}
	if !strings.HasPrefix(c.EtcdRoot, "/") {
		return configErrorf("etcd root %q: use a key prefix that starts with '/', such as /tern/, with --etcd-root (or $TERN_ETCD_ROOT, or etcd_root: in the config file)", c.EtcdRoot)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	return nil
}

func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "address "+addr+": "))
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// parseLevel parses a log level name.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, configErrorf("log level %q: use debug, info, warn or error, with --log-level (or $TERN_LOG_LEVEL, or log_level: in the config file)", s)
}

// marshal is cfg as a config file.
func (c serveConfig) marshal() ([]byte, error) {
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("print config: %w", err)
	}
	return b, nil
}
