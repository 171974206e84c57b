package tern

import (
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/ternwal/tern/internal/wal"
)

// recoverUnclean opens, in the background, the local logs that were being
// written when the process last stopped without closing them (a crash, a
// kill -9): their newest segment is open. Logs open at first use, so
// without this a torn tail would be cut, and a damaged segment found, only
// when a client next used the log; this way Health, /readyz and
// tern_logs_degraded report a damaged log soon after a start. dirs names
// the logs that have a directory, by directory (removeOrphans). A log
// opened here closes again once idle. On a node of a cluster, the logs
// another node serves are left alone.
func (c *embeddedClient) recoverUnclean(dirs map[string]string) {
	defer c.wg.Done()
	var opened int
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if c.stop.Err() != nil {
			return
		}
		id, err := strconv.ParseUint(dir, 10, 64)
		if err != nil {
			continue
		}
		if c.opts.Cluster != nil && !c.opts.Cluster.Serves(id) {
			continue
		}
		unclean, err := wal.Unclean(c.fs, filepath.Join(c.logsDir(), dir))
		if err != nil {
			c.opts.Logger.Error("checking whether a log was closed cleanly failed", "log", dirs[dir], "err", err)
			continue
		}
		if !unclean {
			continue
		}
		if err := c.recoverLog(dirs[dir]); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrClosed) {
			c.opts.Logger.Error("recovering a log that was not closed cleanly failed", "log", dirs[dir], "err", err)
		}
		opened++
	}
	if opened > 0 {
		c.opts.Logger.Info("recovered the logs that were open when the process stopped", "logs", opened)
	}
}

// recoverLog opens the log name's engine, recovering it, and lets it go.
func (c *embeddedClient) recoverLog(name string) error {
	l, err := c.openLog(c.stop, name)
	if err != nil {
		return err
	}
	_, release, err := l.acquire(c.stop)
	if err != nil {
		return err
	}
	release()
	return nil
}
