package wal

import (
	"fmt"
	"log/slog"
	"sort"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/vfs"
)

// Finding is one thing Check found in a log's segment files.
type Finding struct {
	Path string
	Pos  int64
	// Damage is true for damaged data; false for a note, such as the torn
	// tail a crash leaves, which the next open cuts.
	Damage bool
	What   string
}

// CheckResult is what Check found in one log's directory.
type CheckResult struct {
	Segments int
	Start    uint64 // the first segment's base offset
	End      uint64 // the offset after the last valid entry
	Findings []Finding
}

// Damaged reports whether any finding is damage.
func (r CheckResult) Damaged() bool {
	for _, f := range r.Findings {
		if f.Damage {
			return true
		}
	}
	return false
}

// Check verifies, without changing anything, every segment file of the
// log in dir: each batch's CRC and offsets, the footers of the sealed
// segments, that the segments are contiguous, and the open segment's tail
// (against the closed record, if there is one). It is safe on a log another
// process has open, whose open segment may be growing meanwhile: a torn tail
// there is reported as a note. It fails only when the files cannot be read.
func Check(fs vfs.FS, dir string) (CheckResult, error) {
	names, err := fs.List(dir)
	if err != nil {
		return CheckResult{}, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	var paths, temps []string
	for _, name := range names {
		if _, ok := segment.ParseFileName(name); ok {
			paths = append(paths, dir+"/"+name)
		}
		if isMergeTemp(name) {
			temps = append(temps, dir+"/"+name)
		}
	}
	sort.Strings(paths)
	l := &Log{opts: Options{FS: fs, Dir: dir, Logger: slog.New(slog.DiscardHandler)}}
	closedAt, err := l.readClosed()
	if err != nil {
		return CheckResult{}, err
	}
	var r CheckResult
	r.Segments = len(paths)
	damage := func(path string, err error) {
		ce, ok := rpcerr.As[*rpcerr.CorruptError](err)
		if !ok {
			r.Findings = append(r.Findings, Finding{Path: path, Damage: true, What: err.Error()})
			return
		}
		r.Findings = append(r.Findings, Finding{Path: ce.Path, Pos: ce.Pos, Damage: true, What: ce.Err.Error()})
	}
	for _, path := range temps {
		r.Findings = append(r.Findings, Finding{Path: path,
			What: "the file of a merge of small segments, in progress or cut short by a crash (harmless: the segments it copies are all there, and the next open removes it)"})
	}
	next, known := uint64(0), false
	var prev segment.Info // the last sealed segment, if it was the one before
	for i, path := range paths {
		base, _ := segment.ParseFileName(path)
		if i == 0 {
			r.Start = base
		}
		info, err := segment.Verify(fs, path)
		if err == nil && known && prev.Sealed && coveredBy(info, prev) {
			r.Segments--
			r.Findings = append(r.Findings, Finding{Path: path,
				What: fmt.Sprintf("a segment merged into %s, whose file a crash kept from being removed (harmless: the next open removes it)", prev.Path)})
			continue
		}
		prev = segment.Info{}
		if known && base != next {
			r.Findings = append(r.Findings, Finding{Path: path, Damage: true,
				What: fmt.Sprintf("segments are not contiguous: offsets %d to %d are missing", next, base)})
		}
		if err == nil {
			next, known, prev = info.Next, true, info
			continue
		}
		if _, ok := rpcerr.As[*rpcerr.CorruptError](err); !ok {
			return CheckResult{}, err
		}
		if i < len(paths)-1 {
			damage(path, err)
			next, known = 0, false
			continue
		}
		if sealed, serr := segment.ReadSealed(fs, path); serr == nil {
			damage(path, err) // a sealed segment whose batches disagree with its footer
			next, known = sealed.Next, true
			continue
		}
		// The last segment is open: scan it as recovery would.
		d, ierr := segment.Inspect(fs, path)
		if ierr != nil {
			return CheckResult{}, ierr
		}
		next, known = d.Prefix.Next, true
		switch {
		case !d.Damaged():
		case d.Zeros && d.Prefix.Next >= closedAt:
			r.Findings = append(r.Findings, Finding{Path: path, Pos: d.Pos,
				What: fmt.Sprintf("%d bytes of zeros after offset %d (written ahead of the appends, or a write a crash tore; the next open cuts them)", d.CutBytes(), d.Prefix.Next)})
		case d.TornTail() && d.Prefix.Next >= closedAt:
			r.Findings = append(r.Findings, Finding{Path: path, Pos: d.Pos,
				What: fmt.Sprintf("torn tail of %d bytes after offset %d (left by a crash, or an append in flight; the next open cuts it): %v", d.CutBytes(), d.Prefix.Next, d.Err)})
		default:
			dd := Damage{Damage: d}
			if closedAt > d.Prefix.Next {
				dd.Acked = closedAt
			}
			r.Findings = append(r.Findings, Finding{Path: path, Pos: d.Pos, Damage: true,
				What: fmt.Sprintf("%v; the log opens degraded, and tern log repair --accept-loss would cut %s", d.Err, dd.Lost())})
		}
	}
	if known {
		r.End = next
	}
	if r.End < closedAt && !r.Damaged() {
		r.Findings = append(r.Findings, Finding{Path: dir, Damage: true,
			What: fmt.Sprintf("the log ends at offset %d, but it was closed at offset %d: the segments holding the rest are missing", r.End, closedAt)})
	}
	return r, nil
}
