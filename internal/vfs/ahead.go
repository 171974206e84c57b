package vfs

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// DefaultAhead and DefaultAheadRound are what the logs and the replica
// journals give Ahead.Start unless told otherwise: zeros pay for rounds of
// a few KiB (a 1 KiB sync's p50 falls by about a third on ext4) and cost
// throughput at rounds of a few hundred KiB (docs/benchmarks/notes.md,
// "Zeros written ahead").
const (
	DefaultAhead      = 1 << 20
	DefaultAheadRound = 64 << 10
)

// Ahead keeps a file that grows by appends written with zeros past the end
// of its data while the data comes in small rounds, a sync each. Appending
// to a file makes each fdatasync also commit the blocks and the size the
// file grew by (on ext4, a journal commit); a sync of data written over
// zeros already synced does not, which makes a small round's sync about a
// third faster there. Zeros are written once per ahead/2 bytes of data and
// committed by the next sync. With large rounds they would cost more
// writing than they spare, so Ahead measures the bytes written per sync
// over each ahead/2 bytes and writes none while they average more than
// round.
//
// The zero value writes nothing ahead. Start, Wrote and Cut are called by
// the one goroutine that writes the file; Synced may be called from any
// goroutine. A reader of the file must find where the data ends by its own
// means (a format whose records are never all zeros): the zeros are no
// data, and whoever seals or recovers the file cuts them off.
type Ahead struct {
	ahead, round int64
	zeroed       int64 // the file has blocks, data or zeros, up to here
	check        int64 // the rounds are measured again once the data reaches it
	from         int64 // the data's end at the last measure
	syncsAt      int64 // syncs at the last measure
	syncs        atomic.Int64
	tail         bool // zeros may follow the data
}

// Start makes a write zeros up to ahead bytes past the data of f, which ends
// at end, while the data comes in rounds of at most round bytes a sync.
// ahead <= 0 writes none.
func (a *Ahead) Start(f File, end, ahead, round int64) {
	a.ahead, a.round = ahead, round
	a.from, a.syncsAt = end, a.syncs.Load()
	// The first measure comes early: a file synced at each small append
	// gains from its first MiB on.
	a.check = end + ahead/8
	a.zeroed = end
	if size, err := f.Size(); err == nil {
		a.zeroed = max(end, size)
	}
}

// Wrote records that the data of f now ends at end, and writes zeros ahead
// of it when it is time and the rounds have been small. A failure to write
// them (a full disk) only ends the writing ahead: the data is whole, and
// zeros after it are no damage.
func (a *Ahead) Wrote(f File, end int64) {
	if a.ahead <= 0 || end < a.check {
		return
	}
	syncs := a.syncs.Load()
	small := syncs > a.syncsAt && (end-a.from)/(syncs-a.syncsAt) <= a.round
	a.from, a.syncsAt, a.check = end, syncs, end+a.ahead/2
	if !small || end+a.ahead <= a.zeroed {
		return
	}
	a.tail = true // even if Extend fails: it may have written some
	if err := f.Extend(end + a.ahead); err != nil {
		a.ahead = 0
		return
	}
	a.zeroed = end + a.ahead
}

// Synced counts a sync of the file.
func (a *Ahead) Synced() { a.syncs.Add(1) }

// Cut records that the file was cut at end, zeros and all.
func (a *Ahead) Cut(end int64) {
	a.zeroed, a.from = end, min(a.from, end)
}

// Tail reports whether zeros may follow the data: a file whose data ends
// before its end must be cut there when it is sealed.
func (a *Ahead) Tail() bool { return a.tail }

// AllZero reports whether every byte in [from, size) of f is zero, as the
// bytes Ahead writes are.
func AllZero(f File, from, size int64) (bool, error) {
	if from >= size {
		return true, nil
	}
	buf := make([]byte, min(size-from, 1<<20))
	for at := from; at < size; at += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-at)]
		if _, err := f.ReadAt(b, at); err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("read %s: %w", f.Name(), err)
		}
		for _, c := range b {
			if c != 0 {
				return false, nil
			}
		}
	}
	return true, nil
}
