package wal

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/units"
	"github.com/ternwal/tern/internal/vfs"
)

// Disk is the filesystem under the logs of one data directory, as their
// appends see it: it keeps a reserve of free space that appends may not use
// (for the metadata store and the subscriptions' cursors on the same disk,
// which cannot survive a full disk as the logs do), remembers whether the
// disk is full, for health reports, and gives the logs' merges of small
// segments their turns (maxMerges at once). Every Log of the directory
// shares one Disk. It is safe for concurrent use. A nil *Disk keeps no
// reserve, remembers nothing and bounds no merges.
type Disk struct {
	fs      vfs.FS
	dir     string
	reserve int64
	now     func() time.Time
	logger  *slog.Logger
	space   func() (vfs.Space, bool, error) // statfs; tests swap it
	onSync  func(time.Duration)             // ObserveSync's; nil: none
	merging chan struct{}                   // a value per merge of small segments under way (maxMerges)

	mu      sync.Mutex
	full    string    // why appends are refused or failing; empty while there is room
	fullAt  int64     // free bytes when the disk was found full, as statfs said
	warned  bool      // a failed statfs was logged
	free    int64     // free bytes at checked, less what was written since
	checked time.Time // zero: never
}

// diskCheckEvery bounds how often a Disk asks the filesystem for its free
// space: more often only when an append would bring the estimate below the
// reserve.
const diskCheckEvery = 5 * time.Millisecond

// clearSlack is how much room a full Disk wants to see freed, and above the
// reserve, before it reports the disk as no longer full by itself (without
// a successful append): so that the report does not flap at the boundary,
// and is not cleared by a filesystem whose statfs shows room it does not
// give (a quota, btrfs metadata).
const clearSlack = 1 << 20

// DefaultReserve is the reserve NewDisk keeps when asked for the default:
// this much, but no more than a tenth of the filesystem.
const DefaultReserve = 256 << 20

// NewDisk returns the Disk of the data directory dir on fs. reserve is the
// free space appends leave: 0 takes DefaultReserve (at most a tenth of the
// filesystem), a negative reserve keeps none. A filesystem that cannot
// report its free space (MemFS) keeps no reserve.
func NewDisk(fs vfs.FS, dir string, reserve int64, logger *slog.Logger) *Disk {
	d := &Disk{fs: fs, dir: dir, reserve: reserve, now: time.Now, logger: logger, merging: make(chan struct{}, maxMerges)}
	if d.logger == nil {
		d.logger = slog.New(slog.DiscardHandler)
	}
	d.space = func() (vfs.Space, bool, error) { return vfs.SpaceOf(d.fs, d.dir) }
	if reserve == 0 {
		d.reserve = DefaultReserve
		if s, ok, err := d.space(); err == nil && ok {
			d.reserve = min(DefaultReserve, s.Total/10)
		}
	}
	d.reserve = max(d.reserve, 0)
	d.logger.Info("appends leave a reserve of free space on the disk", "dir", dir, "reserve", units.FormatBytes(d.reserve))
	return d
}

// ObserveSync makes every fdatasync of a segment of the directory's logs
// report how long it took to fn, which must be cheap and safe for
// concurrent use (a metric). Call it before the Disk is used.
func (d *Disk) ObserveSync(fn func(time.Duration)) { d.onSync = fn }

// sync syncs w, and reports how long it took to the observer.
func (d *Disk) sync(w interface{ Sync() error }) error {
	if d == nil || d.onSync == nil {
		return w.Sync()
	}
	start := time.Now()
	err := w.Sync()
	d.onSync(time.Since(start))
	return err
}

// Full returns the data directory while appends to its logs are refused or
// failing for want of space, or "" when its disk has room: Full reports the
// disk full from the append that found it so (full, or below the reserve)
// until an append succeeds, or statfs shows that space was freed since (a
// MiB more than then, and a MiB above the reserve).
func (d *Disk) Full() string {
	if d == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full == "" {
		return ""
	}
	if s, ok := d.statLocked(false); ok && s.Free >= d.reserve+clearSlack && s.Free >= d.fullAt+clearSlack {
		d.clearLocked()
	}
	if d.full == "" {
		return ""
	}
	return d.dir
}

