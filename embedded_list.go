package tern

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ternwal/tern/internal/meta"
)

// ListLogsPage describes a page of the logs whose names start with prefix,
// from the metadata, opening none: an open log is described by its engine,
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
	var opts LogOptions
	if err := json.Unmarshal(m.Options, &opts); err != nil {
		return LogInfo{}, fmt.Errorf("tern: log %q has unreadable options: %w", m.Name, err)
	}
	return LogInfo{Name: m.Name, ID: m.ID, Created: m.Created, Options: opts, Start: Offset(m.Start), End: Offset(m.Start), Epoch: m.Epoch,
		ExtentUnknown: true}, nil
}
