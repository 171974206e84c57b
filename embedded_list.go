package tern

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/record"
	"github.com/ternwal/tern/internal/wal"
)

// ListLogsPage describes a page of the logs whose names start with prefix,
// from the metadata, opening none: an open log is described by its engine,
// a local log closed cleanly by its files (its newest segment's footer),
// any other as ListLogsMeta does.
func (c *embeddedClient) ListLogsPage(ctx context.Context, prefix, token string, size int) (LogPage, error) {
	size = listPageSize(size)
	ms, err := c.meta.ListLogsPage(ctx, prefix, token, size)
	if err != nil {
		return LogPage{}, fmt.Errorf("tern: list logs: %w", err)
	}
	page := LogPage{Logs: make([]LogInfo, 0, len(ms))}
	for _, m := range ms {
		c.mu.Lock()
		l := c.logLocked(m.Name)
		c.mu.Unlock()
		if l != nil && l.id == m.ID {
			if info, ok := l.infoIfOpen(); ok {
				page.Logs = append(page.Logs, info)
				continue
			}
			if info, ok := l.freshInfo(); ok {
				page.Logs = append(page.Logs, info)
				continue
			}
		}
		info, err := metaInfo(m)
		if err != nil {
			return LogPage{}, err
		}
		if info.Options.Mode == ModeLocal || info.Options.Mode == "" {
			c.closedExtent(&info)
		}
		page.Logs = append(page.Logs, info)
	}
	if len(ms) == size {
		page.NextPageToken = ms[len(ms)-1].Name
	}
	return page, nil
}

func (c *embeddedClient) ListLogsMeta(ctx context.Context, prefix string) ([]LogInfo, error) {
	ms, err := c.meta.ListLogs(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("tern: list logs: %w", err)
	}
	infos := make([]LogInfo, len(ms))
	for i, m := range ms {
		if infos[i], err = metaInfo(m); err != nil {
			return nil, err
		}
	}
	return infos, nil
}

// metaInfo describes a log from its metadata alone: its End is its Start,
// and its Bytes, Segments and Objects are 0.
func metaInfo(m meta.Log) (LogInfo, error) {
	opts, err := decodeOptions(m)
	if err != nil {
		return LogInfo{}, err
	}
	return LogInfo{Name: m.Name, ID: m.ID, Created: m.Created, Options: opts, Start: Offset(m.Start), End: Offset(m.Start), Epoch: sessionOf(m),
		ExtentUnknown: true}, nil
}

// closedExtent fills in the extent of a local log that is not open from its
// files: a log with no directory was never opened, so is empty; one closed
// cleanly says where it ends in its newest segment's footer. Otherwise the
// extent stays unknown.
func (c *embeddedClient) closedExtent(info *LogInfo) {
	x, ok, err := wal.ClosedExtent(c.fs, c.logDir(info.ID))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		info.ExtentUnknown = false // End is Start, and the rest 0
		return
	case err != nil:
		c.opts.Logger.Warn("reading a closed log's extent failed", "log", info.Name, "err", err)
	}
	if !ok || Offset(x.End) < info.Start {
		return
	}
	info.End, info.Bytes, info.Segments, info.ExtentUnknown = Offset(x.End), x.Bytes, x.Segments, false
	info.LogicalBytes = x.Bytes
	if codecOf(info.Options.Compression) != record.None {
		saved, err := wal.SavedBytes(c.fs, c.logDir(info.ID))
		if err != nil {
			c.opts.Logger.Warn("reading a closed log's batch headers failed", "log", info.Name, "err", err)
		}
		info.LogicalBytes += saved
	}
}
