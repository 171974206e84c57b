package wal

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"strings"

	"github.com/ternwal/tern/internal/segment"
)

// mergeSuffix ends the name of the file a merge writes before renaming it
// over the first merged segment's file: it is no segment's name
// (segment.ParseFileName refuses it), and Open removes it.
const mergeSuffix = ".merging"

// mergeMinFiles is how many files a run of small segments needs to be merged
// even when its other files are small next to its largest (mergeRun).
const mergeMinFiles = 8

// errMergeMoot is why a merge gives up without damage: the segments changed
// (retention, a truncation or a reopen took one of them) while it copied.
var errMergeMoot = errors.New("wal: the segments to merge changed meanwhile")

// mergeLimits returns the size under which a sealed segment is small and
// the most bytes a merged file may have; small is 0 if merging is off.
func (l *Log) mergeLimits() (small, most int64) {
	most = l.opts.SegmentBytes / 2
	switch s := l.opts.MergeSmall; {
	case s < 0:
		return 0, most
	case s == 0:
		return l.opts.SegmentBytes / 8, most
	default:
		return min(s, most), most
	}
}

// mergeRun returns the oldest run of sealed segments to merge, as the index
// of its first in sealed and its length (0 if there is none): two or more
// adjacent segments whose files are each under small bytes and together at
// most most bytes, whose newest entries' times (MaxTime) lie within span
// nanoseconds of the first's (if span > 0), and whose files other than the
// largest hold at least an eighth of the largest's bytes, or which are
// mergeMinFiles or more. That last rule keeps a merged file from being
// copied again for every small segment sealed after it: merged files grow
// by a factor each time, and at most mergeMinFiles-1 small files wait
// beside one.
func mergeRun(sealed []segment.Info, small, most, span int64) (k, n int) {
	if small <= 0 {
		return 0, 0
	}
	for i := range sealed {
		var total, largest int64
		j := i
		for ; j < len(sealed); j++ {
			s := sealed[j]
			if s.Size >= small || total+s.Size > most || (j > i && s.Base != sealed[j-1].Next) ||
				(span > 0 && s.MaxTime-sealed[i].MaxTime > span) {
				break
			}
			total += s.Size
			largest = max(largest, s.Size)
		}
		if j-i >= 2 && (j-i >= mergeMinFiles || (total-largest)*8 >= largest) {
			return i, j - i
		}
	}
	return 0, 0
}

// startMerges starts the goroutine that merges small sealed segments, and
// asks it to look at the segments recovery found.
func (l *Log) startMerges() {
	l.mergeKick = make(chan struct{}, 1)
	l.mergeDone = make(chan struct{})
	l.mergeCtx, l.mergeStop = context.WithCancel(context.Background())
	go l.merger()
	l.kickMerge()
}

// kickMerge asks the merger to look for small sealed segments to merge; it
// never blocks.
func (l *Log) kickMerge() {
	if l.mergeKick == nil {
		return
	}
	select {
	case l.mergeKick <- struct{}{}:
	default:
	}
}

// stopMerges stops the merger, cutting a merge in progress short, and waits
// for it.
func (l *Log) stopMerges() {
	if l.mergeStop == nil {
		return
	}
	l.mergeStop()
	<-l.mergeDone
}

func (l *Log) merger() {
	defer close(l.mergeDone)
	for {
		select {
		case <-l.mergeCtx.Done():
			return
		case <-l.mergeKick:
		}
		if _, err := l.mergeAll(l.mergeCtx); err != nil && l.mergeCtx.Err() == nil {
			l.opts.Logger.Warn("merging small sealed segments failed; their files are left as they were", "dir", l.opts.Dir, "err", err)
		}
	}
}

// mergeAll merges runs of small sealed segments (mergeRun) one after the
// other until none is left, and returns how many merges it made. One
// mergeAll runs at a time. A merge that finds its segments changed
// meanwhile ends it without an error.
func (l *Log) mergeAll(ctx context.Context) (int, error) {
	l.mergeMu.Lock()
	defer l.mergeMu.Unlock()
	done := 0
	for ctx.Err() == nil {
		merged, err := l.mergeOnce(ctx)
		if errors.Is(err, errMergeMoot) {
			return done, nil
		}
		if err != nil || !merged {
			return done, err
		}
		done++
	}
	return done, nil
}

