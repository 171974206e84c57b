package tern

import (
	"context"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/ternwal/tern/internal/engine"
)

// An idle log costs the struct that names it and nothing else: its engine,
// which holds the segment files, buffers and goroutines (a wal's committer,
// an object log's flusher), is opened by the first call that needs it and
// closed by the client's idle loop once no call, writer, reader or
// subscriber has held it for Options.LogIdleTimeout. Closing it finishes
// the appends queued and seals the open segment, as closing the client does;
// the next use opens it again from its metadata, as a restart would. A
// quorum log stays open once opened: its open segment lives on replicas.

// The client holds a log weakly while its engine is closed: the struct goes
// once no handle, writer, pending commit or call refers to it, and the next
// OpenLog makes it again from the metadata. While the engine is open, the
// client's open set holds it.

// logLocked returns the log the client holds by name, or nil. The caller
// holds c.mu.
func (c *embeddedClient) logLocked(name string) *embeddedLog {
	if p, ok := c.logs[name]; ok {
		return p.Value()
	}
	return nil
}

// rememberLocked holds l weakly, until it is collected. The caller holds
// c.mu.
func (c *embeddedClient) rememberLocked(l *embeddedLog) {
	c.logs[l.name] = weak.Make(l)
	runtime.AddCleanup(l, c.forget, l.name)
}

// forget drops the name of a collected log, unless it names a newer one.
func (c *embeddedClient) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.logs[name]; ok && p.Value() == nil {
		delete(c.logs, name)
	}
}

// acquire returns the log's engine, opening it if it is closed, and holds
// it open until release is called (release is idempotent).
func (l *embeddedLog) acquire(ctx context.Context) (engine.Engine, func(), error) {
	l.engMu.Lock()
	defer l.engMu.Unlock()
	if l.gone {
		return nil, nil, ErrClosed
	}
	if l.eng == nil {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		eng, err := l.openEngine(ctx)
		if err != nil {
			return nil, nil, err
		}
		l.eng, l.fresh = eng, false
		l.c.setOpen(l, true)
	}
	l.users++
	var once sync.Once
	return l.eng, func() { once.Do(l.release) }, nil
}

func (l *embeddedLog) release() {
	l.engMu.Lock()
	defer l.engMu.Unlock()
	l.users--
	if l.users == 0 {
		l.idleSince = time.Now()
	}
}

// closeIfIdle closes the log's engine if nothing has held it since before
// idleBefore, and then lets its shared producers' session go.
func (l *embeddedLog) closeIfIdle(idleBefore time.Time) {
	if l.closeEngineIfIdle(idleBefore) {
		l.dropShared()
	}
}

// closeEngineIfIdle is closeIfIdle's part under engMu, and reports whether
// it closed the engine.
func (l *embeddedLog) closeEngineIfIdle(idleBefore time.Time) bool {
	l.engMu.Lock()
	defer l.engMu.Unlock()
	if l.eng == nil || l.gone || l.users > 0 || l.idleSince.After(idleBefore) || l.opts.Mode == ModeQuorum {
		return false
	}
	if err := l.eng.Close(); err != nil {
		l.c.opts.Logger.Error("closing an idle log failed; it is opened, and recovered, again at its next use", "log", l.name, "err", err)
	}
	l.eng = nil
	l.c.setOpen(l, false)
	return true
}

// setOpen records whether l's engine is open. The caller holds l.engMu.
func (c *embeddedClient) setOpen(l *embeddedLog, open bool) {
	c.openMu.Lock()
	defer c.openMu.Unlock()
	if open {
		c.open[l] = struct{}{}
		delete(c.noCompaction, l.id) // it may seal segments
	} else {
		delete(c.open, l)
	}
}

// openLogs returns the logs whose engines are open.
func (c *embeddedClient) openLogs() []*embeddedLog {
	c.openMu.Lock()
	defer c.openMu.Unlock()
	logs := make([]*embeddedLog, 0, len(c.open))
	for l := range c.open {
		logs = append(logs, l)
	}
	return logs
}

// isOpen reports whether l's engine is open, without l.engMu.
func (c *embeddedClient) isOpen(l *embeddedLog) bool {
	c.openMu.Lock()
	defer c.openMu.Unlock()
	_, ok := c.open[l]
	return ok
}

// idleLoop closes the engines of the logs idle for LogIdleTimeout.
func (c *embeddedClient) idleLoop() {
	defer c.wg.Done()
	idle := c.opts.LogIdleTimeout
	t := time.NewTicker(max(idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.stop.Done():
			return
		case <-t.C:
		}
		before := time.Now().Add(-idle)
		for _, l := range c.openLogs() {
			l.closeIfIdle(before)
		}
	}
}
