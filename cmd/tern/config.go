package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/server"
	"github.com/ternwal/tern/internal/units"
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
	// HTTP is the address of /metrics, /healthz, /readyz and, with Pprof,
	// /debug/pprof/.
	HTTP string `json:"http"`
	// Etcd lists the client endpoints (host:port) of an external etcd
	// cluster for the metadata. Empty starts an embedded etcd.
	Etcd []string `json:"etcd"`
	// EtcdRoot is the key prefix of Tern's metadata in etcd.
	EtcdRoot string `json:"etcd_root"`
	// EtcdQuota is the embedded etcd's backend quota, a size such as
	// 2GiB: at it, etcd takes no more writes (NOSPACE). An external etcd
	// has its own (its --quota-backend-bytes).
	EtcdQuota string `json:"etcd_quota"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `json:"log_level"`
	// LogFormat is text (key=value) or json (one object per line).
	LogFormat string `json:"log_format"`

	// Storage is the URL of the object store of the logs in object mode
	// (tern.StorageOptions.URL). Empty: none, and only local logs.
	Storage string `json:"storage"`
	// Mode is the mode of the logs created without one: local, object, or,
	// on the nodes of a cluster, quorum.
	Mode string `json:"mode"`
	// StorageAccessKey and StorageSecretKey are the S3 credentials. Empty,
	// the store takes $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and
	// $AWS_SESSION_TOKEN. They have no flags, which any user could read in
	// the process list, and marshal leaves the secret out.
	StorageAccessKey string `json:"storage_access_key"`
	StorageSecretKey string `json:"storage_secret_key,omitempty"`
	// StorageSSECKeyFile is a file that holds the SSE-C key (sse=c in the
	// URL): 32 bytes, or 64 hex digits.
	StorageSSECKeyFile string `json:"storage_ssec_key_file"`

	// NodeID makes this server a node of a cluster, under this ID: the
	// nodes share the etcd cluster (Etcd) and the object store (Storage),
	// each log is served by one of them, and quorum logs keep their open
	// segments on the nodes. Empty: a standalone server.
	NodeID string `json:"node_id"`
	// Advertise is the address the other nodes and the clients reach this
	// node's gRPC at. Empty: Listen.
	Advertise string `json:"advertise"`
	// NodeTTL is the lease of a node's membership and of the logs it
	// serves: a node that stops renewing it (it died, or lost etcd) gives
	// its logs up this long after, and another node takes them over.
	NodeTTL string `json:"node_ttl"`

	// DiskReserve is the free space on the data directory's disk that
	// appends leave, for the embedded etcd and the subscriptions' cursors:
	// a size such as 256MiB, 0 for none, or "auto" for 256 MiB or a tenth
	// of the filesystem if that is less.
	DiskReserve string `json:"disk_reserve"`
	// EtcdDir is the embedded etcd's data directory: empty for
	// <data>/etcd. Another disk keeps etcd safe from a full data disk.
	EtcdDir string `json:"etcd_dir"`
	// MemoryLimit is what the server's memory is held to, such as 2GiB:
	// Go's soft memory limit and the budgets of appends and reads in
	// memory (docs/server.md). Empty: a quarter of the machine's memory,
	// or of the cgroup's limit if smaller.
	MemoryLimit string `json:"memory_limit"`
	// memoryLimitBytes is MemoryLimit parsed by check; 0 for the default.
	memoryLimitBytes int64

	serveLimits   // config_limits.go
	serveSecurity // config_security.go

	// ssecKey is the key read from StorageSSECKeyFile by resolve.
	ssecKey []byte
}

// configKeys are the keys a config file may have, as serveConfig's json tags
// name them.
var configKeys = append([]string{"data", "listen", "http", "etcd", "etcd_root", "etcd_quota", "log_level", "log_format",
	"storage", "mode", "storage_access_key", "storage_secret_key", "storage_ssec_key_file", "node_id", "advertise", "node_ttl",
	"disk_reserve", "etcd_dir", "memory_limit"},
	append(limitKeys, securityKeys...)...)

func defaultServeConfig() serveConfig {
	return serveConfig{
		Data:      "./tern-data",
		Listen:    "127.0.0.1:7070",
		HTTP:      "127.0.0.1:7071",
		Etcd:      []string{},
		EtcdRoot:  "/tern/",
		EtcdQuota: units.FormatBytes(meta.DefaultEtcdQuotaBytes),
		LogLevel:  "info",
		LogFormat: "text",
		NodeTTL:   "10s",

		DiskReserve: "auto",
		serveLimits: defaultLimits(),
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
	set(&cfg.Data, "TERN_DIR") // its old name; the CLI warns about it
	set(&cfg.Data, "TERN_DATA")
	set(&cfg.Listen, "TERN_LISTEN")
	set(&cfg.HTTP, "TERN_HTTP")
	set(&cfg.EtcdRoot, "TERN_ETCD_ROOT")
	set(&cfg.EtcdQuota, "TERN_ETCD_QUOTA")
	set(&cfg.LogLevel, "TERN_LOG_LEVEL")
	set(&cfg.LogFormat, "TERN_LOG_FORMAT")
	set(&cfg.Storage, "TERN_STORAGE")
	set(&cfg.Mode, "TERN_MODE")
	set(&cfg.StorageAccessKey, "TERN_STORAGE_ACCESS_KEY")
	set(&cfg.StorageSecretKey, "TERN_STORAGE_SECRET_KEY")
	set(&cfg.StorageSSECKeyFile, "TERN_STORAGE_SSEC_KEY_FILE")
	set(&cfg.NodeID, "TERN_NODE_ID")
	set(&cfg.Advertise, "TERN_ADVERTISE")
	set(&cfg.NodeTTL, "TERN_NODE_TTL")
	set(&cfg.DiskReserve, "TERN_DISK_RESERVE")
	set(&cfg.EtcdDir, "TERN_ETCD_DIR")
	set(&cfg.MemoryLimit, "TERN_MEMORY_LIMIT")
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
	fs.StringVar(&f.Data, "dir", d.Data, "the data `directory`: the old name of --data")
	fs.MarkHidden("dir") // the root command's hook says to use --data
	fs.StringVar(&f.Listen, "listen", d.Listen, "the gRPC `address` (host:port); $TERN_LISTEN")
	fs.StringVar(&f.HTTP, "http", d.HTTP, "the `address` of /metrics, /healthz, /readyz and, with --pprof, /debug/pprof/; $TERN_HTTP")
	fs.StringVar(&f.etcd, "etcd", "", "the `endpoints` (host:port,...) of an etcd cluster for the metadata; $TERN_ETCD (default: an etcd embedded in this process, with its data in <data>/etcd)")
	fs.StringVar(&f.EtcdRoot, "etcd-root", d.EtcdRoot, "the key `prefix` of the metadata in etcd; $TERN_ETCD_ROOT")
	fs.StringVar(&f.EtcdQuota, "etcd-quota", d.EtcdQuota, "the embedded etcd's backend quota, a `size` (at least 16MiB): at it etcd takes no writes until space is freed; $TERN_ETCD_QUOTA")
	fs.StringVar(&f.config, "config", "", "a YAML configuration `file`, overridden by $TERN_* and flags")
	fs.StringVar(&f.LogLevel, "log-level", d.LogLevel, "the lowest `level` logged: debug, info, warn or error; $TERN_LOG_LEVEL")
	fs.StringVar(&f.LogFormat, "log-format", d.LogFormat, "the `format` of the log lines on stderr: text (key=value) or json (one object per line); $TERN_LOG_FORMAT")
	fs.StringVar(&f.Storage, "storage", d.Storage, "the `URL` of the object store of object logs: s3://BUCKET/PREFIX?endpoint=HOST:PORT (&region=R&tls=false&ca=FILE&sse=s3|c; HTTPS unless tls=false) or dir:///PATH; $TERN_STORAGE (default: none)")
	fs.StringVar(&f.Mode, "mode", d.Mode, "the `mode` of the logs created without --mode: local, object (needs --storage) or quorum (needs --node-id); $TERN_MODE (default: local, or quorum on a node of a cluster)")
	fs.StringVar(&f.StorageSSECKeyFile, "storage-ssec-key-file", d.StorageSSECKeyFile, "a `file` holding the SSE-C key of sse=c: 32 bytes, or 64 hex digits; $TERN_STORAGE_SSEC_KEY_FILE")
	fs.StringVar(&f.NodeID, "node-id", d.NodeID, "run as the node with this `ID` of a cluster that shares --etcd and --storage; $TERN_NODE_ID (default: a standalone server)")
	fs.StringVar(&f.Advertise, "advertise", d.Advertise, "the `address` (host:port) other nodes and clients reach this node at; $TERN_ADVERTISE (default: --listen)")
	fs.StringVar(&f.NodeTTL, "node-ttl", d.NodeTTL, "the `duration` after which a node that stopped renewing its lease gives its logs up to the others; $TERN_NODE_TTL")
	fs.StringVar(&f.DiskReserve, "disk-reserve", d.DiskReserve, "the free `size` on the data directory's disk that appends leave for the metadata (the embedded etcd) and the subscriptions' cursors, such as 256MiB; 0 for none; $TERN_DISK_RESERVE (auto: 256MiB, or a tenth of the filesystem if less)")
	fs.StringVar(&f.EtcdDir, "etcd-dir", d.EtcdDir, "the embedded etcd's data `directory`, on another disk than --data so that a full data disk cannot stop it; $TERN_ETCD_DIR (default: <data>/etcd)")
	fs.StringVar(&f.MemoryLimit, "memory-limit", d.MemoryLimit, "the `size` the server's memory is held to, such as 2GiB: Go's soft memory limit and the budgets of appends and reads in memory; $TERN_MEMORY_LIMIT (default: a quarter of the machine's memory, or of the cgroup's limit if smaller)")
	f.registerLimits(fs)
	f.registerSecurity(fs)
	fs.BoolVar(&f.printConfig, "print-config", false, "print the configuration in effect, as YAML, and exit; it leaves out storage_secret_key")
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
	if err := applyLimitsEnv(&cfg.serveLimits, getenv); err != nil {
		return cfg, err
	}
	if err := applySecurityEnv(&cfg.serveSecurity, getenv); err != nil {
		return cfg, err
	}
	set := func(dst *string, name, v string) {
		if fs.Changed(name) {
			*dst = v
		}
	}
	set(&cfg.Data, "dir", f.Data)
	set(&cfg.Data, "data", f.Data)
	set(&cfg.Listen, "listen", f.Listen)
	set(&cfg.HTTP, "http", f.HTTP)
	set(&cfg.EtcdRoot, "etcd-root", f.EtcdRoot)
	set(&cfg.EtcdQuota, "etcd-quota", f.EtcdQuota)
	set(&cfg.LogLevel, "log-level", f.LogLevel)
	set(&cfg.LogFormat, "log-format", f.LogFormat)
	set(&cfg.Storage, "storage", f.Storage)
	set(&cfg.Mode, "mode", f.Mode)
	set(&cfg.StorageSSECKeyFile, "storage-ssec-key-file", f.StorageSSECKeyFile)
	set(&cfg.NodeID, "node-id", f.NodeID)
	set(&cfg.Advertise, "advertise", f.Advertise)
	set(&cfg.NodeTTL, "node-ttl", f.NodeTTL)
	set(&cfg.DiskReserve, "disk-reserve", f.DiskReserve)
	set(&cfg.EtcdDir, "etcd-dir", f.EtcdDir)
	set(&cfg.MemoryLimit, "memory-limit", f.MemoryLimit)
	if fs.Changed("etcd") {
		cfg.Etcd = splitEndpoints(f.etcd)
	}
	f.resolveLimits(fs, &cfg)
	f.resolveSecurity(fs, &cfg)
	if cfg.Etcd == nil {
		cfg.Etcd = []string{} // printed as [], not null
	}
	if cfg.Mode == "" {
		// A node of a cluster serves logs that move between the nodes.
		cfg.Mode = string(tern.ModeLocal)
		if cfg.NodeID != "" {
			cfg.Mode = string(tern.ModeQuorum)
		}
	}
	if err := cfg.check(); err != nil {
		return cfg, err
	}
	if cfg.MemoryLimit != "" {
		cfg.memoryLimitBytes, _ = units.ParseBytes(cfg.MemoryLimit) // checked
	}
	var err error
	cfg.ssecKey, err = readSSECKey(cfg.StorageSSECKeyFile, "--storage-ssec-key-file (or $TERN_STORAGE_SSEC_KEY_FILE, or storage_ssec_key_file: in the config file)")
	return cfg, err
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
		if err := checkEtcdEndpoint(e); err != nil {
			return configErrorf("etcd endpoint %q: %v: use host:port,... such as 10.0.0.1:2379,10.0.0.2:2379 (or unix:///PATH of a socket) with --etcd (or $TERN_ETCD, or etcd: in the config file)", e, err)
		}
	}
	if !strings.HasPrefix(c.EtcdRoot, "/") {
		return configErrorf("etcd root %q: use a key prefix that starts with '/', such as /tern/, with --etcd-root (or $TERN_ETCD_ROOT, or etcd_root: in the config file)", c.EtcdRoot)
	}
	if _, err := c.etcdQuotaBytes(); err != nil {
		return err
	}
	if _, err := newLogHandler(io.Discard, c.LogFormat, slog.LevelInfo); err != nil {
		return err
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if _, err := c.diskReserveBytes(); err != nil {
		return err
	}
	if c.EtcdDir != "" && len(c.Etcd) > 0 {
		return configErrorf("--etcd-dir is the directory of the embedded etcd, and --etcd names an external one: leave one out (or $TERN_ETCD_DIR, or etcd_dir: in the config file)")
	}
	if err := c.checkCluster(); err != nil {
		return err
	}
	if err := c.checkMemory(); err != nil {
		return err
	}
	if err := c.serveLimits.check(); err != nil {
		return err
	}
	if err := c.serveSecurity.check(); err != nil {
		return err
	}
	return c.checkStorage()
}

// diskReserveBytes is DiskReserve as tern.Options.DiskReserveBytes takes
// it: 0 for the default (auto), negative for none.
func (c serveConfig) diskReserveBytes() (int64, error) {
	if c.DiskReserve == "auto" {
		return 0, nil
	}
	n, err := units.ParseBytes(c.DiskReserve)
	if err != nil {
		return 0, configErrorf("disk reserve: %v, or auto; with --disk-reserve (or $TERN_DISK_RESERVE, or disk_reserve: in the config file)", err)
	}
	if n == 0 {
		return -1, nil
	}
	return n, nil
}

// minEtcdQuota is the smallest --etcd-quota: less leaves etcd too little
// room for the metadata of a few logs.
const minEtcdQuota = 16 << 20

// etcdQuotaBytes is EtcdQuota in bytes.
func (c serveConfig) etcdQuotaBytes() (int64, error) {
	n, err := units.ParseBytes(c.EtcdQuota)
	if err != nil || n < minEtcdQuota {
		return 0, configErrorf("etcd quota %q: use a size of at least %s, such as 2GiB or 8GiB (etcd's largest advised), with --etcd-quota (or $TERN_ETCD_QUOTA, or etcd_quota: in the config file)",
			c.EtcdQuota, units.FormatBytes(minEtcdQuota))
	}
	return n, nil
}

// checkCluster validates the settings of a node of a cluster.
func (c serveConfig) checkCluster() error {
	switch {
	case c.NodeID == "" && c.Mode == string(tern.ModeQuorum):
		return configErrorf("mode quorum keeps the open segments on the nodes of a cluster, and this server is not one: set --node-id (or $TERN_NODE_ID, or node_id: in the config file), or use --mode local")
	case c.NodeID == "" && c.Advertise != "":
		return configErrorf("--advertise is the address of a node of a cluster, and this server is not one: set --node-id too (or $TERN_NODE_ID, or node_id: in the config file)")
	case c.NodeID == "":
		return nil
	case strings.ContainsAny(c.NodeID, "/ \t\n"):
		return configErrorf("node ID %q: use letters, digits, '-', '_' or '.', with --node-id (or $TERN_NODE_ID, or node_id: in the config file)", c.NodeID)
	case c.Storage == "":
		return configErrorf("a node of a cluster keeps sealed segments in the cluster's object store, and none is set: set --storage (or $TERN_STORAGE, or storage: in the config file)")
	case c.Mode == string(tern.ModeLocal):
		return configErrorf("mode local keeps a log on one node's disk, and the logs of a cluster move between its nodes: use --mode quorum (a node's default) or object (or $TERN_MODE, or mode: in the config file)")
	}
	if ttl, err := units.ParseDuration(c.NodeTTL); err != nil || ttl < time.Second {
		return configErrorf("node TTL %q: use a duration of at least 1s, such as 10s, with --node-ttl (or $TERN_NODE_TTL, or node_ttl: in the config file)", c.NodeTTL)
	}
	if c.Advertise != "" {
		if err := checkAddr(c.Advertise); err != nil {
			return configErrorf("advertise address %q: %v: use host:port with --advertise (or $TERN_ADVERTISE, or advertise: in the config file)", c.Advertise, err)
		}
	}
	return nil
}

// checkMemory validates the memory limit.
func (c serveConfig) checkMemory() error {
	if c.MemoryLimit == "" {
		return nil
	}
	n, err := units.ParseBytes(c.MemoryLimit)
	if err != nil || n < server.MinMemoryLimit {
		return configErrorf("memory limit %q: use a size of at least %s, such as 2GiB, with --memory-limit (or $TERN_MEMORY_LIMIT, or memory_limit: in the config file), or leave it out for a quarter of the machine's memory",
			c.MemoryLimit, units.FormatBytes(server.MinMemoryLimit))
	}
	return nil
}

// checkStorage validates the object store settings. The URL itself is
// checked by tern.Open, which knows the schemes.
func (c serveConfig) checkStorage() error {
	mode, err := tern.ParseMode(c.Mode)
	if err != nil {
		return configErrorf("mode %q: use local, object or quorum, with --mode (or $TERN_MODE, or mode: in the config file)", c.Mode)
	}
	if c.Storage != "" {
		if (c.StorageAccessKey == "") != (c.StorageSecretKey == "") {
			return configErrorf("storage_access_key and storage_secret_key go together: set both ($TERN_STORAGE_ACCESS_KEY and $TERN_STORAGE_SECRET_KEY, or the keys in the config file), or neither to use $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY")
		}
		return nil
	}
	noStore := "set --storage (or $TERN_STORAGE, or storage: in the config file), such as --storage 's3://tern/wal?endpoint=127.0.0.1:9000&tls=false'"
	switch {
	case mode == tern.ModeObject:
		return configErrorf("mode object keeps the logs in an object store, and none is set: %s, or use --mode local", noStore)
	case c.StorageAccessKey != "" || c.StorageSecretKey != "":
		return configErrorf("object store credentials are set (storage_access_key, storage_secret_key), and no object store: %s, or leave the credentials out", noStore)
	case c.StorageSSECKeyFile != "":
		return configErrorf("an SSE-C key file is set (--storage-ssec-key-file), and no object store: %s, or leave the key file out", noStore)
	}
	return nil
}

// sseCKeyBytes is the size of an SSE-C key (AES-256).
const sseCKeyBytes = 32

// readSSECKey reads the SSE-C key in the file at path: sseCKeyBytes bytes,
// or as many in hex. An empty path is no key. setting says where path was
// set, for the errors.
func readSSECKey(path, setting string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, configErrorf("SSE-C key file %s does not exist: check %s", path, setting)
	}
	if err != nil {
		return nil, configErrorf("read SSE-C key file: %w", err)
	}
	if len(b) == sseCKeyBytes {
		return b, nil
	}
	if h := bytes.TrimSpace(b); len(h) == 2*sseCKeyBytes {
		if key, err := hex.DecodeString(string(h)); err == nil {
			return key, nil
		}
	}
	return nil, configErrorf("SSE-C key file %s holds %d bytes, not a key: it must hold the %d-byte key, or the key as %d hex digits (make one with \"openssl rand -hex %d > %s\")",
		path, len(b), sseCKeyBytes, 2*sseCKeyBytes, sseCKeyBytes, path)
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

// checkEtcdEndpoint checks an etcd client endpoint: host:port, or the
// unix:///PATH of a socket (as the embedded etcd's), which clientv3 dials.
func checkEtcdEndpoint(e string) error {
	if path, ok := strings.CutPrefix(e, "unix://"); ok {
		if !strings.HasPrefix(path, "/") {
			return errors.New("a socket's endpoint is unix:// and an absolute path")
		}
		return nil
	}
	return checkAddr(e)
}

// unprintableInYAML returns the first rune of s outside YAML 1.2's
// printable set (section 5.1): C0 and C1 controls other than tab, line
// feed, carriage return and next line, and U+FFFE and U+FFFF.
func unprintableInYAML(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		case r < 0x20 || (r >= 0x7f && r < 0xa0) || r == 0xfffe || r == 0xffff:
			return r, true
		}
	}
	return 0, false
}

// parseLevel parses a log level name.
// newLogHandler is the handler of tern serve's log lines, in format (text
// or json) from level up.
func newLogHandler(w io.Writer, format string, level slog.Level) (slog.Handler, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, configErrorf("log format %q: use text or json, with --log-format (or $TERN_LOG_FORMAT, or log_format: in the config file)", format)
}

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

// marshal is cfg as a config file, without the secret key: a comment says
// whether it is set. It refuses a value (from the environment or a flag)
// that YAML cannot hold: one that is not UTF-8 would load back as another
// value, a control character outside tab and newlines does not load, and a
// next line (U+0085) would load back as a space.
func (c serveConfig) marshal() ([]byte, error) {
	secret := c.StorageSecretKey != ""
	c.StorageSecretKey = ""
	for _, v := range append([]string{c.Data, c.Listen, c.HTTP, c.EtcdRoot, c.EtcdQuota, c.LogLevel, c.LogFormat, c.Storage, c.Mode,
		c.StorageAccessKey, c.StorageSSECKeyFile, c.NodeID, c.Advertise, c.NodeTTL, c.DiskReserve, c.EtcdDir,
		c.MemoryLimit, c.IdleConnectionTimeout, c.MaxRequestBytes, c.TLSCert, c.TLSKey, c.TLSClientCA, c.Auth}, c.Etcd...) {
		if !utf8.ValidString(v) {
			return nil, configErrorf("print config: %q is not UTF-8, which a config file cannot hold", v)
		}
		if r, ok := unprintableInYAML(v); ok {
			return nil, configErrorf("print config: %q holds the control character %U, which a config file cannot hold", v, r)
		}
		if strings.ContainsRune(v, 0x85) {
			// YAML allows it, but the printer writes it bare inside
			// single quotes, where it loads back as a space.
			return nil, configErrorf("print config: %q holds U+0085 (next line), which a config file cannot hold as printed", v)
		}
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("print config: %w", err)
	}
	if secret {
		b = append(b, "# storage_secret_key is set, and not printed\n"...)
	}
	return b, nil
}
