package tern

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Defaults of the limits of Options.
const (
	DefaultMaxLogs                = 1_000_000
	DefaultMaxLogsPerPrefix       = 100_000
	DefaultMaxSubscriptionsPerLog = 1_000
)

// limitOrDefault is an Options limit as the client applies it: 0 takes def,
// and a negative value, no limit, is 0.
func limitOrDefault(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// countTTL is how long a count of logs read from the metadata is trusted
// (kept up to date with this client's own creations and deletions) before
// it is read again: other nodes sharing the metadata change it too.
const countTTL = 5 * time.Second

// logCount is a count of the logs under a name prefix, as read at a time
// and moved since by this client's creations and deletions.
type logCount struct {
	n  int
	at time.Time
}

// namespace is the namespace prefix of a log name: its part up to and
// including the last '/', or "" if it has none.
func namespace(name string) string {
	return name[:strings.LastIndexByte(name, '/')+1]
}

// checkLogLimits fails with ErrLimit if creating the log name would pass
// MaxLogs or MaxLogsPerPrefix. The caller holds c.mu.
func (c *embeddedClient) checkLogLimits(ctx context.Context, name string) error {
	if limit := c.opts.MaxLogs; limit > 0 {
		n, err := c.countLocked(ctx, "", limit)
		if err != nil {
			return err
		}
		if n >= limit {
			return fmt.Errorf("%w: the server has %d logs, the most it may have (Options.MaxLogs, tern serve --max-logs): delete some, or raise the limit", ErrLimit, n)
		}
	}
	if ns, limit := namespace(name), c.opts.MaxLogsPerPrefix; ns != "" && limit > 0 {
		n, err := c.countLocked(ctx, ns, limit)
		if err != nil {
			return err
		}
		if n >= limit {
			return fmt.Errorf("%w: %d logs have names under %q, the most one namespace prefix may have (Options.MaxLogsPerPrefix, tern serve --max-logs-per-prefix): delete some, or raise the limit", ErrLimit, n, ns)
		}
	}
	return nil
}

// countLocked returns the number of logs whose names start with prefix:
// from the count kept if it is recent and below limit, else from the
// metadata. The caller holds c.mu.
func (c *embeddedClient) countLocked(ctx context.Context, prefix string, limit int) (int, error) {
	if k, ok := c.counts[prefix]; ok && time.Since(k.at) < countTTL && k.n < limit {
		return k.n, nil
	}
	n, err := c.meta.CountLogs(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("tern: count the logs under %q: %w", prefix, err)
	}
	if len(c.counts) >= maxCounts {
		c.pruneCountsLocked()
	}
	c.counts[prefix] = logCount{n: n, at: time.Now()}
	return n, nil
}

// maxCounts bounds the counts kept: one per namespace recently created in.
const maxCounts = 10_000

func (c *embeddedClient) pruneCountsLocked() {
	for p, k := range c.counts {
		if time.Since(k.at) >= countTTL {
			delete(c.counts, p)
		}
	}
	if len(c.counts) >= maxCounts {
		clear(c.counts)
	}
}

// countedLocked moves the kept counts that cover name by delta, after this
// client created (+1) or deleted (-1) it. The caller holds c.mu.
func (c *embeddedClient) countedLocked(name string, delta int) {
	for _, p := range []string{"", namespace(name)} {
		if k, ok := c.counts[p]; ok {
			k.n += delta
			c.counts[p] = k
		}
		if p == "" && namespace(name) == "" {
			break
		}
	}
}

// listPageSize is the page size ListLogsPage uses for size.
func listPageSize(size int) int {
	switch {
	case size <= 0:
		return DefaultListPageSize
	case size > MaxListPageSize:
		return MaxListPageSize
	}
	return size
}
