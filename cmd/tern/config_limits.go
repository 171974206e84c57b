package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/internal/server"
	"github.com/ternwal/tern/internal/units"
)

// serveLimits are tern serve's limits (docs/server.md, "Limits"), embedded
// in serveConfig: their keys sit at the top level of the config file. A
// count of 0 or less, or a duration of 0, sets no limit.
type serveLimits struct {
	MaxLogs                 int         `json:"max_logs"`
	MaxLogsPerPrefix        int         `json:"max_logs_per_prefix"`
	MaxSubscriptionsPerLog  int         `json:"max_subscriptions_per_log"`
	MaxStreamsPerConnection int         `json:"max_streams_per_connection"`
	MaxStreams              string      `json:"max_streams"` // a count, or auto (from the memory limit)
	IdleConnectionTimeout   string      `json:"idle_connection_timeout"`
	LogIdleTimeout          string      `json:"log_idle_timeout"`
	MaxRequestBytes         string      `json:"max_request_bytes"`
	ReuseSegments           int         `json:"reuse_segments"`
	ZeroAhead               sizeSetting `json:"zero_ahead"`
}

// sizeSetting is a size in a config file: a string such as 1MiB, or a
// number of bytes, as "zero_ahead: 0" is.
type sizeSetting string

func (s *sizeSetting) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*s = sizeSetting(n)
		return nil
	}
	return json.Unmarshal(b, (*string)(s))
}

// limitKeys are serveLimits' keys in a config file.
var limitKeys = []string{"max_logs", "max_logs_per_prefix", "max_subscriptions_per_log",
	"max_streams_per_connection", "max_streams", "idle_connection_timeout", "log_idle_timeout", "max_request_bytes", "reuse_segments", "zero_ahead"}

// minRequestBytes is the smallest max_request_bytes: a batch of one entry
// of the default largest size, with room for its framing.
const minRequestBytes = tern.DefaultMaxEntryBytes + 1<<20

func defaultLimits() serveLimits {
	return serveLimits{
		MaxLogs:                 tern.DefaultMaxLogs,
		MaxLogsPerPrefix:        tern.DefaultMaxLogsPerPrefix,
		MaxSubscriptionsPerLog:  tern.DefaultMaxSubscriptionsPerLog,
		MaxStreamsPerConnection: server.DefaultMaxStreamsPerConnection,
		MaxStreams:              "auto",
		IdleConnectionTimeout:   units.FormatDuration(server.DefaultIdleConnectionTimeout),
		LogIdleTimeout:          units.FormatDuration(tern.DefaultLogIdleTimeout),
		MaxRequestBytes:         units.FormatBytes(grpcopts.MaxMessageBytes),
		ReuseSegments:           tern.DefaultReuseSegments,
		ZeroAhead:               sizeSetting(units.FormatBytes(tern.DefaultZeroAheadBytes)),
	}
}

// limitCounts pairs each count with its key, flag and variable.
func (l *serveLimits) counts() []struct {
	key, env, flag string
	v              *int
} {
	return []struct {
		key, env, flag string
		v              *int
	}{
		{"max_logs", "TERN_MAX_LOGS", "max-logs", &l.MaxLogs},
		{"max_logs_per_prefix", "TERN_MAX_LOGS_PER_PREFIX", "max-logs-per-prefix", &l.MaxLogsPerPrefix},
		{"max_subscriptions_per_log", "TERN_MAX_SUBSCRIPTIONS_PER_LOG", "max-subscriptions-per-log", &l.MaxSubscriptionsPerLog},
		{"max_streams_per_connection", "TERN_MAX_STREAMS_PER_CONNECTION", "max-streams-per-connection", &l.MaxStreamsPerConnection},
		{"reuse_segments", "TERN_REUSE_SEGMENTS", "reuse-segments", &l.ReuseSegments},
	}
}

