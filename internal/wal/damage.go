package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// RepairsName is the file, in a log's directory, that records what each
// repair cut (see the package doc).
const RepairsName = "repairs"

// Damage describes a degraded log: its open segment is damaged before its
// end, in a way recovery does not take for a torn write.
type Damage struct {
	segment.Damage
	// Acked is where the log ended at its last clean close, when that is
	// beyond the valid prefix: the entries from Prefix.Next to Acked were
	// acknowledged and are lost with the cut. 0 when not known.
	Acked uint64
}

// Error is the error a degraded log's appends fail with: it matches
// rpcerr.ErrDamaged and names the file and byte.
func (d *Damage) Error() error {
	return fmt.Errorf("%w: %w; the entries below offset %d can be read, and the log takes no appends until it is repaired (tern log repair shows what the repair would cut)",
		rpcerr.ErrDamaged, &rpcerr.CorruptError{Path: d.Path, Pos: d.Pos, Err: d.Err}, d.Prefix.Next)
}

// Lost says in words what cutting the damaged segment loses.
func (d *Damage) Lost() string {
	s := fmt.Sprintf("%d bytes of %s from byte %d, where the entries from offset %d on were", d.CutBytes(), d.Path, d.Pos, d.Prefix.Next)
	if d.Batches > 0 {
		s += fmt.Sprintf(", among them %d valid batches of %d entries", d.Batches, d.Entries)
	}
	if d.Acked > d.Prefix.Next {
		s += fmt.Sprintf("; offsets %d to %d were acknowledged", d.Prefix.Next, d.Acked-1)
	}
	return s
}

// degrade opens the log in a degraded state when cause, the error recovering
// its open segment at path, is damage: the valid prefix is readable, appends
// fail with rpcerr.ErrDamaged. It returns cause when the log cannot be
// opened so (an I/O error, or a file that cannot be read).
func (l *Log) degrade(path string, cause error) error {
	if !errors.Is(cause, rpcerr.ErrCorrupt) {
		return cause
	}
	sd, err := segment.Inspect(l.opts.FS, path)
	if err != nil || !sd.Damaged() {
		return cause
	}
	d := &Damage{Damage: sd}
	if l.closedAt > sd.Prefix.Next {
		d.Acked = l.closedAt
	}
	l.damage = d
	l.failed = d.Error()
	l.active = sd.Prefix
	l.opts.Logger.Error("log is damaged: its entries up to the damage can be read, and it takes no appends until repaired (tern log repair)",
		"path", sd.Path, "byte", sd.Pos, "valid_until_offset", sd.Prefix.Next, "lost", d.Lost(), "err", cause)
	return nil
}

// Damage returns the damage the log opened with, or nil if it is not
// degraded.
func (l *Log) Damage() *Damage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.damage
}

// Repair returns the damage of a degraded log (nil if it is not degraded).
// With accept, it also cuts the open segment at the end of its valid
// prefix, losing what follows: it first records what it cuts in the file
// "repairs" of the log's directory and removes the closed record (which
// the cut makes wrong), then truncates and syncs the segment, and the log
// takes appends again, from the end of the prefix. A crash in between
// leaves the log degraded, or repaired; never with a cut not recorded.
func (l *Log) Repair(accept bool) (*Damage, error) {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	l.mu.Lock()
	d, closed := l.damage, l.closed
	l.mu.Unlock()
	if d == nil || !accept {
		return d, nil
	}
	if closed {
		return nil, rpcerr.ErrClosed
	}
	if err := l.recordRepair(d); err != nil {
		return nil, err
	}
	if err := l.removeClosed(); err != nil {
		return nil, err
	}
	if err := segment.Cut(l.opts.FS, d.Path, d.Pos); err != nil {
		return nil, err
	}
	var w *segment.Writer
	var info segment.Info
	if d.Pos >= segment.HeaderBytes {
		var err error
		info, w, err = segment.Recover(l.opts.FS, d.Path, 0)
		if err != nil {
			return nil, fmt.Errorf("wal: reopen %s after the repair: %w", d.Path, err)
		}
	}
	l.opts.Logger.Warn("repaired a damaged log: cut its open segment at the end of its valid batches", "path", d.Path, "byte", d.Pos,
		"lost", d.Lost(), "record", l.opts.Dir+"/"+RepairsName)
	l.w = l.ahead(w)
	l.mu.Lock()
	// With no writer (the file had no valid header and went whole), the
	// next append creates the segment again, at the same offset.
	l.active, l.damage, l.failed, l.closedAt = info, nil, nil, 0
	l.mu.Unlock()
	return d, nil
}

// recordRepair appends a line saying what the repair of d cuts to the
// file "repairs", durably.
func (l *Log) recordRepair(d *Damage) error {
	path := l.opts.Dir + "/" + RepairsName
	old, err := vfs.ReadFile(l.opts.FS, path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wal: read %s: %w", path, err)
	}
	line := fmt.Sprintf("%s cut %s at byte %d (file size %d): the log ends at offset %d; lost: %s; damage: %v\n",
		l.opts.Now().UTC().Format(time.RFC3339), d.Path, d.Pos, d.Size, d.Prefix.Next, d.Lost(), d.Err)
	if err := vfs.ReplaceFile(l.opts.FS, path, append(old, line...)); err != nil {
		return fmt.Errorf("wal: write %s: %w", path, err)
	}
	return nil
}

// removeClosed removes the closed record, if there is one, durably.
func (l *Log) removeClosed() error {
	err := l.opts.FS.Remove(l.closedPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = l.opts.FS.SyncDir(l.opts.Dir)
	}
	if err != nil {
		return fmt.Errorf("wal: remove %s: %w", l.closedPath(), err)
	}
	return nil
}