// admit refuses, with an error wrapping rpcerr.ErrNoSpace, to write n more
// bytes when that would leave less free space than the reserve.
func (d *Disk) admit(n int64) error {
	if d == nil || d.reserve == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.statLocked(d.free-n < d.reserve)
	if !ok || s.Free-n >= d.reserve {
		return nil
	}
	err := fmt.Errorf("%w: the disk of %s has %s free, and appends leave %s free (the reserve, for the metadata and the subscriptions' cursors; --disk-reserve, tern.Options.DiskReserveBytes): appends of %s are refused until space is freed (truncate or delete logs, or free the disk)",
		rpcerr.ErrNoSpace, d.dir, units.FormatBytes(max(s.Free, 0)), units.FormatBytes(d.reserve), units.FormatBytes(n))
	d.setFullLocked(fmt.Sprintf("%s has %s free, below the reserve of %s", d.dir, units.FormatBytes(max(s.Free, 0)), units.FormatBytes(d.reserve)), s.Free)
	return err
}

// maxMerges is how many merges of small sealed segments (merge.go) the
// logs of one data directory run at once: each copies files on the disk
// the appends sync to, and a server that opens many logs with small
// segments at once would otherwise copy them all at the same time.
const maxMerges = 1

// startMerge waits for a merge's turn among the directory's logs, until
// ctx is done: false then. A nil Disk gives every merge a turn at once.
// A true return is paired with endMerge.
func (d *Disk) startMerge(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if d == nil {
		return true
	}
	select {
	case d.merging <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// endMerge ends a merge's turn that startMerge gave.
func (d *Disk) endMerge() {
	if d != nil {
		<-d.merging
	}
}

// room reports whether n more bytes would leave the reserve free, without
// recording the disk as full if not (for a merge, which can wait).
func (d *Disk) room(n int64) bool {
	if d == nil || d.reserve == 0 {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.statLocked(d.free-n < d.reserve)
	return !ok || s.Free-n >= d.reserve
}

// wrote records that n bytes were written: the disk has room.
func (d *Disk) wrote(n int64) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.free -= n
	if d.full != "" {
		d.clearLocked()
	}
}

// Failed returns err, wrapped in rpcerr.ErrNoSpace if it says the disk is
// full (ENOSPC, EDQUOT), and then records that the disk is full. dir is the
// directory written to, named in the error when d is nil.
func (d *Disk) Failed(dir string, err error) error {
	if err == nil || !vfs.IsNoSpace(err) {
		return err
	}
	if d != nil {
		dir = d.dir
		d.mu.Lock()
		s, _ := d.statLocked(true)
		d.setFullLocked(dir+" is full", s.Free)
		d.mu.Unlock()
	}
	return fmt.Errorf("%w: the disk of %s is full (%w): appends are refused until space is freed (truncate or delete logs, or free the disk); nothing acknowledged was lost",
		rpcerr.ErrNoSpace, dir, err)
}

// statLocked returns the filesystem's space, asking it if now is true or
// the last answer is older than diskCheckEvery. ok is false if the
// filesystem cannot tell. The caller holds mu.
func (d *Disk) statLocked(now bool) (vfs.Space, bool) {
	t := d.now()
	if !now && !d.checked.IsZero() && t.Sub(d.checked) < diskCheckEvery {
		return vfs.Space{Free: d.free}, true
	}
	s, ok, err := d.space()
	if err != nil && !d.warned {
		d.warned = true
		d.logger.Warn("the free space of the data directory is unknown: no reserve is kept", "dir", d.dir, "err", err)
	}
	if err != nil || !ok {
		return vfs.Space{}, false
	}
	d.free, d.checked = s.Free, t
	return s, true
}

// setFullLocked records that the disk was found full, with free bytes
// free by statfs (0 if unknown).
func (d *Disk) setFullLocked(why string, free int64) {
	if d.full == "" {
		d.logger.Warn("disk full: appends are refused until space is freed", "dir", d.dir, "why", why)
	}
	d.full, d.fullAt = why, free
}

func (d *Disk) clearLocked() {
	d.logger.Info("disk has room again: appends are taken", "dir", d.dir)
	d.full = ""
}