// applyLimitsEnv overlays the non-empty $TERN_ variables of the limits.
func applyLimitsEnv(l *serveLimits, getenv func(string) string) error {
	for _, c := range l.counts() {
		if v := getenv(c.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return configErrorf("$%s %q: use a whole number (0 for none)", c.env, v)
			}
			*c.v = n
		}
	}
	if v := getenv("TERN_MAX_STREAMS"); v != "" {
		l.MaxStreams = v
	}
	if v := getenv("TERN_IDLE_CONNECTION_TIMEOUT"); v != "" {
		l.IdleConnectionTimeout = v
	}
	if v := getenv("TERN_LOG_IDLE_TIMEOUT"); v != "" {
		l.LogIdleTimeout = v
	}
	if v := getenv("TERN_MAX_REQUEST_BYTES"); v != "" {
		l.MaxRequestBytes = v
	}
	if v := getenv("TERN_ZERO_AHEAD"); v != "" {
		l.ZeroAhead = sizeSetting(v)
	}
	return nil
}

func (f *serveFlags) registerLimits(fs *pflag.FlagSet) {
	d := defaultLimits()
	fs.IntVar(&f.MaxLogs, "max-logs", d.MaxLogs, "the most logs the server may have (0: no limit); $TERN_MAX_LOGS")
	fs.IntVar(&f.MaxLogsPerPrefix, "max-logs-per-prefix", d.MaxLogsPerPrefix, "the most logs under one namespace prefix, a name's part up to its last '/' (0: no limit); $TERN_MAX_LOGS_PER_PREFIX")
	fs.IntVar(&f.MaxSubscriptionsPerLog, "max-subscriptions-per-log", d.MaxSubscriptionsPerLog, "the most subscriptions one log may have (0: no limit); $TERN_MAX_SUBSCRIPTIONS_PER_LOG")
	fs.IntVar(&f.MaxStreamsPerConnection, "max-streams-per-connection", d.MaxStreamsPerConnection, "the most streams (reads, subscriptions, append streams) open at once on one client connection (0: no limit); $TERN_MAX_STREAMS_PER_CONNECTION")
	fs.StringVar(&f.MaxStreams, "max-streams", d.MaxStreams, "the most streams open at once on the server, all connections together (auto: a quarter of --memory-limit at 2 MiB a stream, at least 64; 0: no limit); $TERN_MAX_STREAMS")
	fs.StringVar(&f.IdleConnectionTimeout, "idle-connection-timeout", d.IdleConnectionTimeout, "close a client connection with no call for this `duration` (0: never); $TERN_IDLE_CONNECTION_TIMEOUT")
	fs.StringVar(&f.LogIdleTimeout, "log-idle-timeout", d.LogIdleTimeout, "close a log's engine (its open segment, its goroutines) after this `duration` with no call, writer, reader or subscriber; it opens again at its next use, and a local log goes on in its segment if it is neither full nor too old; $TERN_LOG_IDLE_TIMEOUT")
	fs.IntVar(&f.ReuseSegments, "reuse-segments", d.ReuseSegments, "the files of deleted segments each local log keeps to write its new segments over, which spares its fdatasyncs the allocation of new blocks; they hold the deleted entries' bytes until overwritten (0: none, a truncation or retention removes the files at once); $TERN_REUSE_SEGMENTS")
	fs.StringVar((*string)(&f.ZeroAhead), "zero-ahead", string(d.ZeroAhead), "how far past its last append each local log keeps its open segment's file (and each replica journal of a cluster node its file) written with zeros while its appends are small, so that an fdatasync writes over blocks the file has instead of growing it (`size`, at most 64MiB; 0: none, as on a copy-on-write filesystem such as btrfs or ZFS); $TERN_ZERO_AHEAD")
	fs.StringVar(&f.MaxRequestBytes, "max-request-bytes", d.MaxRequestBytes, fmt.Sprintf("the largest request message, such as a batch of appends (`size`, at least %s); $TERN_MAX_REQUEST_BYTES", units.FormatBytes(minRequestBytes)))
}

