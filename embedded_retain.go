package tern

import (
	"context"
	"errors"
	"time"

	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
)

// retainLoop applies retention every RetentionInterval (on a node of a
// cluster, to the logs it serves), and compacts the logs in object storage:
// a log needs no writer, nor a reader, for its old data to go. It opens
// only the logs that have work (retainable).
func (c *embeddedClient) retainLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop.Done():
			return
		case <-t.C:
		}
		for _, l := range c.retainable() {
			eng, release, err := l.acquire(c.stop)
			if err != nil {
				if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotFound) && c.stop.Err() == nil {
					c.opts.Logger.Error("opening a log for retention failed", "log", l.name, "err", err)
				}
				continue
			}
			if err := l.applyRetention(eng); err != nil {
				c.opts.Logger.Error("retention failed", "log", l.name, "err", err)
			}
			// Close cancels a compaction in progress rather than wait.
			if err := l.compact(c.stop); err != nil && c.stop.Err() == nil {
				c.opts.Logger.Error("compaction failed", "log", l.name, "err", err)
			}
			release()
		}
	}
}

// retainable returns the logs the retention loop has work on, decided from
// the metadata without opening any: those open now, those whose options set
// a retention bound, and the object logs with a sealed segment that
// compaction would rewrite (objlog.NeedsCompaction). On a node of a cluster,
// a log that another node serves, or that none does yet, is left out: its
// retention and compaction are its owner's, and would race with them.
func (c *embeddedClient) retainable() []*embeddedLog {
	ctx, cancel := context.WithTimeout(c.stop, time.Minute)
	defer cancel()
	var logs []*embeddedLog
	for after := ""; ; {
		ms, err := c.meta.ListLogsPage(ctx, "", after, retainPage)
		if err != nil {
			c.opts.Logger.Error("listing the logs for retention failed", "err", err)
			return logs
		}
		for _, m := range ms {
			if c.opts.Cluster != nil && !c.opts.Cluster.Serves(m.ID) {
				continue
			}
			if !c.needsRetention(ctx, m) {
				continue
			}
			l, err := c.openLog(ctx, m.Name)
			switch {
			case errors.Is(err, ErrNotFound) || errors.Is(err, ErrClosed):
			case err != nil:
				c.opts.Logger.Error("opening a log for retention failed", "log", m.Name, "err", err)
			default:
				logs = append(logs, l)
			}
		}
		if len(ms) < retainPage {
			return logs
		}
		after = ms[len(ms)-1].Name
	}
}

// retainPage is how many logs retainable reads from the metadata at once.
const retainPage = 1000

// needsRetention reports whether the retention loop has work on the log m.
func (c *embeddedClient) needsRetention(ctx context.Context, m meta.Log) bool {
	c.mu.Lock()
	l := c.logLocked(m.Name)
	c.mu.Unlock()
	if l != nil && c.isOpen(l) {
		return true
	}
	opts, err := decodeOptions(m)
	if err != nil {
		return false // openLog would fail, as every other open of it
	}
	if hasRetention(opts) {
		return true
	}
	if opts.Mode != ModeObject || c.bucket == nil || c.compacted(m.ID) {
		return false
	}
	segs, err := c.meta.Segments(ctx, m.Name)
	if err != nil {
		c.opts.Logger.Error("reading a log's segments for compaction failed", "log", m.Name, "err", err)
		return false
	}
	if objlog.NeedsCompaction(segs) {
		return true
	}
	c.setCompacted(m.ID)
	return false
}

// compacted reports whether the object log with the given ID was found to
// need no compaction since its engine was last open: only an open engine
// seals segments, so its segments are read again only after its next use.
func (c *embeddedClient) compacted(id uint64) bool {
	c.openMu.Lock()
	defer c.openMu.Unlock()
	return c.noCompaction[id]
}

func (c *embeddedClient) setCompacted(id uint64) {
	c.openMu.Lock()
	defer c.openMu.Unlock()
	c.noCompaction[id] = true
}