// mergeOnce merges the oldest run of small sealed segments, if there is
// one. The caller holds mergeMu.
//
// The batches are copied into a temporary file without holding commitMu:
// sealed segments do not change. Only the switch holds it (and mu
// briefly): the run is checked to be still in the log (retention, a
// truncation or a reopen of the newest segment may have taken one of its
// segments: then the merge gives up), the file renamed over the first
// segment's, which keeps its name (same base), the directory synced, and
// the sealed list updated. The other segments' files are then removed and
// the directory synced. A crash leaves the temporary file (Open removes
// it), or the merged file and some of the others, wholly covered by it
// (Open removes them too).
func (l *Log) mergeOnce(ctx context.Context) (bool, error) {
	if len(l.nextRun()) == 0 {
		return false, nil // no turn taken: a log with nothing to merge never waits
	}
	// One merge at a time among the data directory's logs; the run is
	// taken again once it is this one's turn.
	if !l.opts.Disk.startMerge(ctx) {
		return false, ctx.Err()
	}
	defer l.opts.Disk.endMerge()
	run := l.nextRun()
	if len(run) == 0 {
		return false, nil
	}
	var bytes int64
	for _, s := range run {
		bytes += s.Size
	}
	if !l.opts.Disk.room(bytes) {
		return false, nil
	}
	tmp := run[0].Path + mergeSuffix
	merged, err := segment.WriteMerged(ctx, l.opts.FS, tmp, run)
	if err != nil {
		l.mu.Lock()
		k := l.runAt(run)
		l.mu.Unlock()
		if k < 0 {
			// Dropped meanwhile, its file perhaps written over by a
			// new segment: the copy found batches it did not expect.
			return false, errMergeMoot
		}
		return false, err
	}
	if err := l.switchMerged(run, merged, tmp); err != nil {
		return false, err
	}
	fs := l.opts.FS
	var rmErr error
	for _, s := range run[1:] {
		if err := fs.Remove(s.Path); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			rmErr = errors.Join(rmErr, fmt.Errorf("wal: remove %s, merged into %s: %w", s.Path, merged.Path, err))
		}
	}
	if err := fs.SyncDir(l.opts.Dir); err != nil {
		rmErr = errors.Join(rmErr, fmt.Errorf("wal: sync %s after a merge: %w", l.opts.Dir, err))
	}
	l.opts.Logger.Info("merged small sealed segments into one file",
		"dir", l.opts.Dir, "files", len(run), "bytes", bytes, "into", merged.Path, "merged_bytes", merged.Size,
		"from", merged.Base, "to", merged.Next)
	// The merge stands: files left behind are removed by the next Open.
	return true, rmErr
}

// nextRun returns a copy of the oldest run of sealed segments to merge
// (mergeRun), or none if there is none or the log is closed, failed or
// degraded.
func (l *Log) nextRun() []segment.Info {
	small, most := l.mergeLimits()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil || l.damage != nil {
		return nil
	}
	sealed := l.sealed
	if l.active.Path == "" && len(sealed) > 0 {
		// The newest may be reopened by the next append.
		sealed = sealed[:len(sealed)-1]
	}
	// Retention by age drops a segment when its newest entry is older
	// than the age: a merged file keeps its oldest entries at most an
	// eighth of the age longer than their own segments would have.
	k, n := mergeRun(sealed, small, most, int64(l.opts.RetentionAge/8))
	return append([]segment.Info(nil), sealed[k:k+n]...)
}

// switchMerged puts the merged file, written at tmp, in the place of the
// run's segments. If it returns an error, the log still holds the run as
// it was; the merged file may be in place of the first segment's (with
// its batches at the same positions, so its Info still reads right), and
// the next Open removes the other files it covers.
func (l *Log) switchMerged(run []segment.Info, merged segment.Info, tmp string) error {
	fs := l.opts.FS
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	l.mu.Lock()
	k := l.runAt(run)
	l.mu.Unlock()
	if k < 0 {
		fs.Remove(tmp) // best effort: Open removes it too
		return errMergeMoot
	}
	if err := fs.Rename(tmp, merged.Path); err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("wal: rename %s over %s: %w", tmp, merged.Path, err)
	}
	if err := fs.SyncDir(l.opts.Dir); err != nil {
		return fmt.Errorf("wal: sync %s after renaming %s over %s: %w", l.opts.Dir, tmp, merged.Path, err)
	}
	l.mu.Lock()
	l.sealed = append(append(l.sealed[:k:k], merged), l.sealed[k+len(run):]...)
	l.merges++
	l.mu.Unlock()
	return nil
}

// runAt returns where run lies in the sealed segments, unchanged, or -1.
// The caller holds mu.
func (l *Log) runAt(run []segment.Info) int {
	for k, s := range l.sealed {
		if s.Path != run[0].Path {
			continue
		}
		if k+len(run) > len(l.sealed) {
			return -1
		}
		for i, r := range run {
			if t := l.sealed[k+i]; t.Path != r.Path || t.Next != r.Next || t.Size != r.Size {
				return -1
			}
		}
		return k
	}
	return -1
}

// isMergeTemp reports whether name is that of a merge's temporary file.
func isMergeTemp(name string) bool {
	base, ok := strings.CutSuffix(name, mergeSuffix)
	if !ok {
		return false
	}
	_, ok = segment.ParseFileName(base)
	return ok
}

// coveredBy reports whether the sealed segment s lies wholly within prev,
// the segment before it: a merge copied it into prev and a crash came before
// its file was removed.
func coveredBy(s, prev segment.Info) bool {
	return prev.Sealed && s.Sealed && s.Base >= prev.Base && s.Base < prev.Next && s.Next <= prev.Next
}