// resolveLimits sets the limits changed on the command line.
func (f *serveFlags) resolveLimits(fs *pflag.FlagSet, cfg *serveConfig) {
	for i, c := range cfg.serveLimits.counts() {
		if fs.Changed(c.flag) {
			*c.v = *f.serveLimits.counts()[i].v
		}
	}
	if fs.Changed("max-streams") {
		cfg.MaxStreams = f.MaxStreams
	}
	if fs.Changed("idle-connection-timeout") {
		cfg.IdleConnectionTimeout = f.IdleConnectionTimeout
	}
	if fs.Changed("log-idle-timeout") {
		cfg.LogIdleTimeout = f.LogIdleTimeout
	}
	if fs.Changed("max-request-bytes") {
		cfg.MaxRequestBytes = f.MaxRequestBytes
	}
	if fs.Changed("zero-ahead") {
		cfg.ZeroAhead = f.ZeroAhead
	}
}

// check validates the limits.
func (l serveLimits) check() error {
	if _, err := l.server(); err != nil {
		return err
	}
	return nil
}

// server is the limits as server.Limits, where 0 is the default and a
// negative value none.
func (l serveLimits) server() (server.Limits, error) {
	none := func(n int) int {
		if n <= 0 {
			return -1
		}
		return n
	}
	s := server.Limits{
		MaxLogs:                 none(l.MaxLogs),
		MaxLogsPerPrefix:        none(l.MaxLogsPerPrefix),
		MaxSubscriptionsPerLog:  none(l.MaxSubscriptionsPerLog),
		MaxStreamsPerConnection: none(l.MaxStreamsPerConnection),
		ReuseSegments:           none(l.ReuseSegments),
	}
	if l.MaxStreams != "auto" {
		n, err := strconv.Atoi(l.MaxStreams)
		if err != nil {
			return s, configErrorf("max streams %q: use a whole number (0 for no limit), or auto, with --max-streams (or $TERN_MAX_STREAMS, or max_streams: in the config file)", l.MaxStreams)
		}
		s.MaxStreams = none(n)
	}
	d, err := units.ParseDuration(l.IdleConnectionTimeout)
	if err != nil || d < 0 {
		return s, configErrorf("idle connection timeout %q: use a duration such as 15m (0: never), with --idle-connection-timeout (or $TERN_IDLE_CONNECTION_TIMEOUT, or idle_connection_timeout: in the config file)", l.IdleConnectionTimeout)
	}
	s.IdleConnectionTimeout = d
	if d == 0 {
		s.IdleConnectionTimeout = -1
	}
	idle, err := units.ParseDuration(l.LogIdleTimeout)
	if err != nil || idle <= 0 {
		return s, configErrorf("log idle timeout %q: use a duration such as 1m, with --log-idle-timeout (or $TERN_LOG_IDLE_TIMEOUT, or log_idle_timeout: in the config file)", l.LogIdleTimeout)
	}
	s.LogIdleTimeout = idle
	n, err := units.ParseBytes(l.MaxRequestBytes)
	if err != nil || n < minRequestBytes || n > 1<<31-1 {
		return s, configErrorf("max request bytes %q: use a size from %s to 2GiB, such as 64MiB, with --max-request-bytes (or $TERN_MAX_REQUEST_BYTES, or max_request_bytes: in the config file)", l.MaxRequestBytes, units.FormatBytes(minRequestBytes))
	}
	s.MaxRequestBytes = int(n)
	ahead, err := units.ParseBytes(string(l.ZeroAhead))
	if err != nil || ahead < 0 || ahead > maxZeroAhead {
		return s, configErrorf("zero ahead %q: use a size up to %s, such as 1MiB (0: none), with --zero-ahead (or $TERN_ZERO_AHEAD, or zero_ahead: in the config file)", l.ZeroAhead, units.FormatBytes(maxZeroAhead))
	}
	s.ZeroAheadBytes = ahead
	if ahead == 0 {
		s.ZeroAheadBytes = -1
	}
	return s, nil
}

// maxZeroAhead is the most --zero-ahead takes: zeros are written half of it
// at a time, in the append's path.
const maxZeroAhead = 64 << 20
